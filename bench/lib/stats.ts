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
