import { podBoxSpecSchema } from "../api/podbox";
import type { PodBox } from "../api/kinds";
import { ANNOTATION_LAST_ACTIVITY, deadlines, effectiveState } from "./activity";
import { objectKey } from "../kit/object-key";

/** A box's phase, and the times its rules could change it, earliest first. */
type Entry = { phase?: string; deadlines: number[] };

/**
 * What the reaper and the gauges need of every box, kept from a watch: its phase and the times
 * the expiry, idle or lease rules could change it. A reaper pass reads only this, so an idle box
 * costs no API call; a box is reconciled only once one of its deadlines has passed. A deadline
 * that passes without changing the box (idle, but its lease still runs) leaves the later ones.
 */
export class BoxCache {
  readonly #boxes = new Map<string, Entry>();

  /** Records an added or modified box; returns its key and next deadline (epoch ms), if any. */
  update(box: PodBox, now = Date.now()): { key: string; deadline?: number } {
    const key = objectKey(box.metadata?.namespace ?? "", box.metadata?.name ?? "");
    const spec = podBoxSpecSchema.safeParse(box.spec);
    const phase = box.status?.phase;
    let times: number[] = [];
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
      times = deadlines(input, now);
      if (lagging) times.unshift(now);
    }
    this.#boxes.set(key, { phase, deadlines: times });
    return { key, deadline: times[0] };
  }

  /** Forgets a deleted box. */
  remove(namespace: string, name: string): void {
    this.#boxes.delete(objectKey(namespace, name));
  }

  /** Keys of the boxes whose deadline has passed; each deadline is reported once. */
  due(now = Date.now()): string[] {
    const keys: string[] = [];
    for (const [key, e] of this.#boxes) if (take(e, now)) keys.push(key);
    return keys;
  }

  /** Whether the box's deadline has passed; reported once, as by {@link due}. */
  takeIfDue(key: string, now = Date.now()): boolean {
    const e = this.#boxes.get(key);
    return e !== undefined && take(e, now);
  }

  /** The box's next deadline not yet reported, if any. */
  next(key: string): number | undefined {
    return this.#boxes.get(key)?.deadlines[0];
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

/** Drops the entry's deadlines that have passed; true if there were any. */
function take(e: Entry, now: number): boolean {
  const passed = e.deadlines.findIndex(t => t > now);
  const count = passed < 0 ? e.deadlines.length : passed;
  e.deadlines.splice(0, count);
  return count > 0;
}
