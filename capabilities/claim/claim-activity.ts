import type { QuietSource } from "../kit/deferred-writes";

/**
 * When warm claims were last under way: what deferred writes and the pools' replenishment wait
 * on, so that nothing that can wait competes with a claim. A claim counts from the moment its
 * box's event is seen, not only once it starts: when the module lags behind a stream of claims,
 * the boxes waiting their turn are the stream, and a gap between two starts is not quiet.
 */
export class ClaimActivity implements QuietSource {
  #last?: number;
  #inFlight = 0;
  readonly #queued = new Set<string>();
  #waiters: (() => void)[] = [];

  constructor(readonly now: () => number = () => performance.now()) {}

  /** When claims were last under way: now while one waits or is in flight. */
  get last(): number | undefined {
    if (this.#queued.size > 0 || this.#inFlight > 0) return this.now();
    return this.#last;
  }

  /** A claim has started: deferred writes wait until claims are quiet again. */
  started(): void {
    this.#last = this.now();
  }

  /** The box under `key` waits to claim: claims are under way until it is taken. */
  queued(key: string): void {
    this.#queued.add(key);
  }

  /** The box under `key` no longer waits: its claim runs now, or never. */
  taken(key: string): void {
    if (this.#queued.delete(key)) this.started();
  }

  /** Runs a claim's urgent part, counted as in flight until it settles. */
  async during<T>(claim: () => Promise<T>): Promise<T> {
    this.started();
    this.#inFlight++;
    try {
      return await claim();
    } finally {
      this.started();
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
