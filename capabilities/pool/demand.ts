/**
 * Boxes that asked each pool for a standby, by time: the demand an autoscaling pool follows
 * (`spec.autoscale`). Kept in memory only: after a restart a pool holds the standbys it has for a
 * window ({@link demandTarget}), so nothing is removed before demand is known again.
 */
export class PoolDemand {
  readonly #asks = new Map<string, number[]>();

  /** A box asked the pool for a standby (served or not). */
  record(poolKey: string, atMs: number): void {
    const asks = this.#asks.get(poolKey) ?? [];
    asks.push(atMs);
    this.#asks.set(poolKey, asks);
  }

  /** The asks since that moment; older ones are forgotten. */
  since(poolKey: string, sinceMs: number): number {
    const asks = this.#asks.get(poolKey);
    if (!asks) return 0;
    const kept = asks.filter(t => t > sinceMs);
    if (kept.length > 0) this.#asks.set(poolKey, kept);
    else this.#asks.delete(poolKey);
    return kept.length;
  }

  forget(poolKey: string): void {
    this.#asks.delete(poolKey);
  }
}

/** An autoscaling pool's target, and since when it has been needed. */
export type HeldTarget = { target: number; neededSinceMs: number };

/**
 * The standbys an autoscaling pool keeps: one for each ask of the last window, within the floor
 * (`spec.replicas`) and the ceiling (`autoscale.maxReplicas`). A higher target is taken at once;
 * a lower one only once the held one has not been needed for a whole window, so that standbys
 * are not removed one by one as asks age out, nor right after a restart (which holds what
 * exists). `recheckInMs`: when to look again while the target is above the floor, since the
 * asks ageing out bring no event. Pure.
 */
export function demandTarget(input: {
  floor: number;
  ceiling: number;
  asks: number;
  standbys: number;
  nowMs: number;
  windowMs: number;
  held?: HeldTarget;
}): { held: HeldTarget; recheckInMs?: number } {
  const { floor, ceiling, nowMs, windowMs } = input;
  const clamp = (n: number) => Math.min(ceiling, Math.max(floor, n));
  const want = clamp(input.asks);
  const prev = input.held ?? { target: clamp(input.standbys), neededSinceMs: nowMs };
  const held =
    want >= prev.target
      ? { target: want, neededSinceMs: nowMs }
      : nowMs - prev.neededSinceMs >= windowMs
        ? { target: want, neededSinceMs: nowMs }
        : {
            target: Math.min(ceiling, Math.max(floor, prev.target)),
            neededSinceMs: prev.neededSinceMs,
          };
  return held.target > floor
    ? { held, recheckInMs: Math.max(0, held.neededSinceMs + windowMs - nowMs) }
    : { held };
}
