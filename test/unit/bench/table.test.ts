import { table } from "../../../bench/table";

// The table is built without Prettier, which formats only the written document; its module loads
// a part of itself by dynamic import, which Jest's CommonJS runtime refuses.
jest.mock("prettier", () => ({ format: jest.fn(), resolveConfig: jest.fn() }));

describe("table", () => {
  it("shows the flood's latencies as rows and its other figures as figures", () => {
    const latency = { n: 500, p50: 1.1, p95: 1.8, p99: 2.4, max: 5 };
    const md = table({
      date: "2026-12-07T00:00:00.000Z",
      machine: { cpus: 2, cpuModel: "test", memoryGiB: 4 },
      results: {
        flood: {
          what: "a tenant alone and during another's flood (ms)",
          victimAlone: latency,
          victimFlooded: { ...latency, p99: 4.8 },
          victimFloodedOverAlone: { p50: 1, p99: 2, max: 1 },
          flooder: { connections: 256, okPerS: 50.1, tooManyPercent: 99.1 },
        },
      },
    });
    expect(md).toContain("### flood");
    expect(md).toContain("Rerun: `npm run bench -- flood`.");
    expect(md).toContain("| victimAlone | 500 | 1.1 | 1.8 | 2.4 | 5 |");
    expect(md).toContain("| victimFlooded | 500 | 1.1 | 1.8 | 4.8 | 5 |");
    expect(md).toContain("| victimFloodedOverAlone | p50 1, p99 2, max 1 |");
    expect(md).toContain("| flooder | connections: 256; okPerS: 50.1; tooManyPercent: 99.1 |");
  });
});
