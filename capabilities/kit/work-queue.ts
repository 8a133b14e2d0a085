/** What a worker may ask of the queue after handling a key. */
export type WorkResult = { requeueAfterMs?: number } | void;

export type QueueOptions = {
  /** Keys handled at once, across all keys. */
  concurrency: number;
  /**
   * Extra runs allowed for keys added with {@link WorkQueue.addFirst} while every regular slot
   * is busy: a warm claim is two short writes and must not wait for a cold start's reads.
   */
  urgentConcurrency?: number;
  /** First retry delay after a failure; doubles per consecutive failure of the key. */
  baseDelayMs: number;
  maxDelayMs: number;
  onError?: (key: string, error: unknown, attempt: number, retryInMs: number) => void;
};

/**
 * A work queue keyed by object, as client-go's workqueue: one run per key at a time, requests for
 * a key that is already waiting are merged, a request that arrives while the key runs gets one
 * more run afterwards, and a run that throws is retried with exponential backoff. Pepr only logs
 * a Reconcile that throws and keeps one queue per binding (docs/upstream.md); this gives every
 * event source of a box (the box, its Pod, its template) one ordered lane, and the retries a
 * reconciler needs.
 *
 * Only keys live here: what to do is read again from the API server on every run, so a restart
 * that drops the queue loses nothing.
 */
export class WorkQueue {
  readonly #waiting: string[] = [];
  readonly #queued = new Set<string>();
  readonly #urgent = new Set<string>();
  readonly #running = new Set<string>();
  readonly #dirty = new Set<string>();
  readonly #timers = new Map<string, { at: number; timer: NodeJS.Timeout; deadline?: number }>();
  readonly #failures = new Map<string, number>();

  constructor(
    private readonly worker: (key: string) => Promise<WorkResult>,
    private readonly opts: QueueOptions,
  ) {}

  /** Asks for a run of `key` as soon as possible. */
  add(key: string): void {
    this.#enqueue(key, false);
  }

  /**
   * Like {@link add}, but ahead of every waiting key, and allowed the extra urgent slots (a warm
   * claim must not wait behind cold starts).
   */
  addFirst(key: string): void {
    this.#enqueue(key, true);
  }

  #enqueue(key: string, first: boolean): void {
    if (this.#running.has(key)) {
      this.#dirty.add(key);
      return;
    }
    if (this.#queued.has(key)) {
      if (!first) return;
      this.#waiting.splice(this.#waiting.indexOf(key), 1);
    }
    this.#clearTimer(key);
    this.#queued.add(key);
    if (first) this.#urgent.add(key);
    if (first) this.#waiting.unshift(key);
    else this.#waiting.push(key);
    this.#pump();
  }

  /** Asks for a run of `key` after `ms`; an earlier request for the key wins. */
  addAfter(key: string, ms: number): void {
    const at = Date.now() + ms;
    const existing = this.#timers.get(key);
    if (existing && existing.at <= at) return;
    this.#setTimer(key, at);
  }

  /**
   * Asks for a run of `key` once `quietMs` have passed without another such request, and at the
   * latest `maxWaitMs` after the first of them (a trailing debounce): a burst of requests gives
   * one run after it. An earlier plain {@link addAfter} request for the key wins.
   */
  addWhenQuiet(key: string, quietMs: number, maxWaitMs: number): void {
    const now = Date.now();
    const existing = this.#timers.get(key);
    const deadline = existing?.deadline ?? now + maxWaitMs;
    const at = Math.min(now + quietMs, deadline);
    if (existing && existing.deadline === undefined && existing.at <= at) return;
    this.#setTimer(key, at, deadline);
  }

  /** Keys waiting or running, and keys with a retry or requeue timer (the depth metric). */
  stats(): { waiting: number; running: number; delayed: number } {
    return {
      waiting: this.#waiting.length,
      running: this.#running.size,
      delayed: this.#timers.size,
    };
  }

  #pump(): void {
    // Urgent keys are at the head of the line, so the extra slots only ever go to them.
    const limit = (key: string) =>
      this.opts.concurrency + (this.#urgent.has(key) ? (this.opts.urgentConcurrency ?? 0) : 0);
    while (this.#waiting.length > 0 && this.#running.size < limit(this.#waiting[0])) {
      const key = this.#waiting.shift()!;
      this.#queued.delete(key);
      this.#urgent.delete(key);
      this.#running.add(key);
      void this.#run(key);
    }
  }

  async #run(key: string): Promise<void> {
    try {
      const result = await this.worker(key);
      this.#failures.delete(key);
      if (result && result.requeueAfterMs !== undefined) this.addAfter(key, result.requeueAfterMs);
    } catch (error) {
      const attempt = (this.#failures.get(key) ?? 0) + 1;
      this.#failures.set(key, attempt);
      const delay = backoff(attempt, this.opts.baseDelayMs, this.opts.maxDelayMs);
      this.opts.onError?.(key, error, attempt, delay);
      this.addAfter(key, delay);
    } finally {
      this.#running.delete(key);
      if (this.#dirty.delete(key)) this.add(key);
      this.#pump();
    }
  }

  /** Replaces the key's timer with one that adds it at `at` (epoch ms). */
  #setTimer(key: string, at: number, deadline?: number): void {
    this.#clearTimer(key);
    const timer = setTimeout(
      () => {
        this.#timers.delete(key);
        this.add(key);
      },
      Math.max(0, at - Date.now()),
    );
    timer.unref();
    this.#timers.set(key, { at, timer, deadline });
  }

  #clearTimer(key: string): void {
    const t = this.#timers.get(key);
    if (t) clearTimeout(t.timer);
    this.#timers.delete(key);
  }
}

/** Exponential backoff with up to 20% jitter, so that many failing keys do not retry in step. */
export function backoff(
  attempt: number,
  baseMs: number,
  maxMs: number,
  random = Math.random,
): number {
  const raw = Math.min(maxMs, baseMs * 2 ** (attempt - 1));
  return Math.round(raw * (0.8 + 0.2 * random()));
}
