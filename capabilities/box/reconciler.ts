import { a, Log } from "pepr";
import type { V1ObjectMeta } from "@kubernetes/client-node";
import type { PodBox } from "../api/kinds";
import type { PodBoxStatus } from "../api/podbox";
import type { ApiClient } from "../client/api-client";
import { paths } from "../client/paths";
import { claimStandby, handOverVolumes, claimedBefore } from "../claim/apply";
import { claimedStatus } from "../claim/decide";
import type { WarmClaims } from "../claim/warm-claims";
import type { Standby } from "../claim/standby-index";
import {
  NamespaceTerminatingError,
  PermanentError,
  RefusedError,
  statusOf,
} from "../kit/api-errors";
import { kubeTime, readyCondition } from "../kit/conditions";
import { applyAction, ActionContext, labelClaimedPod, ObjectAction } from "../kit/object-actions";
import { objectKey } from "../kit/object-key";
import type { WorkQueue, WorkResult } from "../kit/work-queue";
import { WriteEchoes } from "../kit/write-echoes";
import { boxOfPod, isControlledBy } from "../manifests/owner";
import {
  claimDuration,
  countTransition,
  reconcileDuration,
  reconcileErrors,
} from "../metrics/registry";
import type { PoolReconciler } from "../pool/reconciler";
import {
  addFinalizer,
  BoxEventRecorder,
  hasFinalizer,
  removeFinalizer,
  writeBoxStatus,
} from "./apply";
import { decideBox, readsFromCache } from "./decide";
import { observeBox } from "./observe";
import type { SeedIndex } from "../seed/seed-index";
import type { AwaitedObject, BoxPlan, NameConflict } from "./types";
import { WaitingBoxes } from "./waiting-boxes";

/** Passes of one reconcile: from the cache, consistent, with the conflict found. */
const MAX_PASSES = 3;

/** The longest wait between attempts to read the API server's clock at the start. */
const SERVER_TIME_RETRY_MAX_MS = 10_000;

export type BoxReconcilerDeps = ActionContext & {
  queue: WorkQueue;
  /** The time observations and claimed statuses are stamped with. */
  clock: () => Date;
  claims: WarmClaims;
  pools: Pick<PoolReconciler, "templateOf" | "replenishSoon" | "asked">;
  events: BoxEventRecorder;
  /** The templates' filled seeds, which new rootfs volumes are cloned from. */
  seeds?: SeedIndex;
};

/**
 * Reconciles PodBoxes: every event about a box (the box, its Pod, its template, the reaper) goes
 * through one lane of the queue, and each run reads the box afresh, decides and applies. A new
 * box of a warm pool first tries to claim a standby (see {@link claim}).
 */
export class BoxReconciler {
  /** Box versions this reconciler wrote: their watch events need no reconcile. */
  readonly #writes = new WriteEchoes();
  /** Boxes waiting for an object to appear, be ready or go: its watch event wakes them. */
  readonly #waiting = new WaitingBoxes();

  /**
   * The API server's clock at (or just after) this reconciler's start, to the second: boxes it
   * created before then may have claimed before the start.
   */
  #startedAt?: Promise<number>;

  constructor(private readonly deps: BoxReconcilerDeps) {}

  /** Reads the API server's clock, once: called when the process starts watching boxes. */
  start(): Promise<number> {
    return (this.#startedAt ??= serverTimeAtStart(this.deps.client));
  }

  /** A watch event of the box: a claim jumps the queue; the echo of our own write is dropped. */
  onBoxEvent(box: PodBox): void {
    const { claims, queue } = this.deps;
    const key = objectKey(box.metadata!.namespace!, box.metadata!.name!);
    // Forks wait for their parent's status, which is one of our own writes: before the echo check.
    this.wake("PodBox", box.metadata!.namespace!, box.metadata!.name!);
    claims.settled(box);
    this.#writes.unlessEcho(key, box.metadata?.resourceVersion, () => {
      if (claims.consider(key, box, performance.now())) queue.addFirst(key);
      else this.reconcileSoon(key);
    });
  }

  /**
   * A watch event of a sandbox Pod: its box looks again, unless the event is the echo of the
   * claim that gave the Pod to the box.
   */
  onPodEvent(pod: a.Pod, deleted: boolean): void {
    const namespace = pod.metadata?.namespace;
    const boxName = boxOfPod(pod.metadata ?? {});
    if (!namespace || !boxName) return;
    const podKey = objectKey(namespace, pod.metadata!.name!);
    const enqueue = () => this.reconcileSoon(objectKey(namespace, boxName));
    const podWrites = this.deps.claims.podWrites;
    // A Pod on its way out has no echo left to recognise (and claimed Pods' names are unique).
    if (deleted || pod.metadata?.deletionTimestamp) {
      podWrites.forget(podKey);
      enqueue();
    } else podWrites.unlessEcho(podKey, pod.metadata?.resourceVersion, enqueue);
  }

  /** A watch event of an object boxes may wait for: they look again. */
  wake(kind: AwaitedObject["kind"], namespace: string, name: string): void {
    for (const key of this.#waiting.event(kind, namespace, name)) this.reconcileSoon(key);
  }

  /** Asks for a full reconcile of the box: something about it changed. */
  reconcileSoon(key: string): void {
    this.deps.claims.eventCame(key);
    this.deps.queue.add(key);
  }

  /**
   * One reconcile of a box: a waiting claim, or the finish of a claim, first. Otherwise: add the
   * finalizer if it is missing, observe, decide, apply the actions in order (PVCs before the Pod),
   * write the status when it changed, record the transition as an Event, and drop the finalizer
   * once a deletion is cleaned up. Errors a retry cannot fix end in `phase: Failed`; the others
   * are thrown, and the queue retries them with backoff. A create refused because the namespace
   * is being deleted ends the reconcile quietly: the box is deleted next.
   */
  async reconcile(key: string): Promise<WorkResult> {
    const { claims, client, events } = this.deps;
    const candidate = claims.takeCandidate(key);
    if (candidate) {
      if (await this.#claim(key, candidate.box, candidate.at)) return;
      // No standby: back in line, to wait its turn for a cold start.
      return { requeueAfterMs: 0 };
    }
    const unfinished = claims.takeUnfinished(key);
    if (unfinished) {
      // A failed finish is redone by the full reconcile, from what it reads.
      const finished = await this.#finishClaim(key, unfinished.box, unfinished.standby).then(
        () => true,
        e => (Log.debug({ box: key, error: String(e) }, "claim not finished; reconciling"), false),
      );
      if (finished && unfinished.finishOnly) return;
    }

    const [namespace, name] = key.split("/");
    const since = this.#waiting.mark();
    const box = await client.get<PodBox>(paths.podBoxes(namespace, name));
    if (!box) {
      this.#writes.forget(key);
      this.#waiting.forget(key);
      return;
    }
    const end = reconcileDuration.startTimer({ kind: "PodBox" });
    try {
      // Before anything is created for the box, so that a deletion always finds it held.
      if (!hasFinalizer(box)) await this.#writes.during(key, () => addFinalizer(client, box));
      const plan = await this.#observeDecideApply(box);
      const rv = await this.#writes.during(key, () => writeBoxStatus(client, box, plan.status));
      // A transition is counted once, when its reason first appears.
      if (rv && plan.status.reason !== box.status?.reason && plan.status.reason) {
        countTransition(plan.status.reason, { namespace });
      }
      for (const event of plan.events) events.record(box, event);
      if (plan.cleanupDone) await removeFinalizer(client, box);
      // What it waits for came meanwhile: look again now, else sleep until it comes.
      if (this.#waiting.waitFor(key, namespace, plan.waitingFor ?? [], since)) {
        return { requeueAfterMs: 0 };
      }
    } catch (e) {
      if (e instanceof NamespaceTerminatingError) {
        Log.debug({ box: key, error: e.message }, "namespace is being deleted; nothing to do");
        return;
      }
      if (e instanceof RefusedError) {
        // Said in the status, then retried with backoff by the queue: the cause may go.
        await this.#reportRefusal(key, box, e.message);
        throw e;
      }
      if (!(e instanceof PermanentError)) throw e;
      reconcileErrors.inc({ kind: "PodBox", permanent: "true" });
      Log.warn({ box: key, error: e.message }, "PodBox failed permanently");
      const failed = {
        ...box.status,
        phase: "Failed" as const,
        reason: "APIError" as const,
        message: e.message,
        observedGeneration: box.metadata?.generation,
      };
      await this.#writes.during(key, () => writeBoxStatus(client, box, failed));
      events.record(box, { type: "Warning", reason: "APIError", message: e.message });
      this.#waiting.forget(key);
    } finally {
      end();
    }
  }

  /** A refused write: the box waits (Pending, reason Forbidden), with no Pod to show. */
  async #reportRefusal(key: string, box: PodBox, message: string): Promise<void> {
    const { client, events } = this.deps;
    const prev = box.status ?? {};
    const generation = box.metadata?.generation ?? 0;
    const now = kubeTime(this.deps.clock());
    // The fields of a Pod that is not there go (sent as null by the status patch).
    const kept = Object.fromEntries(
      Object.entries(prev).filter(([k]) => !["podName", "podIP", "podUID", "poddURL"].includes(k)),
    );
    const status: PodBoxStatus = {
      ...kept,
      phase: "Pending",
      reason: "Forbidden",
      message: `${message}; retrying`,
      observedGeneration: generation,
      conditions: [
        readyCondition(prev.conditions, false, generation, now, "Forbidden", message),
        ...(prev.conditions ?? []).filter(c => c.type !== "Ready"),
      ],
    };
    const written = await this.#writes.during(key, () => writeBoxStatus(client, box, status));
    if (written && prev.reason !== "Forbidden") {
      events.record(box, { type: "Warning", reason: "Forbidden", message });
    }
  }

  /**
   * Observes the box, decides and applies, and returns the plan whose status is to be written.
   * Its Pods and PVCs are read from the API server's watch cache when that is safe
   * ({@link readsFromCache}). An action that finds its work done (a create that exists, a delete
   * of what is gone) shows the read was outdated: the rest of the plan is dropped, and the box is
   * read again consistently and decided anew. A create that still finds its object after a
   * consistent read has met an object that is not the box's, or one it owns but no longer
   * labels: only the first is a conflict, and the box is decided anew knowing it.
   */
  async #observeDecideApply(box: PodBox): Promise<BoxPlan> {
    const { namespace, name } = box.metadata!;
    let fromCache = readsFromCache({
      name: name!,
      volumeKey: box.spec?.volumeKey,
      deleting: Boolean(box.metadata?.deletionTimestamp),
      workspacePVCName: box.status?.workspacePVCName,
    });
    let conflict: NameConflict | undefined;
    for (let pass = 1; ; pass++) {
      const observation = await observeBox(this.deps.client, box, {
        fromCache,
        conflict,
        now: this.deps.clock(),
        seeds: this.deps.seeds,
      });
      const plan = decideBox(observation);
      const stopped = await this.#applyUntilOutdated(box, plan.actions, fromCache);
      if (!stopped) return plan;
      if (pass === MAX_PASSES) {
        throw new Error(
          `the objects of PodBox ${namespace}/${name} kept changing during its reconcile`,
        );
      }
      conflict ??= stopped.conflict;
      fromCache = false;
    }
  }

  /**
   * Applies the actions in order, and stops at the first that shows the plan was decided on an
   * outdated read; returns that stop (with the conflict it found, if any), or undefined when
   * every action was applied. After a consistent read, only a create whose object is not the
   * box's (or is gone again) stops.
   */
  async #applyUntilOutdated(
    box: PodBox,
    actions: ObjectAction[],
    fromCache: boolean,
  ): Promise<{ conflict?: NameConflict } | undefined> {
    const { namespace, name, uid } = box.metadata!;
    for (const action of actions) {
      if (await applyAction(this.deps, namespace!, name!, action)) continue;
      if (fromCache) return {};
      const wanted = nameTaken(action);
      if (!wanted) continue;
      const at = wanted.kind === "Pod" ? paths.pods : paths.pvcs;
      const found = await this.deps.client.get<{ metadata?: V1ObjectMeta }>(
        at(namespace!, wanted.name),
      );
      if (!found) return {};
      if (!isControlledBy(found.metadata, uid!)) return { conflict: wanted };
    }
    return undefined;
  }

  /**
   * The warm claim: true when the box now runs on a standby. Its urgent part is two writes, the
   * standby's Pod and then the box status, with no read. The rest ({@link #finishClaim}) waits
   * until claims are quiet and runs before anything else the box's lane does. Until then the box
   * is safe without it: deleting the box takes the standby's Pod, and the pool removes the PVCs
   * it leaves; deleting the pool leaves the PVCs, which the claimed Pod also owns; a restart
   * reconciles every box, which finishes the claim from what it reads.
   */
  async #claim(key: string, box: PodBox, since: number): Promise<boolean> {
    const { claims, client, pools } = this.deps;
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
      await this.#writes.during(key, () => writeBoxStatus(client, box, status));
      return s;
    });
    pools.asked(poolKey);
    pools.replenishSoon(poolKey);
    if (!standby) return false;
    claimDuration.observe((performance.now() - since) / 1000);
    countTransition("WarmPoolClaimed", { namespace, pool });
    claims.claimed(key, { box, standby });
    return true;
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
    const { client, events, claims } = this.deps;
    const { namespace, name } = box.metadata!;
    await Promise.all([
      hasFinalizer(box) ? undefined : this.#writes.during(key, () => addFinalizer(client, box)),
      handOverVolumes(client, box, standby),
      claims.podWrites.during(objectKey(namespace!, standby.name), () =>
        labelClaimedPod(client, namespace!, standby.name, name!).catch(e => {
          if (statusOf(e) === 404) return undefined; // the Pod is gone: nothing to label
          throw e;
        }),
      ),
    ]);
    events.record(box, {
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

/** The kind and name a create action takes, or undefined for the other actions. */
function nameTaken(action: ObjectAction): NameConflict | undefined {
  if (action.type === "createPod") return { kind: "Pod", name: action.pod.metadata!.name! };
  if (action.type === "createPVC") {
    return { kind: "PersistentVolumeClaim", name: action.pvc.metadata!.name! };
  }
  return undefined;
}
