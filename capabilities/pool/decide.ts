import type { PodWarmPoolSpec, PodWarmPoolStatus } from "../api/podwarmpool";
import { buildStandby } from "../manifests/standby";
import type { Owner, TemplateRef } from "../manifests/types";
import { poolOwnerRef } from "../manifests/owner";
import type { ObjectAction } from "../kit/object-actions";
import { readyCondition } from "../kit/conditions";
import { LABEL_POOL } from "../manifests/labels";

/** One standby of a pool, grouped from its Pod and PVCs by volume key. */
export type ObservedStandby = {
  name: string;
  templateHash?: string;
  pod?: {
    name: string;
    uid?: string;
    phase?: string;
    ready: boolean;
    podIP?: string;
    deleting: boolean;
    resourceVersion?: string;
  };
  pvcs: {
    name: string;
    role: "rootfs" | "workspace";
    deleting: boolean;
    /** Its ownerReferences as read. */
    owners?: Owner[];
  }[];
};

/** What one reconcile of a PodWarmPool looks at. */
export type PoolObservation = {
  pool: {
    name: string;
    namespace: string;
    uid: string;
    generation: number;
    spec: PodWarmPoolSpec;
    status: PodWarmPoolStatus;
  };
  /** undefined: the template does not exist. */
  template?: TemplateRef;
  templateHash?: string;
  standbys: ObservedStandby[];
  /** An autoscaling pool's target (demand.ts); else `spec.replicas`. */
  desiredReplicas?: number;
  /**
   * Names to give new standbys (the shell makes them unique): as many as one reconcile may
   * create, at most {@link STANDBY_CREATE_BATCH}.
   */
  freshNames: string[];
  now: string;
};

export type PoolPlan = {
  actions: ObjectAction[];
  status: PodWarmPoolStatus;
  /** Set when more standbys are needed than this plan creates: reconcile again after this long. */
  requeueAfterMs?: number;
};

/** How many standbys beyond `replicas` may exist while stale ones are replaced. */
export const MAX_SURGE = 1;

/**
 * The most standbys one reconcile creates; a pool that needs more is reconciled again at once. No
 * reconcile does work in proportion to a number a user wrote, so one large pool cannot hold the
 * module (and every tenant's webhook calls) for long.
 */
export const STANDBY_CREATE_BATCH = 16;

const isReady = (s: ObservedStandby) =>
  Boolean(s.pod && !s.pod.deleting && s.pod.ready && s.pod.podIP && s.pod.phase === "Running");
const isLive = (s: ObservedStandby) => !s.pod?.deleting && s.pvcs.every(p => !p.deleting);

/**
 * Decides what a warm pool needs: standbys created up to its target (`spec.replicas`, or what an
 * autoscaling pool's demand asks for), excess ones removed
 * (unready first), stale ones (another template hash) replaced one at a time, a new one first, so
 * that the pool never empties at once. A standby's PVCs are owned by its Pod as well as by the
 * pool (`podOwnerRef`, owner.ts). A standby that lost its Pod is removed, never given a new Pod:
 * its Pod may have been claimed by a box that was deleted before it took the PVCs over, and what
 * that box wrote must not reach the next one. Pure.
 */
export function decidePool(o: PoolObservation): PoolPlan {
  const desired = desiredOf(o);
  const actions: ObjectAction[] = [];
  const live = o.standbys.filter(isLive);
  const current = live.filter(
    s => o.templateHash !== undefined && s.templateHash === o.templateHash,
  );
  const stale = live.filter(s => !current.includes(s));
  const removed = new Set<ObservedStandby>();
  const remove = (s: ObservedStandby) => {
    removed.add(s);
    // A claim may take the standby between this observation and the delete: the delete is
    // conditional on the Pod's resourceVersion, and a failed one ends this reconcile (its PVCs
    // are then left alone) to be retried on a fresh observation.
    if (s.pod && !s.pod.deleting) {
      actions.push({ type: "deletePod", name: s.pod.name, resourceVersion: s.pod.resourceVersion });
    }
    for (const p of s.pvcs) if (!p.deleting) actions.push({ type: "deletePVC", name: p.name });
  };

  // A standby with a Pod that ended or is gone, or missing a volume, is removed and made again.
  for (const s of live) {
    const ended = !s.pod || s.pod.phase === "Failed" || s.pod.phase === "Succeeded";
    const broken = s.pvcs.length < 2;
    if (ended || broken) remove(s);
  }

  let ready = live.filter(s => !removed.has(s) && isReady(s)).length;
  // Stale standbys: unready ones go at once, ready ones only while enough others are ready.
  for (const s of [...stale].sort(byReadiness)) {
    if (removed.has(s)) continue;
    if (!isReady(s)) remove(s);
    else if (ready - 1 >= desired) {
      remove(s);
      ready--;
    }
  }

  const keptCurrent = current.filter(s => !removed.has(s));
  // Scale down: the excess of current standbys, unready first.
  const excess = keptCurrent.length - desired;
  if (excess > 0) [...keptCurrent].sort(byReadiness).slice(0, excess).forEach(remove);
  // The current standbys that stay; nothing is removed after this point.
  const kept = keptCurrent.filter(s => !removed.has(s));

  // Standbys made before their PVCs had the Pod as an owner, or whose owner write was lost.
  for (const s of live.filter(s => !removed.has(s) && s.pod?.uid)) {
    for (const p of s.pvcs) {
      if (p.deleting || (p.owners ?? []).some(r => r.uid === s.pod!.uid)) continue;
      actions.push({
        type: "addPodOwner",
        name: p.name,
        owners: p.owners ?? [],
        pod: s.pod!.name,
        podUid: s.pod!.uid,
      });
    }
  }

  // Scale up, within the surge while stale standbys remain.
  const remaining = live.filter(s => !removed.has(s)).length;
  const staleLeft = stale.filter(s => !removed.has(s)).length;
  const allowed = desired + (staleLeft > 0 ? MAX_SURGE : 0);
  const want = Math.max(0, Math.min(desired - kept.length, allowed - remaining));
  const fresh = o.freshNames.slice(0, Math.min(want, STANDBY_CREATE_BATCH));
  if (o.template && o.templateHash) {
    for (const name of fresh) {
      const built = standby(o, name);
      actions.push(
        { type: "createPVC", pvc: built.workspace },
        { type: "createPVC", pvc: built.rootfs },
        { type: "createPod", pod: built.pod },
      );
      // The Pod's uid comes from its create: the PVCs go first, so the Pod never waits for them.
      for (const pvc of [built.workspace, built.rootfs]) {
        const owners = pvc.metadata!.ownerReferences!;
        actions.push({ type: "addPodOwner", name: pvc.metadata!.name!, owners, pod: name });
      }
    }
  }

  const status = poolStatus(o, live.length - removed.size, ready, kept.length);
  const more = Boolean(o.template && o.templateHash) && want > fresh.length;
  return { actions, status, ...(more ? { requeueAfterMs: 0 } : {}) };
}

/** The standbys the pool keeps now. */
const desiredOf = (o: PoolObservation) => o.desiredReplicas ?? o.pool.spec.replicas;

/** The controller ownerReference of a pool's standbys. */
export function poolOwner(o: PoolObservation): Owner {
  return poolOwnerRef(o.pool.name, o.pool.uid);
}

function standby(o: PoolObservation, name: string) {
  return buildStandby({
    namespace: o.pool.namespace,
    pool: o.pool.name,
    name,
    template: o.template!,
    templateHash: o.templateHash!,
    owner: poolOwner(o),
  });
}

/** Unready before ready, then by name: what a scale-down or a replacement removes first. */
function byReadiness(a: ObservedStandby, b: ObservedStandby): number {
  return Number(isReady(a)) - Number(isReady(b)) || a.name.localeCompare(b.name);
}

function poolStatus(
  o: PoolObservation,
  replicas: number,
  ready: number,
  updated: number,
): PodWarmPoolStatus {
  const desired = desiredOf(o);
  const prev = o.pool.status ?? {};
  const ok = Boolean(o.template) && ready >= desired;
  const reason = !o.template ? "TemplateNotFound" : ok ? "PoolReady" : "Replenishing";
  const message = !o.template
    ? `PodTemplate ${o.pool.spec.templateRef} not found`
    : `${ready}/${desired} standbys ready`;
  const condition = readyCondition(prev.conditions, ok, o.pool.generation, o.now, reason, message);
  return {
    replicas: Math.max(0, replicas),
    desiredReplicas: desired,
    readyReplicas: ready,
    updatedReplicas: updated,
    observedGeneration: o.pool.generation,
    ...(o.templateHash ? { templateHash: o.templateHash } : {}),
    selector: `${LABEL_POOL}=${o.pool.name}`,
    conditions: [condition],
  };
}

/**
 * The status of a pool whose standbys could not be made or removed (the API server refused a
 * write): what the plan reported, with Ready False and the refusal, so that `kubectl get` shows
 * why the pool is not filling rather than a bare count. The reconcile is retried with backoff.
 */
export function failedPoolStatus(
  o: PoolObservation,
  planned: PodWarmPoolStatus,
  error: string,
): PodWarmPoolStatus {
  const prev = o.pool.status ?? {};
  return {
    ...planned,
    conditions: [
      readyCondition(
        prev.conditions,
        false,
        o.pool.generation,
        o.now,
        "StandbyWriteFailed",
        `cannot keep standbys: ${error}`,
      ),
    ],
  };
}
