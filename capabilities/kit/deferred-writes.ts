import type { QuietWindow } from "../config";

export type DeferredWritesOptions = QuietWindow & {
  /** Items written at once. */
  concurrency: number;
  /** Items kept waiting at most; beyond it the oldest are dropped. */
  capacity: number;
  /** Told how many were dropped, after a drain that follows drops. */
  onDropped?: (count: number) => void;
};

/** What deferred writes wait on: a clock, and when the last thing they yield to started. */
export type QuietSource = { now(): number; readonly last?: number };

/**
 * How long the oldest pending item (recorded at `oldestAt`) still waits: until the source has
 * been quiet for `quietMs` since its last start (`lastAt`), and at most until it is `maxDelayMs`
 * old. 0: write now.
 */
export function quietDelay(
  now: number,
  lastAt: number | undefined,
  oldestAt: number,
  { quietMs, maxDelayMs }: QuietWindow,
): number {
  const untilQuiet = lastAt === undefined ? 0 : lastAt + quietMs - now;
  const untilDeadline = oldestAt + maxDelayMs - now;
  return Math.max(0, Math.min(untilQuiet, untilDeadline));
}

/**
 * Writes that can wait, kept off the warm claims' path: every write competes with the next claim
 * for the API server and the CPU, so such writes wait here until claims have been quiet for a
 * moment, and go in the order they were recorded, a few at a time. A claim that starts meanwhile
 * stops the drain. A restart loses what still waits: only writes that the next full reconcile
 * redoes, or that are best effort (Events; client-go's recorder also drops them when its buffer
 * is full), may wait here. See docs/decisions/0003-deferred-writes.md.
 */
export class DeferredWrites<T> {
  #pending: { item: T; at: number }[] = [];
  #timer?: NodeJS.Timeout;
  #writing = false;
  #dropped = 0;

  constructor(
    private readonly write: (item: T) => Promise<void>,
    private readonly opts: DeferredWritesOptions,
    private readonly quiet: QuietSource,
  ) {}

  /** Queues an item to be written once claims are quiet. */
  record(item: T): void {
    if (this.#pending.length >= this.opts.capacity) {
      this.#pending.shift();
      this.#dropped++;
    }
    this.#pending.push({ item, at: this.quiet.now() });
    this.#schedule();
  }

  #delay(): number {
    return quietDelay(this.quiet.now(), this.quiet.last, this.#pending[0].at, this.opts);
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
