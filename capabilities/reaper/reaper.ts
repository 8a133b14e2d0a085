import { Log } from "pepr";
import type { PodBox } from "../api/kinds";
import { reaperBoxes, reaperPassDuration } from "../metrics/registry";
import { objectKey } from "../kit/object-key";
import { BoxCache } from "./box-cache";
import { DeadlineTimers } from "./deadline-timers";

/**
 * The reaper: every box whose expiry, idle or lease deadline has passed is handed to the box
 * reconciler, which decides (pause, terminate). Each box gets a timer at its next deadline, so a
 * sandbox ends at its timeout to the second (as E2B's do); a pass on a schedule catches anything
 * a timer missed. Both read only the watch-fed {@link BoxCache}, so idle boxes cost no API call.
 */
export class Reaper {
  /** Every box's phase and next deadline, fed by the module's PodBox watch. */
  readonly boxes = new BoxCache();
  readonly #timers = new DeadlineTimers((key, now) => {
    if (this.boxes.takeIfDue(key, now)) this.due(key);
    return this.boxes.next(key);
  });
  #passing = false;

  /** @param due asks for a reconcile of a box whose deadline has passed */
  constructor(private readonly due: (key: string) => void) {}

  /** A watch event of a box. */
  onBoxEvent(box: PodBox, deleted: boolean, now = Date.now()): void {
    if (deleted) {
      const { namespace, name } = box.metadata!;
      this.boxes.remove(namespace!, name!);
      this.#timers.clear(objectKey(namespace!, name!));
      return;
    }
    const { key, deadline } = this.boxes.update(box, now);
    this.#timers.set(key, deadline, now);
  }

  /**
   * One pass; returns how many boxes were due. Pepr does not await a schedule's `run` nor catch
   * its errors: this never throws, and a pass still running makes the next one a no-op.
   */
  pass(now = Date.now()): number {
    if (this.#passing) return 0;
    this.#passing = true;
    const started = performance.now();
    try {
      const due = this.boxes.due(now);
      due.forEach(key => this.due(key));
      reaperPassDuration.set((performance.now() - started) / 1000);
      reaperBoxes.set(this.boxes.size);
      return due.length;
    } catch (e) {
      Log.error({ error: String(e) }, "reaper pass failed");
      return 0;
    } finally {
      this.#passing = false;
    }
  }
}
