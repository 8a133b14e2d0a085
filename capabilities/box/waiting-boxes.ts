import type { AwaitedObject } from "./types";

/**
 * Which boxes wait for which objects (a template, a pool, a fork's parent, a PVC), so that a watch
 * event of one of them wakes its boxes and a waiting box costs no request meanwhile. Only a
 * hint, like the queue: a restart reconciles every box, which registers its waits again.
 *
 * An event can come while the box is being reconciled, after its reads and before its wait is
 * registered; the box would then sleep through it. So the last events are kept, numbered, and a
 * box whose awaited object had an event since its reconcile began ({@link mark}) is told to look
 * again at once.
 */
export class WaitingBoxes {
  readonly #byObject = new Map<string, Set<string>>();
  readonly #byBox = new Map<string, string[]>();
  readonly #recent: { seq: number; object: string }[] = [];
  #seq = 0;

  /** @param recentEvents how many of the last events are kept for the check above */
  constructor(private readonly recentEvents = 4096) {}

  /** The position in the stream of events, taken when a reconcile begins. */
  mark(): number {
    return this.#seq;
  }

  /**
   * Records that box `key` (in `namespace`) now waits for `objects`, replacing what it waited for
   * before (none: it waits for nothing). True when one of them had an event since `since`, or
   * when too many events came since to tell: the box must be reconciled again now.
   */
  waitFor(key: string, namespace: string, objects: AwaitedObject[], since: number): boolean {
    this.forget(key);
    if (objects.length === 0) return false;
    const wanted = objects.map(o => objectId(o.kind, namespace, o.name));
    this.#byBox.set(key, wanted);
    for (const id of wanted) {
      const boxes = this.#byObject.get(id) ?? new Set<string>();
      boxes.add(key);
      this.#byObject.set(id, boxes);
    }
    const oldest = this.#recent[0]?.seq ?? this.#seq + 1;
    if (since + 1 < oldest) return true;
    return this.#recent.some(e => e.seq > since && wanted.includes(e.object));
  }

  /** A watch event of an object: the boxes waiting for it. */
  event(kind: AwaitedObject["kind"], namespace: string, name: string): string[] {
    const id = objectId(kind, namespace, name);
    this.#recent.push({ seq: ++this.#seq, object: id });
    if (this.#recent.length > this.recentEvents) this.#recent.shift();
    return [...(this.#byObject.get(id) ?? [])];
  }

  /** Forgets what a box waits for (it waits for nothing now, or is gone). */
  forget(key: string): void {
    for (const id of this.#byBox.get(key) ?? []) {
      const boxes = this.#byObject.get(id);
      boxes?.delete(key);
      if (boxes?.size === 0) this.#byObject.delete(id);
    }
    this.#byBox.delete(key);
  }
}

const objectId = (kind: string, namespace: string, name: string) => `${kind}/${namespace}/${name}`;
