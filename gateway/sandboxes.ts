import type { PodBox } from "../capabilities/api/kinds";

type Waiter = { ns: string; id: string; done: (box: PodBox | undefined) => boolean };

/**
 * Every PodBox the gateway may serve, by namespace and name (a sandbox's ID is its box's name),
 * fed by the watch on PodBoxes; and the requests waiting for a box to reach a state, woken by its
 * watch events.
 */
export class SandboxIndex {
  readonly #boxes = new Map<string, PodBox>();
  readonly #waiters = new Set<Waiter>();

  observe(box: PodBox, deleted: boolean): void {
    const ns = box.metadata?.namespace ?? "";
    const id = box.metadata?.name ?? "";
    if (deleted) this.#boxes.delete(`${ns}/${id}`);
    else this.#boxes.set(`${ns}/${id}`, box);
    for (const w of this.#waiters) {
      if (w.ns === ns && w.id === id && w.done(deleted ? undefined : box)) this.#waiters.delete(w);
    }
  }

  get(ns: string, id: string): PodBox | undefined {
    return this.#boxes.get(`${ns}/${id}`);
  }

  /** The boxes of that name in any namespace (one, unless tenants chose the same name). */
  named(id: string): PodBox[] {
    return [...this.#boxes.values()].filter(b => b.metadata?.name === id);
  }

  inNamespace(ns: string): PodBox[] {
    return [...this.#boxes.values()].filter(b => b.metadata?.namespace === ns);
  }

  /**
   * Resolves with the box once `until` says so of it (or of its absence: undefined), as seen now
   * or in a later watch event; rejects after `timeoutMs`.
   */
  waitFor(
    ns: string,
    id: string,
    until: (box: PodBox | undefined) => boolean,
    timeoutMs: number,
  ): Promise<PodBox | undefined> {
    const now = this.get(ns, id);
    if (until(now)) return Promise.resolve(now);
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        ns,
        id,
        done: box => {
          if (!until(box)) return false;
          clearTimeout(timer);
          resolve(box);
          return true;
        },
      };
      const timer = setTimeout(() => {
        this.#waiters.delete(waiter);
        reject(new Error(`timed out after ${timeoutMs / 1000} s`));
      }, timeoutMs);
      this.#waiters.add(waiter);
    });
  }
}
