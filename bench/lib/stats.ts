export type Stats = { n: number; p50: number; p95: number; p99: number; max: number };

export function stats(ms: number[]): Stats {
  const s = [...ms].sort((a, b) => a - b);
  const q = (p: number) => s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
  const [p50, p95, p99, max] = [q(50), q(95), q(99), s[s.length - 1]].map(tenths);
  return { n: s.length, p50, p95, p99, max };
}
export const tenths = (x: number) => Math.round(x * 10) / 10;
export const hundredths = (x: number) => Math.round(x * 100) / 100;
export const sleep = (ms: number) => new Promise(r => setTimeout(r, ms));
export const now = () => performance.now();

/**
 * Each of a summary's p50, p99 and max as a multiple of the same figure of `floor` (a run of the
 * same calls without the load under test).
 */
export function ratios(over: Stats, floor: Stats): { p50: number; p99: number; max: number } {
  const ratio = (a: number, b: number) => hundredths(a / b);
  return {
    p50: ratio(over.p50, floor.p50),
    p99: ratio(over.p99, floor.p99),
    max: ratio(over.max, floor.max),
  };
}
