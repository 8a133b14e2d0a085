import type { PodBox } from "../api/kinds";
import type { QuietWindow } from "../config";
import { DeferredWrites } from "../kit/deferred-writes";
import { WriteEchoes } from "../kit/write-echoes";
import type { ClaimActivity } from "./claim-activity";
import { mayClaim } from "./decide";
import { Standby, StandbyIndex } from "./standby-index";

/** A claimed box whose finalizer, PVC handover and Event are still to come. */
export type UnfinishedClaim = { box: PodBox; standby: Standby };

/**
 * Everything the module knows about warm claims in flight, in one place. A claim's urgent part is
 * two writes (the standby's Pod, then the box status); its finish (finalizer, PVC handover,
 * Event) waits until claims are quiet. None of this must survive a restart: the next full
 * reconcile of each box finishes its claim from what it reads, and a box that began a cold start
 * never claims (see {@link mayClaim}).
 */
export class WarmClaims {
  /** The ready standbys of every pool, fed by the watch on pool Pods. */
  readonly standbys = new StandbyIndex();
  /** Pod versions written by claims: the claimed Pod's watch event needs no reconcile. */
  readonly podWrites = new WriteEchoes();
  /** New boxes that may claim, as their watch event brought them, and when. */
  readonly #candidates = new Map<string, { box: PodBox; at: number }>();
  /**
   * UIDs of boxes that tried to claim, until a watch event shows their status: a box claims at
   * most once, at its first event (a later one would race its own cold start).
   */
  readonly #attempted = new Set<string>();
  readonly #unfinished = new Map<string, UnfinishedClaim>();
  /**
   * Claimed boxes whose finish is queued and for which no event has come since: their run
   * finishes the claim and nothing more. An event clears the mark ({@link eventCame}), so that a
   * change made while the finish waited is reconciled in the same run.
   */
  readonly #finishOnly = new Set<string>();
  readonly #finishes: DeferredWrites<string>;

  /**
   * @param activity when claims were last under way
   * @param finishWindow how long a finish waits for claims to be quiet
   * @param runFinish queues the box's run that finishes its claim
   */
  constructor(
    readonly activity: ClaimActivity,
    finishWindow: QuietWindow,
    private readonly runFinish: (key: string) => void,
  ) {
    this.#finishes = new DeferredWrites<string>(
      async key => this.finishNow(key),
      // Never dropped: a finish that never ran would leave the claim unfinished until an event.
      { ...finishWindow, concurrency: 8, capacity: Number.POSITIVE_INFINITY },
      activity,
    );
  }

  /**
   * Looks at a box's watch event: true (and the box kept as a candidate) when the box should
   * claim a standby now. A box whose status or deletion shows forgets its attempt.
   */
  consider(key: string, box: PodBox, at: number): boolean {
    const uid = box.metadata!.uid!;
    if (!mayClaim(box) || this.#attempted.has(uid)) return false;
    this.#candidates.set(key, { box, at });
    this.activity.queued(key);
    return true;
  }

  /** Forgets the attempt of a box whose status (or deletion) has been seen. */
  settled(box: PodBox): void {
    if (box.status?.phase || box.metadata?.deletionTimestamp) {
      this.#attempted.delete(box.metadata!.uid!);
    }
  }

  /** The candidate waiting to claim under `key`, taken once; its attempt is recorded. */
  takeCandidate(key: string): { box: PodBox; at: number } | undefined {
    const c = this.#candidates.get(key);
    this.#candidates.delete(key);
    this.activity.taken(key);
    if (c) this.#attempted.add(c.box.metadata!.uid!);
    return c;
  }

  /**
   * Records a claim that won its standby; its finish runs once claims are quiet, or at once for a
   * box whose volumes must outlive it (deleted without its finalizer, it would lose them).
   */
  claimed(key: string, claim: UnfinishedClaim): void {
    this.#unfinished.set(key, claim);
    if (claim.box.spec!.volumeReclaimPolicy === "Retain") this.finishNow(key);
    else this.#finishes.record(key);
  }

  /** The box's unfinished claim, taken once, and whether its run should do nothing more. */
  takeUnfinished(key: string): (UnfinishedClaim & { finishOnly: boolean }) | undefined {
    const claim = this.#unfinished.get(key);
    if (!claim) return undefined;
    this.#unfinished.delete(key);
    return { ...claim, finishOnly: this.#finishOnly.delete(key) };
  }

  /** Queues the finish of a claim still unfinished, and nothing more. */
  finishNow(key: string): void {
    if (!this.#unfinished.has(key)) return;
    this.#finishOnly.add(key);
    this.runFinish(key);
  }

  /** Something about the box changed: its next run is a full reconcile. */
  eventCame(key: string): void {
    this.#finishOnly.delete(key);
  }
}
