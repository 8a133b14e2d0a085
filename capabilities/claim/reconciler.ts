import { Log } from "pepr";
import type { V1Pod } from "@kubernetes/client-node";
import type { PodBox } from "../api/kinds";
import type { PodBoxStatus } from "../api/podbox";
import type { ApiClient } from "../client/api-client";
import { statusOf } from "../kit/api-errors";
import { kubeTime } from "../kit/conditions";
import { ActionContext, labelClaimedPod } from "../kit/object-actions";
import { objectKey } from "../kit/object-key";
import type { WriteEchoes } from "../kit/write-echoes";
import { claimDuration, countTransition } from "../metrics/registry";
import { claimStandby, claimedBefore, handOverVolumes } from "./apply";
import { claimedEgress, claimedStatus, type PoolTemplate } from "./decide";
import type { Standby } from "./standby-index";
import type { WarmClaims } from "./warm-claims";

/** The longest wait between attempts to read the API server's clock at the start. */
const SERVER_TIME_RETRY_MAX_MS = 10_000;

/**
 * What a claim needs of the box side, which the box reconciler passes in: the box's own writes,
 * made through its echoes so that their watch events are recognised, and its Events.
 */
export type BoxSide = {
  /** The versions of the box this module wrote: their watch events need no reconcile. */
  echoes: WriteEchoes;
  /** Writes the box's status when it changed; resolves to the version it left. */
  writeStatus(box: PodBox, status: PodBoxStatus): Promise<string | undefined>;
  /** True when the box carries the cleanup finalizer (or is being deleted: none may be added). */
  hasFinalizer(box: PodBox): boolean;
  /** Adds the cleanup finalizer; resolves to the box's new version. */
  addFinalizer(box: PodBox): Promise<string | undefined>;
  /** Records an Event on the box, written once claims are quiet. */
  recordEvent(
    box: PodBox,
    event: { type: "Normal"; reason: "WarmPoolClaimed"; message: string },
  ): void;
};

/** What a claim needs of the pools: the template of a pool's standbys, and word of a claim. */
export type PoolSide = {
  /** The pool's template as its last reconcile saw it (unknown before that). */
  templateOf(poolKey: string): (PoolTemplate & { hash: string }) | undefined;
  /** A box asked the pool for a standby, served or not. */
  asked(poolKey: string): void;
  /** The pool replaces what claims took, once claims are quiet. */
  replenishSoon(poolKey: string): void;
};

export type ClaimReconcilerDeps = ActionContext & {
  /** The time claimed statuses are stamped with. */
  clock: () => Date;
  claims: WarmClaims;
  pools: PoolSide;
  boxes: BoxSide;
};

/**
 * What a box's watch event asks of its lane: `claim`, the box jumps the queue to claim a standby;
 * `reconcile`, a full reconcile in its turn.
 */
export type BoxEventOutcome = "claim" | "reconcile";

/**
 * What the claim leaves of one reconcile of its box: `done` (the box claimed a standby, or only
 * its claim's finish was due: nothing more this run), `requeue` (it did not claim: the box goes
 * back in line, and waits its turn for the full reconcile) or `reconcile` (the full reconcile goes
 * on).
 */
export type ClaimOutcome = "done" | "requeue" | "reconcile";

/**
 * Runs the warm claims of new boxes of a pool, called by the box reconciler: once for each watch
 * event of a box ({@link onBoxEvent}), and once at the start of each reconcile ({@link reconcile}),
 * which runs a waiting claim ({@link #claim}) or the finish of one ({@link #finishClaim}) before
 * anything else the box's lane does. The claims' state is {@link WarmClaims}.
 */
export class ClaimReconciler {
  /**
   * The API server's clock at (or just after) this process's start, to the second: boxes it
   * created before then may have claimed before the start.
   */
  #startedAt?: Promise<number>;

  constructor(private readonly deps: ClaimReconcilerDeps) {}

  /** Reads the API server's clock, once: called when the process starts watching boxes. */
  start(): Promise<number> {
    return (this.#startedAt ??= serverTimeAtStart(this.deps.client));
  }

  /**
   * A watch event of the box. Every event, echoes included, forgets the attempt of a box whose
   * status or deletion shows. An event that is not the echo of one of the box's own writes then
   * tells `then` what it asks for: a box that may claim is kept as a candidate and jumps the
   * queue; any other change is reconciled in turn, in full even if only its claim's finish was
   * queued.
   */
  onBoxEvent(key: string, box: PodBox, then: (outcome: BoxEventOutcome) => void): void {
    const { boxes, claims } = this.deps;
    claims.settled(box);
    boxes.echoes.unlessEcho(key, box.metadata?.resourceVersion, () => {
      if (claims.consider(key, box, performance.now())) then("claim");
      else {
        claims.eventCame(key);
        then("reconcile");
      }
    });
  }

  /**
   * A watch event of a box's Pod: `then` (its box looks again), unless the event is the echo of
   * the claim that gave the Pod to the box.
   */
  onPodEvent(pod: V1Pod, deleted: boolean, then: () => void): void {
    const podKey = objectKey(pod.metadata!.namespace!, pod.metadata!.name!);
    const podWrites = this.deps.claims.podWrites;
    // A Pod on its way out has no echo left to recognise (and claimed Pods' names are unique).
    if (deleted || pod.metadata?.deletionTimestamp) {
      podWrites.forget(podKey);
      then();
    } else podWrites.unlessEcho(podKey, pod.metadata?.resourceVersion, then);
  }

  /** Something about the box changed: its next run is a full reconcile. */
  eventCame(key: string): void {
    this.deps.claims.eventCame(key);
  }

  /** The claim's part of one reconcile of the box: a waiting claim, or the finish of a claim. */
  async reconcile(key: string): Promise<ClaimOutcome> {
    const { claims } = this.deps;
    const candidate = claims.takeCandidate(key);
    if (candidate) {
      const claimed = await this.#claim(key, candidate.box, candidate.at);
      // A box whose egress rules are not the standby's: the full reconcile writes them on the
      // Pod now, for the node's agent (the gateway waits for its answer).
      if (claimed) return claimed === "egress" ? "reconcile" : "done";
      // No standby: back in line, to wait its turn for a cold start.
      return "requeue";
    }
    const unfinished = claims.takeUnfinished(key);
    if (unfinished) {
      // A failed finish is redone by the full reconcile, from what it reads.
      const finished = await this.#finishClaim(key, unfinished.box, unfinished.standby).then(
        () => true,
        e => (Log.debug({ box: key, error: String(e) }, "claim not finished; reconciling"), false),
      );
      if (finished && unfinished.finishOnly) return "done";
    }
    return "reconcile";
  }

  /**
   * The warm claim: truthy when the box now runs on a standby (`egress` when its egress rules
   * are not the standby's). Its urgent part is two writes, the
   * standby's Pod and then the box status, with no read. The rest ({@link #finishClaim}) waits
   * until claims are quiet and runs before anything else the box's lane does. Until then the box
   * is safe without it: deleting the box takes the standby's Pod, and the pool removes the PVCs
   * it leaves; deleting the pool leaves the PVCs, which the claimed Pod also owns; a restart
   * reconciles every box, which finishes the claim from what it reads.
   */
  async #claim(key: string, box: PodBox, since: number): Promise<false | "claimed" | "egress"> {
    const { boxes, claims, client, pools } = this.deps;
    const namespace = box.metadata!.namespace!;
    const pool = box.spec!.warmPoolRef!;
    const poolKey = objectKey(namespace, pool);
    const current = pools.templateOf(poolKey);
    if (await this.#mayHaveClaimed(box)) return false;
    // Writes that can wait do so until claims are quiet, and a pool's refill writes wait while
    // one is in flight.
    const standby = await claims.activity.during(async () => {
      const s = await claimStandby(client, box, claims.standbys, current?.hash, claims.podWrites);
      if (!s) return undefined;
      await this.deps.failpoints.after("claimStandby");
      const status = claimedStatus(box, s, current, kubeTime(this.deps.clock()));
      await boxes.echoes.during(key, () => boxes.writeStatus(box, status));
      return s;
    });
    pools.asked(poolKey);
    pools.replenishSoon(poolKey);
    if (!standby) return false;
    claimDuration.observe((performance.now() - since) / 1000);
    countTransition("WarmPoolClaimed", { namespace, pool });
    claims.claimed(key, { box, standby });
    return claimedEgress(box, current) === standby.egress ? "claimed" : "egress";
  }

  /**
   * True when a box that may predate this process already holds a Pod: a claim whose Pod patch
   * landed before a restart and whose status write did not ({@link claimedBefore}). The full
   * reconcile then finishes that claim from what it reads (the Pod is the box's, so are the
   * standby's volumes), instead of a second claim leaving the first Pod running.
   */
  async #mayHaveClaimed(box: PodBox): Promise<boolean> {
    // Both are the API server's clock rounded down to the second: a box created in a later
    // second than the start was read in came after it.
    const created = new Date(box.metadata?.creationTimestamp ?? 0).getTime();
    if (created > (await this.start())) return false;
    return claimedBefore(this.deps.client, box, this.deps.claims.standbys);
  }

  /**
   * The end of a claim: the cleanup finalizer and the PVC handover, together, then the Event.
   * Their order does not matter: a claimed box deleted before its finalizer lands takes its
   * volumes along (garbage collection, as their owner is gone), as the finalizer's cleanup would.
   */
  async #finishClaim(key: string, box: PodBox, standby: Standby): Promise<void> {
    const { boxes, claims, client } = this.deps;
    const { namespace, name } = box.metadata!;
    await Promise.all([
      boxes.hasFinalizer(box) ? undefined : boxes.echoes.during(key, () => boxes.addFinalizer(box)),
      handOverVolumes(client, box, standby),
      claims.podWrites.during(objectKey(namespace!, standby.name), () =>
        labelClaimedPod(client, namespace!, standby.name, name!).catch(e => {
          if (statusOf(e) === 404) return undefined; // the Pod is gone: nothing to label
          throw e;
        }),
      ),
    ]);
    boxes.recordEvent(box, {
      type: "Normal",
      reason: "WarmPoolClaimed",
      message: `Running: claimed warm standby ${standby.name} of PodWarmPool ${standby.pool}`,
    });
  }
}

/**
 * The API server's clock now, read again until it answers: a later reading only makes more boxes
 * look for a claim of their own before claiming.
 */
async function serverTimeAtStart(client: ApiClient): Promise<number> {
  for (let wait = 500; ; wait = Math.min(2 * wait, SERVER_TIME_RETRY_MAX_MS)) {
    try {
      return await client.serverTime();
    } catch (e) {
      Log.warn({ error: String(e) }, "cannot read the API server's clock; trying again");
      await new Promise(resolve => setTimeout(resolve, wait));
    }
  }
}
