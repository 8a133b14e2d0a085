import { ratios, stats } from "../../../bench/lib/stats";

describe("stats", () => {
  it("reads each percentile as the sample at or above its share", () => {
    const s = stats(Array.from({ length: 100 }, (_, i) => 100 - i));
    expect(s).toEqual({ n: 100, p50: 50, p95: 95, p99: 99, max: 100 });
  });
});

describe("ratios", () => {
  it("gives each of p50, p99 and max over the floor's, in hundredths", () => {
    const floor = { n: 500, p50: 1.2, p95: 2, p99: 3, max: 4 };
    const over = { n: 500, p50: 1.5, p95: 9, p99: 10, max: 4 };
    expect(ratios(over, floor)).toEqual({ p50: 1.25, p99: 3.33, max: 1 });
  });

  it("gives 1 for the same figures: a load that changed nothing", () => {
    const s = stats([1, 2, 3, 4, 5]);
    expect(ratios(s, s)).toEqual({ p50: 1, p99: 1, max: 1 });
  });
});
