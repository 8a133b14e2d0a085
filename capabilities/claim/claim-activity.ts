import type { QuietSource } from "../kit/deferred-writes";

/**
 * When the last warm claim started, and how many are in flight: what deferred writes and the
 * pools' replenishment wait on, so that nothing that can wait competes with a claim.
 */
export class ClaimActivity implements QuietSource {
  last?: number;
  #inFlight = 0;
  #waiters: (() => void)[] = [];

  constructor(readonly now: () => number = () => performance.now()) {}

  /** A claim has started: deferred writes wait until claims are quiet again. */
  started(): void {
    this.last = this.now();
  }

  /** Runs a claim's urgent part, counted as in flight until it settles. */
  async during<T>(claim: () => Promise<T>): Promise<T> {
    this.started();
    this.#inFlight++;
    try {
      return await claim();
    } finally {
      if (--this.#inFlight === 0) {
        const waiters = this.#waiters;
        this.#waiters = [];
        waiters.forEach(w => w());
      }
    }
  }

  /**
   * Resolves once no claim is in flight, or after `maxWaitMs` at the latest (a claim stuck on a
   * dead connection must not hold the caller for the request timeout).
   */
  noneInFlight(maxWaitMs: number): Promise<void> {
    if (this.#inFlight === 0) return Promise.resolve();
    return new Promise(resolve => {
      const timer = setTimeout(resolve, maxWaitMs);
      timer.unref?.();
      this.#waiters.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }
}
