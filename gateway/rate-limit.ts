/**
 * Token buckets, one per key (a tenant's namespace): each holds at most `burst` tokens, refilled
 * at `perSecond`, and a call takes one. E2B limits its API per team and answers 429 with
 * `Retry-After`, which its SDKs wait for and retry. Pure but for the clock, which is injected.
 */
export class TokenBuckets {
  /** Each key's tokens when last counted, and when (the clock's milliseconds). */
  readonly #buckets = new Map<string, { tokens: number; at: number }>();

  constructor(
    readonly perSecond: number,
    readonly burst: number,
    private readonly now: () => number = () => performance.now(),
  ) {
    if (!(perSecond > 0 && burst >= 1)) throw new Error("a token bucket needs a rate and a burst");
  }

  /**
   * Takes a token from the key's bucket: 0 when one was there, else the seconds until one will
   * be (nothing is taken then). A key's bucket starts full. Keys are tenants' namespaces, known
   * by their API keys: the map holds one entry per tenant, and is never pruned.
   */
  take(key: string): number {
    const now = this.now();
    const last = this.#buckets.get(key);
    const refilled = last ? ((now - last.at) / 1000) * this.perSecond : this.burst;
    const tokens = Math.min(this.burst, (last?.tokens ?? 0) + refilled);
    if (tokens >= 1) {
      this.#buckets.set(key, { tokens: tokens - 1, at: now });
      return 0;
    }
    this.#buckets.set(key, { tokens, at: now });
    return (1 - tokens) / this.perSecond;
  }
}

/** `Retry-After` for a wait: whole seconds (as the SDKs read it), at least one. */
export const retryAfterSeconds = (wait: number) => Math.max(1, Math.ceil(wait));
