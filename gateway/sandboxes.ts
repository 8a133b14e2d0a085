import type { PodBox } from "../capabilities/api/kinds";

type Named = { metadata?: { namespace?: string; name?: string } };

/** Objects of one kind by namespace and name, as a watch delivers them. */
export class NamespacedCache<T extends Named> {
  protected readonly items = new Map<string, T>();

  observe(obj: T, deleted: boolean): void {
    const key = `${obj.metadata?.namespace ?? ""}/${obj.metadata?.name ?? ""}`;
    if (deleted) this.items.delete(key);
    else this.items.set(key, obj);
  }

  get(ns: string, name: string): T | undefined {
    return this.items.get(`${ns}/${name}`);
  }

  inNamespace(ns: string): T[] {
    return [...this.items.values()].filter(o => o.metadata?.namespace === ns);
  }
}

type Waiter = { ns: string; id: string; done: (box: PodBox | undefined) => boolean };

/**
 * Every PodBox the gateway may serve, by namespace and name (a sandbox's ID is its box's name),
 * fed by the watch on PodBoxes; and the requests waiting for a box to reach a state, woken by its
 * watch events.
 */
export class SandboxIndex extends NamespacedCache<PodBox> {
  readonly #waiters = new Set<Waiter>();
  /** Boxes by name, then namespace: every proxied request looks its sandbox up by name. */
  readonly #byName = new Map<string, Map<string, PodBox>>();
  readonly #listeners: ((box: PodBox, deleted: boolean) => void)[] = [];

  /** Calls `listener` with every box the watch delivers, after the index has it. */
  subscribe(listener: (box: PodBox, deleted: boolean) => void): void {
    this.#listeners.push(listener);
  }

  override observe(box: PodBox, deleted: boolean): void {
    super.observe(box, deleted);
    const ns = box.metadata?.namespace ?? "";
    const id = box.metadata?.name ?? "";
    const named = this.#byName.get(id) ?? new Map<string, PodBox>();
    if (deleted) named.delete(ns);
    else named.set(ns, box);
    if (named.size > 0) this.#byName.set(id, named);
    else this.#byName.delete(id);
    for (const w of this.#waiters) {
      if (w.ns === ns && w.id === id && w.done(deleted ? undefined : box)) this.#waiters.delete(w);
    }
    for (const listener of this.#listeners) listener(box, deleted);
  }

  /** The boxes of that name in any namespace (one, unless tenants chose the same name). */
  named(id: string): PodBox[] {
    return [...(this.#byName.get(id)?.values() ?? [])];
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
