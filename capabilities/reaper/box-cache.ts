import { podBoxSpecSchema } from "../api/podbox";
import type { PodBox } from "../api/kinds";
import { ANNOTATION_LAST_ACTIVITY, effectiveState, nextDeadline } from "./activity";
import { objectKey } from "../kit/object-key";

type Entry = { phase?: string; deadline?: number };

/**
 * What the reaper and the gauges need of every box, kept from a watch: its phase and the next
 * time the idle or lease rules could change it. A reaper pass reads only this, so an idle box
 * costs no API call; a box is reconciled only once one of its deadlines has passed.
 */
export class BoxCache {
  readonly #boxes = new Map<string, Entry>();

  /** Records an added or modified box. */
  update(box: PodBox, now = Date.now()): void {
    const key = objectKey(box.metadata?.namespace ?? "", box.metadata?.name ?? "");
    const spec = podBoxSpecSchema.safeParse(box.spec);
    const phase = box.status?.phase;
    let deadline: number | undefined;
    if (spec.success) {
      const input = {
        spec: spec.data,
        status: box.status ?? {},
        lastActivityAnnotation: box.metadata?.annotations?.[ANNOTATION_LAST_ACTIVITY],
      };
      // A box whose status lags its rules (idle-paused with a lease that ran out) is due at once.
      const { desired } = effectiveState(input, now);
      const lagging =
        (desired === "Terminated" && phase !== "Terminated") ||
        (desired === "Paused" && phase === "Running");
      deadline = lagging ? now : nextDeadline(input, now);
    }
    this.#boxes.set(key, { phase, deadline });
  }

  /** Forgets a deleted box. */
  remove(namespace: string, name: string): void {
    this.#boxes.delete(objectKey(namespace, name));
  }

  /** Keys of the boxes whose deadline has passed; each deadline is reported once. */
  due(now = Date.now()): string[] {
    const keys: string[] = [];
    for (const [key, e] of this.#boxes) {
      if (e.deadline !== undefined && e.deadline <= now) {
        keys.push(key);
        e.deadline = undefined;
      }
    }
    return keys;
  }

  /** Boxes per phase, for the gauges. */
  phases(): Record<string, number> {
    const counts: Record<string, number> = {};
    for (const e of this.#boxes.values()) {
      const p = e.phase ?? "Pending";
      counts[p] = (counts[p] ?? 0) + 1;
    }
    return counts;
  }

  get size(): number {
    return this.#boxes.size;
  }
}
