export type QuietSinkOptions = {
  /** Items wait until no claim has started for this long. */
  quietMs: number;
  /** ...but no longer than this after they were recorded. */
  maxDelayMs: number;
  /** Items written at once. */
  concurrency: number;
  /** Items kept waiting at most; beyond it the oldest are dropped. */
  capacity: number;
  /** Told how many were dropped, after a drain that follows drops. */
  onDropped?: (count: number) => void;
};

/**
 * How long the oldest pending item (recorded at `oldestAt`) still waits: until claims have been
 * quiet for `quietMs` since the last one started (`lastClaimAt`), and at most until it is
 * `maxDelayMs` old. 0: write now.
 */
export function quietDelay(
  now: number,
  lastClaimAt: number | undefined,
  oldestAt: number,
  { quietMs, maxDelayMs }: Pick<QuietSinkOptions, "quietMs" | "maxDelayMs">,
): number {
  const untilQuiet = lastClaimAt === undefined ? 0 : lastClaimAt + quietMs - now;
  const untilDeadline = oldestAt + maxDelayMs - now;
  return Math.max(0, Math.min(untilQuiet, untilDeadline));
}

/**
 * When the last warm claim started, and how many are in flight: what every {@link QuietSink}
 * and the pools' replenishment wait on.
 */
export class ClaimClock {
  last?: number;
  #inFlight = 0;
  #waiters: (() => void)[] = [];

  constructor(readonly now: () => number = () => performance.now()) {}

  /** A claim has started: the sinks wait until claims are quiet again. */
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

  /** Claims whose urgent part is under way. */
  get inFlight(): number {
    return this.#inFlight;
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

/**
 * Writes that can wait, kept off the warm claims' path. Every write competes with the next claim
 * for the API server and for the machine's two vCPUs: measured here, a claim's Event written
 * straight after it made back-to-back claims 5 ms slower (p50), and its finalizer and PVC
 * handover 4-8 ms more. So such writes wait here until claims have been quiet for a moment, and
 * go in the order they were recorded, a few at a time. A claim that starts meanwhile stops the
 * drain. A restart loses what still waits: only writes that the next full reconcile redoes, or
 * that are best effort (Events; client-go's recorder also drops them when its buffer is full),
 * may wait here.
 */
export class QuietSink<T> {
  #pending: { item: T; at: number }[] = [];
  #timer?: NodeJS.Timeout;
  #writing = false;
  #dropped = 0;

  constructor(
    private readonly write: (item: T) => Promise<void>,
    private readonly opts: QuietSinkOptions,
    private readonly claims: ClaimClock,
  ) {}

  /** Queues an item to be written once claims are quiet. */
  record(item: T): void {
    if (this.#pending.length >= this.opts.capacity) {
      this.#pending.shift();
      this.#dropped++;
    }
    this.#pending.push({ item, at: this.claims.now() });
    this.#schedule();
  }

  /** Items waiting to be written. */
  get pending(): number {
    return this.#pending.length;
  }

  #delay(): number {
    const now = this.claims.now();
    return quietDelay(now, this.claims.last, this.#pending[0].at, this.opts);
  }

  #schedule(): void {
    if (this.#timer || this.#writing || this.#pending.length === 0) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      void this.#drain();
    }, this.#delay());
    this.#timer.unref?.();
  }

  /** Writes items a few at a time while they are due; a claim that starts meanwhile stops it. */
  async #drain(): Promise<void> {
    this.#writing = true;
    try {
      while (this.#pending.length > 0 && this.#delay() === 0) {
        const batch = this.#pending.splice(0, this.opts.concurrency);
        await Promise.all(batch.map(e => this.write(e.item).catch(() => undefined)));
      }
    } finally {
      this.#writing = false;
    }
    if (this.#dropped > 0) {
      this.opts.onDropped?.(this.#dropped);
      this.#dropped = 0;
    }
    this.#schedule();
  }
}
