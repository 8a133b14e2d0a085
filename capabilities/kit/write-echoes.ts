/**
 * The resourceVersions of a reconciler's own recent writes, per object: a watch event that
 * carries one of them is the echo of that write and needs no reconcile. A few are kept per
 * object because one reconcile can write an object more than once (status, then finalizer) and
 * the echoes arrive after both writes. Only an optimisation: an echo that is not recognised costs
 * one reconcile that changes nothing.
 *
 * The API server sends a write's watch event and its HTTP response independently, and the event
 * often arrives first; so events of an object that has a write in flight ({@link during}) are
 * held until that write answers, then dropped if they are its echo.
 */
export class WriteEchoes {
  readonly #versions = new Map<string, string[]>();
  readonly #inFlight = new Map<string, { writes: number; held: Held[] }>();

  constructor(private readonly keep = 4) {}

  /** Records a write of `key` that left it at `resourceVersion` (ignored when undefined). */
  record(key: string, resourceVersion: string | undefined): void {
    if (!resourceVersion) return;
    const list = this.#versions.get(key) ?? [];
    list.push(resourceVersion);
    if (list.length > this.keep) list.shift();
    this.#versions.set(key, list);
  }

  /** True when an event of `key` at `resourceVersion` is the echo of one of our writes. */
  isEcho(key: string, resourceVersion: string | undefined): boolean {
    return Boolean(resourceVersion && this.#versions.get(key)?.includes(resourceVersion));
  }

  /**
   * Runs `write` of `key`, which resolves to the resourceVersion it left (undefined when it wrote
   * nothing), records it, and then releases the events {@link unlessEcho} held meanwhile.
   */
  async during(key: string, write: () => Promise<string | undefined>): Promise<string | undefined> {
    const flight = this.#inFlight.get(key) ?? { writes: 0, held: [] };
    flight.writes++;
    this.#inFlight.set(key, flight);
    try {
      const rv = await write();
      this.record(key, rv);
      return rv;
    } finally {
      if (--flight.writes === 0) {
        this.#inFlight.delete(key);
        for (const h of flight.held) this.unlessEcho(key, h.resourceVersion, h.then);
      }
    }
  }

  /**
   * Calls `then` for an event of `key` at `resourceVersion` unless it is the echo of one of our
   * writes; while a write of `key` is in flight, decides once that write has answered (a failed
   * write echoes nothing, so its held events all go on).
   */
  unlessEcho(key: string, resourceVersion: string | undefined, then: () => void): void {
    if (this.isEcho(key, resourceVersion)) return;
    const flight = this.#inFlight.get(key);
    if (flight) flight.held.push({ resourceVersion, then });
    else then();
  }

  /** Forgets an object that is gone. */
  forget(key: string): void {
    this.#versions.delete(key);
  }
}

type Held = { resourceVersion: string | undefined; then: () => void };
