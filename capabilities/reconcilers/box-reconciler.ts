import { a, Log } from "pepr";
import type { PodBox } from "../api/kinds";
import {
  claimDuration,
  countTransition,
  reconcileDuration,
  reconcileErrors,
} from "../metrics/registry";
import { decideBox, readsFromCache } from "./box-decide";
import {
  addFinalizer,
  applyAction,
  claimClock,
  hasFinalizer,
  recordEvent,
  removeFinalizer,
  writeStatus,
} from "./box-apply";
import { claimStandby, handOverVolumes } from "./claim";
import { claimedStatus, mayClaim } from "./claim-decide";
import { NamespaceTerminatingError, PermanentError } from "./errors";
import { reportRetry } from "./retry-report";
import { getBox, observeBox } from "./box-observe";
import type { BoxAction, BoxPlan, NameConflict } from "./box-types";
import type { V1ObjectMeta } from "@kubernetes/client-node";
import { getObject, paths } from "../client/resources";
import { isControlledBy } from "../manifests/owner";
import { poolTemplates, replenishSoon } from "./pool-reconciler";
import { KeyedQueue, WorkResult } from "./queue";
import { Standby, StandbyIndex } from "./standby-index";
import { OwnWrites } from "./own-writes";
import { QuietSink } from "./quiet-sink";
import { objectKey } from "./keys";
import { kubeTime } from "./conditions";

/** Box versions this reconciler wrote itself: their watch events need no reconcile. */
const ownWrites = new OwnWrites();
/** Pod versions written by claims: the claimed Pod's watch event needs no reconcile either. */
const ownPodWrites = new OwnWrites();
/** Claimed boxes whose finalizer, PVC handover and Event are still to come (see {@link claim}). */
const afterClaim = new Map<string, { box: PodBox; standby: Standby }>();
/**
 * Claimed boxes whose finish the sink has queued, and for which no event has come since: their
 * run finishes the claim and nothing more. An event clears the mark ({@link reconcileBoxSoon}),
 * so that a change made while the finish waited is reconciled in the same run.
 */
const finishDue = new Set<string>();
/** The claims' finishes, written once claims are quiet (see {@link QuietSink}). */
const claimFinishes = new QuietSink<string>(
  async key => finishNow(key),
  {
    quietMs: Number(process.env.CUBEPOD_CLAIM_FINISH_QUIET_MS ?? 100),
    // 15 s, not 5: at 5 s the finishes of a run of back-to-back claims fell due in the middle of
    // it, 25-37 writes at once beside one claim (96-210 ms; experiments/...-claim-finish-max-delay).
    maxDelayMs: Number(process.env.CUBEPOD_CLAIM_FINISH_MAX_DELAY_MS ?? 15_000),
    concurrency: 8,
    // Never dropped: a finish that never ran would leave the claim unfinished until an event.
    capacity: Number.POSITIVE_INFINITY,
  },
  claimClock,
);
/** New boxes that may claim a standby, as their watch event brought them, and when. */
const claimHints = new Map<string, { box: PodBox; at: number }>();
/**
 * UIDs of boxes that tried to claim, until a watch event shows their status: a box claims at most
 * once, at its first event (a later one would race its own cold start).
 */
const claiming = new Set<string>();
/** The ready standbys of every pool, fed by the watch on pool Pods. */
export const standbyIndex = new StandbyIndex();

/**
 * One reconcile of a box. A new box of a warm pool first tries to claim a standby (two writes:
 * the standby Pod, then the box status; no read, the watch event is fresh), and its next run
 * finishes the claim. Otherwise: add the finalizer if it is missing, observe the box in the API
 * server, decide, apply the actions in order (PVCs before the Pod), write the status when it
 * changed, record the transition as an Event, and drop the finalizer once a deletion is cleaned
 * up. Errors a retry cannot fix end in `phase: Failed`; the others are thrown, and the queue
 * retries them with backoff. A create refused because the namespace is being deleted ends the
 * reconcile quietly: the box is deleted next, and that brings its cleanup.
 */
export async function reconcileBox(key: string): Promise<WorkResult> {
  const hint = claimHints.get(key);
  claimHints.delete(key);
  // Set only for a box that may claim and has not tried (enqueueBox), and used once.
  if (hint) {
    // Claims jump the queue; one that finds no standby goes back to wait its turn for a cold start.
    if (await claim(key, hint.box, hint.at)) return;
    return { requeueAfterMs: 0 };
  }
  const claimed = afterClaim.get(key);
  if (claimed) {
    afterClaim.delete(key);
    const finishOnly = finishDue.delete(key);
    // A failed finish is redone by the full reconcile, from what it reads (nothing, if the box
    // is gone: the PVCs it was handed go with it).
    const finished = await finishClaim(key, claimed.box, claimed.standby).then(
      () => true,
      e => (Log.debug({ box: key, error: String(e) }, "claim not finished; reconciling"), false),
    );
    // Only the sink asked: no event came for the box meanwhile.
    if (finished && finishOnly) return;
  }

  const [namespace, name] = key.split("/");
  const box = await getBox(namespace, name);
  if (!box) {
    ownWrites.forget(key);
    return;
  }
  const end = reconcileDuration.startTimer({ kind: "PodBox" });
  try {
    // Before anything is created for the box, so that a deletion always finds it held.
    if (!hasFinalizer(box)) await ownWrites.during(key, () => addFinalizer(box));
    const plan = await observeDecideApply(box);
    const rv = await ownWrites.during(key, () => writeStatus(box, plan.status));
    // A transition is counted once, when its reason first appears (not on each phase it passes).
    if (rv && plan.status.reason !== box.status?.reason && plan.status.reason) {
      countTransition(plan.status.reason, { namespace });
    }
    for (const event of plan.events) recordEvent(box, event);
    if (plan.cleanupDone) await removeFinalizer(box);
    return plan.requeueAfterMs !== undefined ? { requeueAfterMs: plan.requeueAfterMs } : undefined;
  } catch (e) {
    if (e instanceof NamespaceTerminatingError) {
      Log.debug({ box: key, error: e.message }, "namespace is being deleted; nothing to do");
      return;
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
    await ownWrites.during(key, () => writeStatus(box, failed));
    recordEvent(box, { type: "Warning", reason: "APIError", message: e.message });
  } finally {
    end();
  }
}

/** Passes of {@link observeDecideApply}: from the cache, consistent, with the conflict found. */
const MAX_PASSES = 3;

/**
 * Observes the box, decides and applies the actions, and returns the plan whose status is to be
 * written. Its Pods and PVCs are read from the API server's watch cache when that is safe
 * ({@link readsFromCache}), which spares a cold start two consistent lists (90 ms each here).
 * The cache holds every event that brought this reconcile, but may miss the module's own latest
 * writes. An action that finds its work done (a create that exists, a delete of what is gone)
 * shows the read was outdated: the rest of the plan is dropped, and the box is read again
 * consistently and decided anew. A create that still finds its object after a consistent read
 * has met an object that is not the box's, or one it owns but no longer labels: only the first
 * is a conflict, and the box is decided anew knowing it ({@link NameConflict}).
 */
async function observeDecideApply(box: PodBox): Promise<BoxPlan> {
  const { namespace, name } = box.metadata!;
  let fromCache = readsFromCache({
    name: name!,
    volumeKey: box.spec?.volumeKey,
    deleting: Boolean(box.metadata?.deletionTimestamp),
    workspacePVCName: box.status?.workspacePVCName,
  });
  let conflict: NameConflict | undefined;
  for (let pass = 1; ; pass++) {
    const plan = decideBox(await observeBox(box, { fromCache, conflict }));
    const stopped = await applyUntilOutdated(box, plan.actions, fromCache);
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
 * outdated read; returns that stop (with the conflict it found, if any), or undefined when every
 * action was applied. After a consistent read, only a create whose object is not the box's (or
 * is gone again) stops: the other actions that find their work done met a race that changes
 * nothing.
 */
async function applyUntilOutdated(
  box: PodBox,
  actions: BoxAction[],
  fromCache: boolean,
): Promise<{ conflict?: NameConflict } | undefined> {
  const { namespace, name, uid } = box.metadata!;
  for (const action of actions) {
    if (await applyAction(namespace!, name!, action)) continue;
    if (fromCache) return {};
    const wanted = nameTaken(action);
    if (!wanted) continue;
    const at = wanted.kind === "Pod" ? paths.pods : paths.pvcs;
    const found = await getObject<{ metadata?: V1ObjectMeta }>(at(namespace!, wanted.name));
    if (!found) return {};
    if (!isControlledBy(found.metadata, uid!)) return { conflict: wanted };
  }
  return undefined;
}

/** The kind and name a create action takes, or undefined for the other actions. */
function nameTaken(action: BoxAction): NameConflict | undefined {
  if (action.type === "createPod") return { kind: "Pod", name: action.pod.metadata!.name! };
  if (action.type === "createPVC") {
    return { kind: "PersistentVolumeClaim", name: action.pvc.metadata!.name! };
  }
  return undefined;
}

/**
 * The warm claim: true when the box now runs on a standby. Its urgent part is two writes, the
 * standby's Pod and then the box status, with no read. The rest ({@link finishClaim}) waits until
 * claims are quiet, at most 15 s, and runs before anything else the box's lane does. Until then
 * the box is safe without it: deleting the box takes the standby's Pod, and the pool removes the
 * PVCs it leaves; deleting the pool leaves the PVCs, which the claimed Pod also owns; a restart
 * reconciles every box, which finishes the claim from what it reads. Only a box whose volumes
 * must outlive it (`volumeReclaimPolicy: Retain`) finishes at once, as it did before: deleted
 * without its finalizer, it would lose them.
 */
async function claim(key: string, box: PodBox, since: number): Promise<boolean> {
  const namespace = box.metadata!.namespace!;
  const pool = box.spec!.warmPoolRef!;
  const poolKey = objectKey(namespace, pool);
  const current = poolTemplates.get(poolKey);
  claiming.add(box.metadata!.uid!);
  // Writes that can wait do so until claims are quiet (one written now would slow the next
  // claim), and a pool's refill writes wait while one is in flight.
  const standby = await claimClock.during(async () => {
    const s = await claimStandby(box, standbyIndex, current?.hash, ownPodWrites);
    if (!s) return undefined;
    const status = claimedStatus(box, s, current, kubeTime());
    await ownWrites.during(key, () => writeStatus(box, status));
    return s;
  });
  replenishSoon(poolKey);
  if (!standby) return false;
  claimDuration.observe((performance.now() - since) / 1000);
  countTransition("WarmPoolClaimed", { namespace, pool });
  afterClaim.set(key, { box, standby });
  // A box that keeps its volumes needs its finalizer before anyone deletes it: at once.
  if (box.spec!.volumeReclaimPolicy === "Retain") finishNow(key);
  else claimFinishes.record(key);
  return true;
}

/**
 * The end of a claim: the cleanup finalizer and the PVC handover, together, then the Event. Their
 * order does not matter: a claimed box deleted before its finalizer lands takes its volumes along
 * (garbage collection, as their owner is gone), as the finalizer's cleanup would. Its writes'
 * echoes are recognised, so a claim costs no reconcile afterwards. If it fails, the full
 * reconcile that follows does the same from what it reads.
 */
async function finishClaim(key: string, box: PodBox, standby: Standby): Promise<void> {
  await Promise.all([
    hasFinalizer(box) ? undefined : ownWrites.during(key, () => addFinalizer(box)),
    handOverVolumes(box, standby),
  ]);
  recordEvent(box, {
    type: "Normal",
    reason: "WarmPoolClaimed",
    message: `Running: claimed warm standby ${standby.name} of PodWarmPool ${standby.pool}`,
  });
}

/** The queue every event about a box goes through. */
export const boxQueue = new KeyedQueue(reconcileBox, {
  concurrency: Number(process.env.CUBEPOD_RECONCILE_CONCURRENCY ?? 8),
  urgentConcurrency: Number(process.env.CUBEPOD_CLAIM_CONCURRENCY ?? 16),
  baseDelayMs: 200,
  maxDelayMs: 30_000,
  onError: reportRetry("PodBox", "box"),
});

/**
 * Enqueues the box of a sandbox Pod's watch event, unless the event is the echo of the claim
 * that gave the Pod to the box.
 */
export function enqueueBoxOfPod(
  namespace: string,
  boxName: string,
  pod: a.Pod,
  deleted = false,
): void {
  const podKey = objectKey(namespace, pod.metadata!.name!);
  // A Pod on its way out has no echo left to recognise (and claimed Pods' names are unique).
  const enqueue = () => reconcileBoxSoon(objectKey(namespace, boxName));
  if (deleted || pod.metadata?.deletionTimestamp) {
    ownPodWrites.forget(podKey);
    enqueue();
  } else ownPodWrites.unlessEcho(podKey, pod.metadata?.resourceVersion, enqueue);
}

/** Enqueues the box of a watch event, unless the event is the echo of our own write. */
export function enqueueBox(box: PodBox): void {
  const key = objectKey(box.metadata!.namespace!, box.metadata!.name!);
  if (box.status?.phase || box.metadata?.deletionTimestamp) claiming.delete(box.metadata!.uid!);
  ownWrites.unlessEcho(key, box.metadata?.resourceVersion, () => {
    if (mayClaim(box) && !claiming.has(box.metadata!.uid!)) {
      claimHints.set(key, { box, at: performance.now() });
      boxQueue.addFirst(key);
    } else {
      reconcileBoxSoon(key);
    }
  });
}

/** Queues the finish of a claim still unfinished, and nothing more (see {@link finishDue}). */
function finishNow(key: string): void {
  if (!afterClaim.has(key)) return;
  finishDue.add(key);
  boxQueue.add(key);
}

/** Asks for a full reconcile of the box: something about it changed. */
export function reconcileBoxSoon(key: string): void {
  finishDue.delete(key);
  boxQueue.add(key);
}
