/**
 * When an open loop sends each of one second's requests, in ms from its start (ascending, in
 * [0, 1000)).
 */

/**
 * `perSecond` a second as independent clients send them: a Poisson process, its gaps exponential.
 * Seeded, so that every path compared in a round meets the same arrivals.
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

/** `perSecond` a second in groups of `size` sent together, evenly spaced: a bursty client. */
export function inGroups(perSecond: number, size: number): number[] {
  const every = (1000 * size) / perSecond;
  return Array.from({ length: perSecond }, (_, i) => Math.floor(i / size) * every);
}
