/** The longest delay a Node timer takes; a later deadline is re-armed when this one fires. */
const MAX_TIMER_MS = 2 ** 31 - 1;
/** Node may fire a timer a millisecond early, before the box's own rules see the deadline. */
const TIMER_SLACK_MS = 5;

/**
 * One timer per key, at its next deadline. A timer that fires hands the key to `fire`, which
 * handles what has come due (the key may have been handled, or moved, meanwhile) and names the
 * key's next deadline, armed in turn; a deadline beyond a Node timer's reach is re-armed rather
 * than fired early.
 */
export class DeadlineTimers {
  readonly #timers = new Map<string, { at: number; timer: NodeJS.Timeout }>();

  /** @param fire handles a key whose timer fired; returns its next deadline, if any */
  constructor(private readonly fire: (key: string, now: number) => number | undefined) {}

  /** Sets the key's deadline (epoch ms), or clears it with undefined. */
  set(key: string, at: number | undefined, now = Date.now()): void {
    if (at === undefined) return this.clear(key);
    if (this.#timers.get(key)?.at === at) return;
    this.clear(key);
    const delay = Math.min(MAX_TIMER_MS, Math.max(0, at - now) + TIMER_SLACK_MS);
    const timer = setTimeout(() => {
      this.#timers.delete(key);
      const fired = Date.now();
      const next = this.fire(key, fired);
      if (next !== undefined) this.set(key, next, fired);
    }, delay);
    // The timers never keep the process alive on their own.
    timer.unref();
    this.#timers.set(key, { at, timer });
  }

  clear(key: string): void {
    const t = this.#timers.get(key);
    if (t) clearTimeout(t.timer);
    this.#timers.delete(key);
  }

  /** Keys with a timer armed. */
  get size(): number {
    return this.#timers.size;
  }
}
