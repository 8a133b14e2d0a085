import {
  inGroups,
  openLoop,
  poissonArrivals,
  poissonSeconds,
  steady,
} from "../../../bench/lib/arrivals";

describe("poissonArrivals", () => {
  it("sends about the rate asked, within one second, in order", () => {
    for (const seed of [1, 2, 3, 42]) {
      const at = poissonArrivals(1000, seed);
      // A Poisson count of mean 1,000 has a standard deviation of about 32.
      expect(at.length).toBeGreaterThan(1000 - 4 * 32);
      expect(at.length).toBeLessThan(1000 + 4 * 32);
      expect(at[0]).toBeGreaterThanOrEqual(0);
      expect(at[at.length - 1]).toBeLessThan(1000);
      expect(at.every((t, i) => i === 0 || t >= at[i - 1])).toBe(true);
    }
  });

  it("spaces requests as independent clients do: exponential gaps, not groups", () => {
    const at = poissonArrivals(1000, 7);
    const gaps = at.slice(1).map((t, i) => t - at[i]);
    const mean = gaps.reduce((a, b) => a + b, 0) / gaps.length;
    expect(mean).toBeCloseTo(1, 0);
    // For exponential gaps of mean 1 ms, about 1 - e^-1 (63%) are shorter than the mean.
    const short = gaps.filter(g => g < mean).length / gaps.length;
    expect(short).toBeGreaterThan(0.55);
    expect(short).toBeLessThan(0.7);
  });

  it("gives the same arrivals for the same seed, and others for another", () => {
    expect(poissonArrivals(1000, 5)).toEqual(poissonArrivals(1000, 5));
    expect(poissonArrivals(1000, 5)).not.toEqual(poissonArrivals(1000, 6));
  });
});

describe("poissonSeconds", () => {
  it("puts each second's arrivals after the last, each second seeded in turn", () => {
    const at = poissonSeconds(50, 3, 10);
    const second = (s: number) => poissonArrivals(50, 10 + s).map(t => t + 1000 * s);
    expect(at).toEqual([...second(0), ...second(1), ...second(2)]);
    expect(at.every((t, i) => i === 0 || t >= at[i - 1])).toBe(true);
    expect(at[at.length - 1]).toBeLessThan(3000);
  });

  it("gives the same arrivals each time, so that phases compared meet the same ones", () => {
    expect(poissonSeconds(20, 5, 1)).toEqual(poissonSeconds(20, 5, 1));
  });
});

describe("inGroups", () => {
  it("sends the rate in groups sent together, evenly spaced", () => {
    const at = inGroups(1000, 10);
    expect(at).toHaveLength(1000);
    expect(at.slice(0, 10)).toEqual(Array(10).fill(0));
    expect(at[10]).toBe(10);
    expect(at[999]).toBe(990);
  });
});

describe("steady", () => {
  it("sends one every interval from the start", () => {
    expect(steady(4, 125)).toEqual([0, 125, 250, 375]);
  });
});

describe("openLoop", () => {
  it("sends each at its time or after, without waiting for earlier answers", async () => {
    const t0 = performance.now();
    const sentAt: number[] = [];
    let release = () => {};
    const held = new Promise<void>(r => (release = r));
    const { results, rate } = await openLoop([0, 20, 40], async i => {
      sentAt.push(performance.now() - t0);
      // The first answer comes only after the last request was sent.
      if (i === 0) await held;
      if (i === 2) release();
      return i * 10;
    });
    expect(results).toEqual([0, 10, 20]);
    expect(sentAt).toHaveLength(3);
    for (const [i, at] of [0, 20, 40].entries()) expect(sentAt[i]).toBeGreaterThanOrEqual(at - 1);
    expect(rate).toBeGreaterThan(0);
  });
});
