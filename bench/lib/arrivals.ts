/**
 * Open loops: requests sent on a clock whatever the answers do, as independent users send them;
 * and the clocks, each the times (ms from the start, ascending) at which requests are sent.
 */
import { now, sleep } from "./stats";

/**
 * One second of `perSecond` a second as independent clients send them: a Poisson process, its
 * gaps exponential. Seeded, so that every path compared in a round meets the same arrivals.
 */
export function poissonArrivals(perSecond: number, seed: number): number[] {
  let state = seed >>> 0;
  // mulberry32: small, and uniform enough for gaps.
  const random = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = Math.imul(state ^ (state >>> 15), state | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
  const gap = () => -Math.log(1 - random()) * (1000 / perSecond);
  const at: number[] = [];
  for (let t = gap(); t < 1000; t += gap()) at.push(t);
  return at;
}

/** `seconds` seconds of {@link poissonArrivals}, each second seeded in turn from `seed`. */
export function poissonSeconds(perSecond: number, seconds: number, seed: number): number[] {
  return Array.from({ length: seconds }, (_, s) =>
    poissonArrivals(perSecond, seed + s).map(t => t + 1000 * s),
  ).flat();
}

/** One second of `perSecond` a second in groups of `size` sent together, evenly spaced. */
export function inGroups(perSecond: number, size: number): number[] {
  const every = (1000 * size) / perSecond;
  return Array.from({ length: perSecond }, (_, i) => Math.floor(i / size) * every);
}

/** `count` requests, one every `everyMs`: a steady stream. */
export function steady(count: number, everyMs: number): number[] {
  return Array.from({ length: count }, (_, i) => i * everyMs);
}

/**
 * Calls `send(i)` at time `arrivals[i]` from now, or as soon after as the timers allow, without
 * waiting for earlier calls to finish; resolves with their results, and the rate they were sent
 * at (per second).
 */
export async function openLoop<T>(
  arrivals: number[],
  send: (i: number) => Promise<T>,
): Promise<{ results: T[]; rate: number }> {
  const pending: Promise<T>[] = [];
  const t0 = now();
  for (let i = 0; i < arrivals.length; ) {
    while (i < arrivals.length && arrivals[i] <= now() - t0) pending.push(send(i++));
    if (i < arrivals.length) await sleep(arrivals[i] - (now() - t0));
  }
  const results = await Promise.all(pending);
  return { results, rate: pending.length / ((now() - t0) / 1000) };
}
