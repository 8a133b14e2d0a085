/**
 * The resourceVersions of the reconciler's own recent writes, per object: a watch event that
 * carries one of them is the echo of that write and needs no reconcile. A few are kept per
 * object because one reconcile can write an object more than once (status, then finalizer) and
 * the echoes arrive after both writes. Only an optimisation: an echo that is not recognised costs
 * one reconcile that changes nothing.
 */
export class OwnWrites {
  readonly #versions = new Map<string, string[]>();

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

  /** Forgets an object that is gone. */
  forget(key: string): void {
    this.#versions.delete(key);
  }

  get size(): number {
    return this.#versions.size;
  }
}
