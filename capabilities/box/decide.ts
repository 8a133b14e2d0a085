import { DEFAULT_ENVD_PORT } from "../api/common";
import { PROBLEM_REASONS } from "../api/podbox";
import type { PodBoxPhase, PodBoxReason, PodBoxStatus } from "../api/podbox";
import { buildBoxPod, egressAnnotations, egressLabels } from "../manifests/pod";
import { ANNOTATION_EGRESS, EGRESS_CONDITION, egressCondition } from "../network/egress-agent";
import { buildBoxPVCs } from "../manifests/pvcs";
import { buildCopyPod, CopyPodInput } from "../manifests/copy-pod";
import { rootfsPVCName, workspacePVCName } from "../manifests/names";
import { buildBoxSnapshots } from "../manifests/snapshots";
import type { Owner } from "../manifests/types";
import { boxOwnerRef } from "../manifests/owner";
import { poddImageHash } from "../manifests/template-hash";
import { tenantDefaultCopy } from "../manifests/tenant-default";
import { effectiveState, invalidActivity, rfc3339Time } from "../reaper/activity";
import { condition, readyCondition } from "../kit/conditions";
import type { ObjectAction } from "../kit/object-actions";
import type {
  AwaitedObject,
  BoxEvent,
  BoxObservation,
  BoxPlan,
  NameConflict,
  ObservedParent,
  ObservedPod,
  ObservedPVC,
} from "./types";

/** The condition that reports an activity annotation the reaper cannot read. */
export const ACTIVITY_CONDITION = "ActivityRecorded";

const PROBLEMS: readonly PodBoxReason[] = PROBLEM_REASONS;

/** What a box's status says beyond the fields every decision sets. */
type Outcome = {
  phase: PodBoxPhase;
  reason: PodBoxReason;
  message: string;
  podName?: string;
  podIP?: string;
  podUID?: string;
  rootfsPVCName?: string;
  workspacePVCName?: string;
  rootfsGeneration?: number;
  /** The podd on the rootfs volume ({@link PodBoxStatus}); "" forgets it. */
  rootfsPoddImage?: string;
  /** The VolumeSnapshots a paused fork holds its volumes as; null forgets them, unset keeps. */
  snapshots?: Snapshots | null;
  lastActivityAt?: string;
};

/** A paused fork's volumes held as VolumeSnapshots (its status names them). */
type Snapshots = { rootfsSnapshotName: string; workspaceSnapshotName: string };

/** How soon a box whose VolumeSnapshots are being cut looks again: nothing watches them. */
export const SNAPSHOT_RECHECK_MS = 500;
/** How soon it looks again while the driver fails to cut one (the snapshotter retries it). */
export const SNAPSHOT_FAILED_RECHECK_MS = 5000;

/**
 * Whether a reconcile of this box may list its Pods and PVCs from the API server's watch cache,
 * which can miss the latest changes. Yes when every object the box can own is named after its
 * own volume key (its name, or `spec.volumeKey`): an object missing from an outdated list is then
 * created again under the same name, the API server answers 409, and the box is read again
 * consistently. No for a box running on a claimed standby's volumes (their names come from what
 * the lists show, so an outdated list would name new, empty ones), and no for a box being
 * deleted (a PVC missing from the list would be left to garbage collection).
 */
export function readsFromCache(box: {
  name: string;
  volumeKey?: string;
  deleting: boolean;
  workspacePVCName?: string;
}): boolean {
  if (box.deleting) return false;
  const own = workspacePVCName(box.volumeKey ?? box.name);
  return box.workspacePVCName === undefined || box.workspacePVCName === own;
}

/**
 * Decides what to do about one PodBox, given what the API server holds: the actions that move it
 * towards its desired state and the status that describes where it is. Pure, and idempotent: the
 * plan for an observation that already matches the desired state has no actions and the same
 * status, so replayed events and the operator's own status writes change nothing.
 */
export function decideBox(o: BoxObservation): BoxPlan {
  if (o.box.deleting) return teardown(o, "Deleting");
  const effective = effectiveState(activityOf(o), o.nowMs ?? Date.parse(o.now));
  if (effective.desired === "Terminated") {
    const reason = effective.reason;
    return teardown(o, reason === "LeaseExpired" || reason === "Expired" ? reason : "Terminated");
  }
  if (effective.desired === "Paused") {
    if (o.box.spec.desiredState === "Paused" && takesSnapshots(o)) return snapshot(o);
    const reason = effective.reason;
    return pause(o, reason === "IdlePaused" || reason === "Expired" ? reason : "Paused");
  }
  return run(o);
}

/** A resume the user asked for (spec back to Running after their own pause) counts as activity. */
const userResume = (o: BoxObservation) =>
  o.box.status?.phase === "Paused" &&
  o.box.status.reason === "Paused" &&
  o.box.spec.desiredState === "Running";

function activityOf(o: BoxObservation) {
  const status = o.box.status ?? {};
  return {
    spec: o.box.spec,
    status: userResume(o) ? { ...status, lastActivityAt: o.now } : status,
    lastActivityAnnotation: o.box.lastActivityAnnotation,
  };
}

/**
 * The volume key a box's PVCs are named after: the one it re-attaches, else the one of the PVCs it
 * owns or its Pod mounts (a claimed standby's), else its own name.
 */
export function volumeKeyOf(o: BoxObservation): string {
  return (
    o.box.spec.volumeKey ??
    o.pvcs.find(p => p.owner === "this" && p.role === "workspace" && p.volumeKey)?.volumeKey ??
    o.pods.find(p => !p.deleting && p.volumeKey)?.volumeKey ??
    o.box.name
  );
}

/**
 * PVCs of the box's volume key that belong to it, or that its own Pod, a claimed standby, mounts:
 * still the pool's, or nobody's once the pool went before the claim finished. A box that
 * re-attaches a volume key claims none.
 */
function boxVolumes(o: BoxObservation, key: string) {
  const pvcs = o.pvcs.filter(p => !p.volumeKey || p.volumeKey === key);
  const claimedFromPool = (p: ObservedPVCLike) =>
    (p.owner === "pool" || p.owner === "none") &&
    !o.box.spec.volumeKey &&
    key !== o.box.name &&
    o.pods.some(
      pod => pod.volumeKey === key && (pod.rootfsClaim === p.name || pod.workspaceClaim === p.name),
    );
  return { pvcs, claimedFromPool };
}
type ObservedPVCLike = BoxObservation["pvcs"][number];

/**
 * The podd on a rootfs volume cloned from the template's seed: the template's injector image
 * when the volume says it holds that one's podd, or, with no volume yet, when the template has a
 * filled seed to clone it from (buildBoxPVCs does).
 */
function seededPodd(o: BoxObservation, rootfs: ObservedPVC | undefined): string | undefined {
  const image = o.template?.spec.poddInjectorImage;
  if (!image) return undefined;
  if (rootfs) return rootfs.rootfsPodd === poddImageHash(image) ? image : undefined;
  return o.template?.seed ? image : undefined;
}

/** The controller ownerReference that ties a Pod or PVC to its box. */
export function boxOwner(o: BoxObservation): Owner {
  return boxOwnerRef(o.box.name, o.box.uid);
}

/**
 * Moves a box towards Running, one lifecycle step after the other: each adds its actions, and the
 * first that must wait or fail ends the pass with the status that says why.
 */
function run(o: BoxObservation): BoxPlan {
  const t = targetOf(o);
  // Nothing is created or deleted next to an object that only looks like the box's.
  if (o.conflict) return plan(o, [], nameInUse(o.conflict, t.key));
  const pods = sortPods(o, t);
  const actions = replacePods(o, pods);
  const inUse = refuseVolumesInUse(o, t, actions);
  if (inUse) return inUse;
  actions.push(...deleteOldGenerations(o, t));
  actions.push(...adoptVolumes(o, t, pods.keep, actions));
  const unavailable = awaitVolumes(o, t, actions);
  if (unavailable) return unavailable;
  if (!hasTemplate(o)) return missingTemplate(o, t, pods.keep, actions);
  const unenforced = egressWithoutAgent(o, t, actions);
  if (unenforced) return unenforced;
  const orphan = awaitParent(o, t, actions);
  if (orphan) return orphan;
  actions.push(...createVolumes(o, t));
  const copying = copyVolumes(o, t, pods.copies, actions);
  if (copying) return copying;
  const retry = restartWithPodd(o, t, pods.keep, actions);
  if (retry) return retry;
  actions.push(...startPod(o, t, pods));
  actions.push(...writeEgress(o, pods.keep));
  if (pods.keep && isRunning(pods.keep)) return reportRunning(o, t, pods.keep, actions);
  return reportPending(o, t, pods, actions);
}

/** What the status says of a box's volumes. */
type Volumes = { rootfsPVCName: string; workspacePVCName: string; rootfsPoddImage?: string };

/** Where a box is heading, worked out once so that every step of {@link run} agrees on it. */
type BoxTarget = {
  /** The volume key its PVCs are named after ({@link volumeKeyOf}). */
  key: string;
  /** The PVCs of that key it may use, and which of them a claimed standby's Pod mounts. */
  pvcs: ObservedPVC[];
  claimedFromPool: (p: ObservedPVC) => boolean;
  /** The rootfs generation it runs (if any), the one it wants, and whether that is a reset. */
  current?: number;
  generation: number;
  resetting: boolean;
  /** It never ran yet: only then are a fork's volumes cloned from its parent. */
  initial: boolean;
  /** A new fork's volumes come from its parent (`parent`, once that has them). */
  clone: boolean;
  parent?: Extract<ObservedParent, { state: "ready" }>;
  /**
   * A new fork's volumes restored from VolumeSnapshots instead: its own (a paused fork that took
   * them, now resumed), or its parent's (a fork of such a box).
   */
  restore?: Snapshots & { rootfsPoddImage?: string };
  /** The names of its PVCs, and the PVCs of those names that exist. */
  rootfsName: string;
  workspaceName: string;
  rootfs?: ObservedPVC;
  workspace?: ObservedPVC;
  /** The podd an earlier Pod left on the rootfs volume, when known. */
  volumePodd?: string;
  volumes: Volumes;
  /** Why it is heading to Running ({@link transitionReason}). */
  reason: PodBoxReason;
};

/** Works out the box's target from its spec, its status and the PVCs of its volume key. */
function targetOf(o: BoxObservation): BoxTarget {
  const key = volumeKeyOf(o);
  const { pvcs, claimedFromPool } = boxVolumes(o, key);
  const { current, generation } = rootfsGenerations(o, pvcs);
  const resetting = current !== undefined && generation > current;
  const initial = o.box.status?.rootfsGeneration === undefined;
  const clone = Boolean(o.box.spec.forkFrom) && initial && !resetting;
  const rootfsName = rootfsPVCName(key, generation);
  const workspaceName = workspacePVCName(key);
  const rootfs = pvcs.find(p => p.role === "rootfs" && p.name === rootfsName);
  const restore = clone ? (ownSnapshots(o) ?? parentSnapshots(o)) : undefined;
  const parent = o.parent?.state === "ready" && clone && !restore ? o.parent : undefined;
  const volumePodd = volumePoddOf(o, rootfsName, rootfs, clone, parent ?? restore);
  return {
    key,
    pvcs,
    claimedFromPool,
    current,
    generation,
    resetting,
    initial,
    clone,
    parent,
    ...(restore ? { restore } : {}),
    rootfsName,
    workspaceName,
    rootfs,
    workspace: pvcs.find(p => p.role === "workspace" && p.name === workspaceName),
    volumePodd,
    volumes: {
      rootfsPVCName: rootfsName,
      workspacePVCName: workspaceName,
      ...(volumePodd ? { rootfsPoddImage: volumePodd } : {}),
    },
    reason: transitionReason(o, resetting, initial),
  };
}

/**
 * The podd an earlier Pod left on the rootfs volume: the box's record of its volume, or a new
 * fork's parent's, whose rootfs volume its own is a copy or a clone of, or the template's seed's
 * when the volume is (or is about to be) a clone of it.
 */
function volumePoddOf(
  o: BoxObservation,
  rootfsName: string,
  rootfs: ObservedPVC | undefined,
  clone: boolean,
  parent: { rootfsPoddImage?: string } | undefined,
): string | undefined {
  const prev = o.box.status ?? {};
  if (prev.rootfsPVCName === rootfsName) return prev.rootfsPoddImage;
  return clone ? parent?.rootfsPoddImage : seededPodd(o, rootfs);
}

/**
 * The rootfs generation the box runs (or, re-attaching, the newest kept), and the one it wants.
 * The status is writable by whoever holds podboxes/status: a generation beyond the spec's counts
 * only when a rootfs of that generation exists (a re-attached key's), or a write to the status
 * alone would replace the rootfs.
 */
function rootfsGenerations(o: BoxObservation, pvcs: ObservedPVC[]) {
  const spec = o.box.spec;
  const keptGens = pvcs.filter(p => p.role === "rootfs" && !p.deleting && p.generation);
  const reported = o.box.status?.rootfsGeneration;
  const trusted =
    reported !== undefined &&
    (reported <= spec.rootfsGeneration || keptGens.some(p => p.generation === reported))
      ? reported
      : undefined;
  const current =
    trusted ?? (keptGens.length > 0 ? Math.max(...keptGens.map(p => p.generation!)) : undefined);
  return { current, generation: Math.max(spec.rootfsGeneration, current ?? 0) };
}

/** The target's PVCs, not all there yet: they are created, cloned or copied. */
const missing = (t: BoxTarget) => !t.workspace || !t.rootfs;

/** The box's Pods: the one it keeps, the ones it replaces, and a fork's copy Pods. */
type BoxPods = {
  keep?: ObservedPod;
  remove: ObservedPod[];
  live: ObservedPod[];
  copies: ObservedPod[];
  /** A Pod of the box is going: the next one waits for it (it has the same name). */
  going: boolean;
};

/** Sorts the box's Pods: only one on the target's volumes, and still able to run, is kept. */
function sortPods(o: BoxObservation, t: BoxTarget): BoxPods {
  const sandboxPods = o.pods.filter(p => p.role !== "copy");
  const live = sandboxPods.filter(p => !p.deleting);
  const { keep, remove } = choosePod(live, t.rootfsName, t.workspaceName);
  const going = remove.length > 0 || sandboxPods.some(p => p.deleting);
  return { keep, remove, live, copies: o.pods.filter(p => p.role === "copy"), going };
}

/**
 * Deletes the Pods the box replaces (a reset's, one that ended, a second one). A claimed standby's
 * volumes still the pool's become the box's first: the pool removes a standby's volumes once
 * their Pod is gone.
 */
function replacePods(o: BoxObservation, pods: BoxPods): ObjectAction[] {
  if (pods.remove.length === 0) return [];
  return [
    ...adoptClaimed(o),
    ...pods.remove.map(p => ({ type: "deletePod" as const, name: p.name })),
  ];
}

/** Fails a box on a volume key another object uses: only volumes the operator kept re-attach. */
function refuseVolumesInUse(
  o: BoxObservation,
  t: BoxTarget,
  actions: ObjectAction[],
): BoxPlan | undefined {
  const inUse = t.pvcs.find(
    p =>
      p.owner === "other" ||
      (p.owner === "pool" && !t.claimedFromPool(p)) ||
      (p.owner === "none" && !p.retained && !t.claimedFromPool(p)),
  );
  if (!inUse) return undefined;
  return plan(o, actions, {
    phase: "Failed",
    reason: "VolumesInUse",
    message: `PVC ${inUse.name} belongs to another object; volume key "${t.key}" is in use`,
  });
}

/** Deletes old rootfs generations once no Pod uses them: a reset keeps only the new one. */
function deleteOldGenerations(o: BoxObservation, t: BoxTarget): ObjectAction[] {
  return t.pvcs
    .filter(old => old.role === "rootfs" && old.name !== t.rootfsName && !old.deleting)
    .filter(old => !o.pods.some(p => p.rootfsClaim === old.name) && old.owner !== "other")
    .map(old => ({ type: "deletePVC" as const, name: old.name }));
}

/**
 * Makes re-attached volumes, and a claimed standby's, the box's own, so that its volume policy
 * applies to them; a claimed standby's Pod gets the box's label if the claim's finish did not
 * get to it. `actions` are the pass's so far, which may adopt some already.
 */
function adoptVolumes(
  o: BoxObservation,
  t: BoxTarget,
  pod: ObservedPod | undefined,
  actions: ObjectAction[],
): ObjectAction[] {
  const adopted = new Set(actions.flatMap(a => (a.type === "adoptPVC" ? [a.name] : [])));
  const adopt: ObjectAction[] = [t.workspace, t.rootfs]
    .filter((p): p is ObservedPVC => p !== undefined)
    .filter(p => (p.owner === "none" || p.owner === "pool") && !adopted.has(p.name))
    .map(p => ({ type: "adoptPVC", name: p.name, owner: boxOwner(o) }));
  if (pod?.unlabelled && !pod.deleting) adopt.push({ type: "labelClaimedPod", name: pod.name });
  return adopt;
}

/** Waits for a volume being deleted to go, and for the workspace a volume key re-attaches. */
function awaitVolumes(
  o: BoxObservation,
  t: BoxTarget,
  actions: ObjectAction[],
): BoxPlan | undefined {
  const deleting = [t.workspace, t.rootfs].find(p => p?.deleting);
  if (deleting) {
    return plan(
      o,
      actions,
      {
        phase: "Pending",
        reason: "VolumesNotFound",
        message: `PVC ${deleting.name} is being deleted; waiting for it to go before creating it again`,
      },
      [{ kind: "PersistentVolumeClaim", name: deleting.name }],
    );
  }
  const key = o.box.spec.volumeKey;
  if (!key || t.workspace) return undefined;
  return plan(
    o,
    actions,
    {
      phase: "Pending",
      reason: "VolumesNotFound",
      message: `no workspace PVC ${t.workspaceName} to re-attach for volume key "${key}"`,
    },
    [{ kind: "PersistentVolumeClaim", name: t.workspaceName }],
  );
}

/** An observation whose template exists: every step after {@link missingTemplate} builds from it. */
type Templated = BoxObservation & { template: NonNullable<BoxObservation["template"]> };
const hasTemplate = (o: BoxObservation): o is Templated => o.template !== undefined;

/** Without its template a box cannot make a Pod: a running one is kept, else the box waits. */
function missingTemplate(
  o: BoxObservation,
  t: BoxTarget,
  pod: ObservedPod | undefined,
  actions: ObjectAction[],
): BoxPlan {
  const ref = o.box.spec.templateRef ?? "(the pool's template)";
  const source = o.tenantDefault;
  if (source) {
    // The namespace gets the platform's default as a template of its own, which its tenant may
    // then change or replace; the template's watch event brings the box back.
    actions.push({
      type: "createTemplate",
      template: tenantDefaultCopy(source.name, `${source.namespace}/${source.name}`, source.spec),
    });
    return plan(
      o,
      actions,
      {
        phase: "Pending",
        reason: "TemplateNotFound",
        message: `PodTemplate ${ref} not found in namespace ${o.box.namespace}: making it from the tenant default ${source.namespace}/${source.name}`,
      },
      templateWaits(o),
    );
  }
  if (pod && isRunning(pod)) {
    // Nothing to do until the Pod must be made again; a template watch brings the box back.
    return plan(o, actions, {
      ...runningFields(pod, t.volumes, t.generation),
      reason: "TemplateNotFound",
      message: `PodTemplate ${ref} not found: the running Pod is kept, but it cannot be recreated`,
    });
  }
  return plan(
    o,
    actions,
    {
      phase: "Pending",
      reason: "TemplateNotFound",
      message: `PodTemplate ${ref} not found in namespace ${o.box.namespace}`,
    },
    templateWaits(o),
  );
}

/**
 * A new fork's volumes are cloned or copied from its parent's: it waits for a parent that has
 * them, and fails on one being deleted.
 */
function awaitParent(
  o: BoxObservation,
  t: BoxTarget,
  actions: ObjectAction[],
): BoxPlan | undefined {
  if (!missing(t) || !t.clone || t.restore) return undefined;
  const state = o.parent?.state ?? "missing";
  if (state === "ready" || state === "snapshots") return undefined;
  return parentUnavailable(o, state, actions);
}

/** A fork whose parent cannot give it volumes: it waits for the parent, or fails on its deletion. */
function parentUnavailable(
  o: BoxObservation,
  state: Exclude<ObservedParent["state"], "ready">,
  actions: ObjectAction[],
): BoxPlan {
  const parent = o.box.spec.forkFrom;
  if (state === "deleting") {
    // The parent's volumes may vanish during a clone: never start one. forkFrom is immutable, so
    // this box cannot become valid again; it stays Failed with its data (none) untouched.
    return plan(o, actions, {
      phase: "Failed",
      reason: "ForkParentDeleting",
      message: `PodBox ${parent} is being deleted; a fork needs a parent that stays`,
    });
  }
  return plan(
    o,
    actions,
    {
      phase: "Pending",
      reason: state === "missing" ? "ForkParentNotFound" : "ForkParentNotReady",
      message:
        state === "missing"
          ? `PodBox ${parent} (forkFrom) not found in namespace ${o.box.namespace}; waiting for it`
          : `PodBox ${parent} (forkFrom) has no volumes yet; waiting for them`,
    },
    [{ kind: "PodBox", name: parent! }],
  );
}

/**
 * Creates the target's missing PVCs, named after the key the box runs on (for a claimed
 * standby's, the standby's: the status and the Pod name the same volume the create makes). A
 * rootfs is cloned from the template's filled seed, a new fork's volumes from its parent's.
 */
function createVolumes(o: Templated, t: BoxTarget): ObjectAction[] {
  if (!missing(t)) return [];
  const built = buildBoxPVCs({
    namespace: o.box.namespace,
    boxName: o.box.name,
    volumeKey: t.key,
    template: o.template,
    rootfsGeneration: t.generation,
    owner: boxOwner(o),
    forkFrom: t.parent,
    restoreFrom: t.restore,
  });
  return [
    ...(t.workspace ? [] : [{ type: "createPVC" as const, pvc: built.workspace }]),
    ...(t.rootfs ? [] : [{ type: "createPVC" as const, pvc: built.rootfs }]),
  ];
}

/** A fork's copied volumes: the box's Pod starts only once the copy is complete and its Pod gone. */
function copyVolumes(
  o: Templated,
  t: BoxTarget,
  copyPods: ObservedPod[],
  actions: ObjectAction[],
): BoxPlan | undefined {
  const { workspace, rootfs, parent } = t;
  const copyFrom = {
    rootfsPVCName: rootfs?.copyFrom ?? parent?.rootfsPVCName,
    workspacePVCName: workspace?.copyFrom ?? parent?.workspacePVCName,
  };
  const uncopied = [workspace, rootfs].filter(p => p?.copyFrom && !p.copied) as ObservedPVC[];
  const copyStarts = missing(t) && parent !== undefined && o.template.spec.forkStrategy === "Copy";
  if ((uncopied.length > 0 || copyStarts) && copyFrom.rootfsPVCName && copyFrom.workspacePVCName) {
    const source = copyFrom as Volumes;
    return copy(o, actions, copyPods, uncopied, { target: t.volumes, source });
  }
  if (copyPods.length === 0) return undefined;
  actions.push(
    ...copyPods.filter(p => !p.deleting).map(p => ({ type: "deletePod" as const, name: p.name })),
  );
  return plan(o, actions, {
    phase: "Pending",
    reason: t.reason,
    message: "volumes copied; waiting for the copy Pod to go",
    ...t.volumes,
  });
}

/**
 * Replaces a Pod that needed no init container, as its volume held podd, and does not start: the
 * next one brings podd and checks the fill again, in case the volume is not what its record says.
 */
function restartWithPodd(
  o: BoxObservation,
  t: BoxTarget,
  pod: ObservedPod | undefined,
  actions: ObjectAction[],
): BoxPlan | undefined {
  if (!pod?.rootfsPodd || !pod.failure || pod.deleting) return undefined;
  actions.push({ type: "deletePod", name: pod.name });
  return plan(o, actions, {
    phase: "Pending",
    reason: t.reason,
    message: `Pod ${pod.name} is not starting: ${pod.failure}; starting one that brings podd`,
    ...t.volumes,
    rootfsPoddImage: "",
    rootfsGeneration: o.box.status?.rootfsGeneration,
  });
}

/** Creates the box's Pod on the target's volumes once no Pod of the box is left or still going. */
function startPod(o: Templated, t: BoxTarget, pods: BoxPods): ObjectAction[] {
  if (pods.keep || pods.going) return [];
  const { box } = o;
  // A volume that holds the template's podd needs no init container to fill it.
  const sameInjector = t.volumePodd === o.template.spec.poddInjectorImage;
  const pod = buildBoxPod({
    namespace: box.namespace,
    podName: box.name,
    boxName: box.name,
    volumeKey: t.key,
    template: o.template,
    rootfsPVCName: t.rootfsName,
    workspacePVCName: t.workspaceName,
    owner: boxOwner(o),
    labels: egressLabels(box.spec),
    annotations: egressAnnotations(box.spec, o.template.spec),
    ...(sameInjector ? { rootfsPodd: t.volumePodd } : {}),
  });
  return [{ type: "createPod", pod }];
}

/**
 * Writes the box's egress rules on its Pod when they are not what it carries: a claimed standby
 * has its template's, and a change of the box's (`PUT /network`) reaches a running Pod this way.
 */
function writeEgress(o: Templated, pod: ObservedPod | undefined): ObjectAction[] {
  if (!pod || pod.deleting) return [];
  const wanted = wantedEgress(o);
  if ((wanted ?? undefined) === pod.egress) return [];
  return [{ type: "setPodEgress", name: pod.name, value: wanted ?? null }];
}

/**
 * A box with egress rules in a cluster without the node egress agent: nothing would enforce them,
 * so it does not start rather than run with them ignored.
 */
function egressWithoutAgent(
  o: Templated,
  t: BoxTarget,
  actions: ObjectAction[],
): BoxPlan | undefined {
  if (o.egressAgent || wantedEgress(o) === undefined) return undefined;
  return plan(o, actions, {
    phase: "Pending",
    reason: "EgressNotEnforced",
    message:
      "network.allowOut and network.denyOut (the box's or its template's) need the node egress " +
      "agent, which this cluster does not run (the module's CUBEPOD_EGRESS_AGENT_ADDRESSES is " +
      "unset); the box starts once they are removed or the agent runs",
    ...t.volumes,
  });
}

/** The egress annotation the box's Pod should carry, if any. */
function wantedEgress(o: BoxObservation): string | undefined {
  if (!o.template) return undefined;
  return egressAnnotations(o.box.spec, o.template.spec)?.[ANNOTATION_EGRESS];
}

/** Reports the box Running on its kept, ready Pod, for the reason its transition started with. */
function reportRunning(
  o: Templated,
  t: BoxTarget,
  pod: ObservedPod,
  actions: ObjectAction[],
): BoxPlan {
  const prev = o.box.status ?? {};
  // A box that is already Running for this reason keeps the message its transition wrote
  // (a claim names its standby): rewriting it would cost a status write and change nothing.
  const keep = prev.phase === "Running" && prev.reason === t.reason && prev.message;
  return plan(o, actions, {
    ...runningFields(pod, t.volumes, t.generation),
    reason: t.reason,
    message: keep
      ? prev.message!
      : runningMessage(
          t.reason,
          t.generation,
          t.restore ? "restored" : o.template.spec.forkStrategy === "Copy" ? "copied" : "cloned",
        ),
  });
}

/** Reports the box Pending on its Pod: starting, going, ended, or failing before it is ready. */
function reportPending(
  o: BoxObservation,
  t: BoxTarget,
  pods: BoxPods,
  actions: ObjectAction[],
): BoxPlan {
  const { keep: pod, going } = pods;
  const failed = pods.live.find(p => p.phase === "Failed" || p.phase === "Succeeded");
  // A Pod whose containers keep failing before it is ready (a volume that cannot be prepared,
  // an image without a shell): the sandbox never half-starts, and the box says why.
  const failing = !failed && !going && pod?.failure ? pod : undefined;
  return plan(o, actions, {
    ...(userResume(o) ? { lastActivityAt: o.now } : {}),
    phase: "Pending",
    reason: failed ? "PodFailed" : failing ? "PodNotStarting" : t.reason,
    message: failed
      ? `Pod ${failed.name} ended (${failed.phase}); starting a new one`
      : failing
        ? `Pod ${failing.name} is not starting: ${failing.failure}; the kubelet retries it`
        : going
          ? "waiting for the previous Pod to terminate"
          : `waiting for Pod ${pod?.name ?? o.box.name} to be ready`,
    podName: pod?.name ?? (going ? undefined : o.box.name),
    ...t.volumes,
    rootfsGeneration: o.box.status?.rootfsGeneration,
  });
}

/**
 * A fork's volumes being copied (`forkStrategy: Copy`): the copy Pod is created, followed, and
 * once it Succeeded both volumes are marked copied before it is deleted. A Pod that Failed for
 * good (the kubelet retries failed attempts itself) is deleted, and the next pass starts another.
 */
function copy(
  o: BoxObservation,
  actions: ObjectAction[],
  copyPods: ObservedPod[],
  uncopied: ObservedPVC[],
  volumes: { target: CopyPodInput["target"]; source: CopyPodInput["source"] },
): BoxPlan {
  const live = copyPods.find(p => !p.deleting);
  const from = `the parent's volumes (${volumes.source.rootfsPVCName}, ${volumes.source.workspacePVCName})`;
  const pending = (reason: PodBoxReason, message: string) =>
    plan(o, actions, { phase: "Pending", reason, message, ...volumes.target });
  if (!live) {
    // A Pod still going may be writing: the next one starts after it.
    if (copyPods.length === 0) {
      actions.push({
        type: "createPod",
        pod: buildCopyPod({
          namespace: o.box.namespace,
          boxName: o.box.name,
          template: o.template!,
          ...volumes,
          owner: boxOwner(o),
        }),
      });
    }
    return pending("ForkCopying", `copying ${from}`);
  }
  if (live.phase === "Succeeded") {
    actions.push(...uncopied.map(p => ({ type: "markCopied" as const, name: p.name })));
    actions.push({ type: "deletePod", name: live.name });
    return pending("ForkCopying", `copied ${from}; starting the Pod`);
  }
  if (live.phase === "Failed") {
    actions.push({ type: "deletePod", name: live.name });
    return pending(
      "ForkCopyFailed",
      `copy Pod ${live.name} failed${live.failure ? ` (${live.failure})` : ""}; starting another`,
    );
  }
  if (live.restarts > 0) {
    return pending(
      "ForkCopyFailed",
      `copying ${from}: attempt ${live.restarts} failed${live.failure ? ` (${live.failure})` : ""}; the kubelet retries it`,
    );
  }
  return pending("ForkCopying", `copying ${from}`);
}

/**
 * Takes over a claimed standby's PVCs that are still the pool's (the claim's finish was lost to a
 * restart, or failed): a pool removes a standby's PVCs once their Pod is gone, so this goes
 * before any Pod is deleted.
 */
function adoptClaimed(o: BoxObservation): ObjectAction[] {
  const { pvcs, claimedFromPool } = boxVolumes(o, volumeKeyOf(o));
  return pvcs
    .filter(p => claimedFromPool(p) && !p.deleting)
    .map(p => ({ type: "adoptPVC" as const, name: p.name, owner: boxOwner(o) }));
}

function pause(o: BoxObservation, reason: "Paused" | "IdlePaused" | "Expired"): BoxPlan {
  const prev = o.box.status ?? {};
  const actions: ObjectAction[] = adoptClaimed(o);
  for (const p of o.pods) if (!p.deleting) actions.push({ type: "deletePod", name: p.name });
  const gone = o.pods.length === 0;
  return plan(o, actions, {
    phase: gone ? "Paused" : "Pending",
    reason,
    message:
      (reason === "Expired" ? "expired: " : "") +
      (gone ? "Pod deleted; volumes kept" : "pausing: waiting for the Pod to terminate"),
    rootfsPVCName: prev.rootfsPVCName,
    workspacePVCName: prev.workspacePVCName,
    rootfsGeneration: prev.rootfsGeneration,
  });
}

/** The VolumeSnapshots a status names, when it names both. */
function snapshotsOf(status: PodBoxStatus): Snapshots | undefined {
  const { rootfsSnapshotName, workspaceSnapshotName } = status;
  return rootfsSnapshotName && workspaceSnapshotName
    ? { rootfsSnapshotName, workspaceSnapshotName }
    : undefined;
}

/** VolumeSnapshots to restore, with the podd their rootfs holds when known. */
const restoring = (from: Snapshots, podd?: string): BoxTarget["restore"] => ({
  ...from,
  ...(podd ? { rootfsPoddImage: podd } : {}),
});

/** A paused fork that took its volumes as VolumeSnapshots, restoring them as it first runs. */
function ownSnapshots(o: BoxObservation): BoxTarget["restore"] {
  const own = snapshotsOf(o.box.status ?? {});
  return own && restoring(own, o.box.status?.rootfsPoddImage);
}

/** A fork of a paused fork that holds its volumes as VolumeSnapshots restores those. */
function parentSnapshots(o: BoxObservation): BoxTarget["restore"] {
  if (o.parent?.state !== "snapshots") return undefined;
  const { rootfsSnapshotName, workspaceSnapshotName, rootfsPoddImage } = o.parent;
  return restoring({ rootfsSnapshotName, workspaceSnapshotName }, rootfsPoddImage);
}

/**
 * A fork paused by its spec before it ever ran takes its parent's volumes now, as VolumeSnapshots,
 * when its template names a VolumeSnapshotClass: a point in time with no Pod (a clone waits for
 * one, the storage binding at the first consumer). Not a box that has volumes of its own already,
 * nor a fork of such a snapshot, which has no volumes to take: those wait, paused, as any fork.
 */
function takesSnapshots(o: BoxObservation): boolean {
  return (
    Boolean(o.box.spec.forkFrom) &&
    o.box.status?.rootfsGeneration === undefined &&
    Boolean(o.template?.spec.volumeSnapshotClassName) &&
    !o.pvcs.some(p => p.owner === "this") &&
    o.parent?.state !== "snapshots"
  );
}

/**
 * Takes a paused fork's volumes as VolumeSnapshots of its parent's current rootfs and workspace,
 * and reports it Paused (`Snapshotted`) once both are cut and ready: from then on its forks, and
 * its own resume, restore them, whatever became of the parent.
 */
function snapshot(o: BoxObservation): BoxPlan {
  const seen = o.snapshots ?? [];
  const foreign = seen.find(s => s.owner !== "this");
  if (foreign) {
    return plan(o, [], {
      phase: "Failed",
      reason: "VolumesInUse",
      message: `VolumeSnapshot ${foreign.name} exists and is not this box's`,
    });
  }
  const rootfs = seen.find(s => s.role === "rootfs");
  const workspace = seen.find(s => s.role === "workspace");
  const parentName = o.box.spec.forkFrom!;
  const parent = o.parent ?? { state: "missing" as const };
  if (!rootfs || !workspace) {
    if (parent.state === "ready") {
      const built = buildBoxSnapshots({
        namespace: o.box.namespace,
        boxName: o.box.name,
        template: o.template!,
        source: parent,
        owner: boxOwner(o),
      });
      const actions: ObjectAction[] = [
        ...(rootfs ? [] : [{ type: "createVolumeSnapshot" as const, snapshot: built.rootfs }]),
        ...(workspace
          ? []
          : [{ type: "createVolumeSnapshot" as const, snapshot: built.workspace }]),
      ];
      return {
        ...plan(o, actions, {
          phase: "Pending",
          reason: "Snapshotting",
          message: `taking PodBox ${parentName}'s volumes as VolumeSnapshots`,
        }),
        recheckAfterMs: SNAPSHOT_RECHECK_MS,
      };
    }
    return parentUnavailable(o, parent.state, []);
  }
  const failed = [rootfs, workspace].find(s => s.error);
  if (failed) {
    return {
      ...plan(o, [], {
        phase: "Pending",
        reason: "SnapshotFailed",
        message: `VolumeSnapshot ${failed.name}: ${failed.error}`,
      }),
      recheckAfterMs: SNAPSHOT_FAILED_RECHECK_MS,
    };
  }
  if (!rootfs.ready || !workspace.ready) {
    return {
      ...plan(o, [], {
        phase: "Pending",
        reason: "Snapshotting",
        message: `waiting for the VolumeSnapshots of PodBox ${parentName}'s volumes to be cut`,
      }),
      recheckAfterMs: SNAPSHOT_RECHECK_MS,
    };
  }
  return plan(o, [], {
    phase: "Paused",
    reason: "Snapshotted",
    message: `holds PodBox ${parentName}'s volumes as VolumeSnapshots; no Pod, no PVC`,
    snapshots: { rootfsSnapshotName: rootfs.name, workspaceSnapshotName: workspace.name },
    rootfsPoddImage: rootfs.poddImage ?? "",
  });
}

function teardown(
  o: BoxObservation,
  reason: "Deleting" | "Terminated" | "LeaseExpired" | "Expired",
): BoxPlan {
  const { box } = o;
  const prev = box.status ?? {};
  const retain = box.spec.volumeReclaimPolicy === "Retain";
  const actions: ObjectAction[] = adoptClaimed(o);
  for (const p of o.pods) if (!p.deleting) actions.push({ type: "deletePod", name: p.name });
  const key = volumeKeyOf(o);
  const { pvcs, claimedFromPool } = boxVolumes(o, key);
  const ours = pvcs.filter(p => p.owner === "this" || claimedFromPool(p));
  if (!retain) {
    actions.push(
      ...ours.filter(p => !p.deleting).map(p => ({ type: "deletePVC" as const, name: p.name })),
    );
  } else if (box.deleting) {
    // Retained volumes must outlive the box: garbage collection would follow the ownerReference.
    actions.push(...ours.map(p => ({ type: "orphanPVC" as const, name: p.name })));
  }
  // Snapshots are deleted whatever the policy: nothing re-attaches them.
  actions.push(
    ...(o.snapshots ?? [])
      .filter(s => s.owner === "this" && !s.deleting)
      .map(s => ({ type: "deleteVolumeSnapshot" as const, name: s.name })),
  );
  const podsGone = o.pods.length === 0;
  // The volumes are handled by this pass's own actions (deleted, or orphaned), which run before
  // the finalizer goes; waiting for another pass would hang, as nothing watches PVCs to wake it.
  const cleanupDone = podsGone;
  const volumesKept = retain ? " (volumes kept)" : " (volumes deleted)";
  const status: Outcome = {
    phase: podsGone ? "Terminated" : "Pending",
    reason,
    message:
      (reason === "LeaseExpired" ? "lease expired: " : reason === "Expired" ? "expired: " : "") +
      (podsGone ? `Pod deleted${volumesKept}` : "terminating: waiting for the Pod to terminate"),
    ...(podsGone ? { snapshots: null } : {}),
    ...(retain
      ? {
          rootfsPVCName: prev.rootfsPVCName,
          workspacePVCName: prev.workspacePVCName,
          rootfsGeneration: prev.rootfsGeneration,
        }
      : {}),
  };
  return { ...plan(o, actions, status), ...(box.deleting ? { cleanupDone } : {}) };
}

/** A box whose Pod or PVC name another object holds: Failed, and that object left alone. */
function nameInUse(c: NameConflict, key: string): Outcome {
  if (c.kind === "Pod") {
    return {
      phase: "Failed",
      reason: "PodNameInUse",
      message: `Pod ${c.name} exists and is not this box's; the box's Pod takes that name`,
    };
  }
  return {
    phase: "Failed",
    reason: "VolumesInUse",
    message: `PVC ${c.name} exists and is not this box's; volume key "${key}" is in use`,
  };
}

/** What a box whose template is missing waits for: the template, and its pool if it has one. */
function templateWaits(o: BoxObservation): AwaitedObject[] {
  const { templateRef, warmPoolRef } = o.box.spec;
  const name = o.templateName ?? templateRef;
  return [
    ...(name ? [{ kind: "PodTemplate" as const, name }] : []),
    ...(warmPoolRef ? [{ kind: "PodWarmPool" as const, name: warmPoolRef }] : []),
  ];
}

/** Why the box is heading to Running: decided when the transition starts, then kept. */
function transitionReason(o: BoxObservation, resetting: boolean, initial: boolean): PodBoxReason {
  const prev = o.box.status ?? {};
  if (resetting) return "RootFSReset";
  if (prev.phase === "Paused" || (prev.phase === "Terminated" && !initial)) return "Resumed";
  const startingOver =
    !prev.phase || !prev.reason || PROBLEMS.includes(prev.reason) || prev.reason === "Creating";
  const copying = prev.reason === "ForkCopying";
  if (startingOver || copying) return o.box.spec.forkFrom && initial ? "ForkCloned" : "Started";
  if (["Paused", "IdlePaused", "Expired", "Terminated", "Deleting"].includes(prev.reason!))
    return "Resumed";
  return prev.reason!;
}

/** The Pod to keep (on the box's current volumes) and the ones to delete. */
function choosePod(pods: ObservedPod[], rootfs: string, workspace: string) {
  const fits = (p: ObservedPod) =>
    p.rootfsClaim === rootfs &&
    p.workspaceClaim === workspace &&
    p.phase !== "Failed" &&
    p.phase !== "Succeeded";
  const good = pods.filter(fits);
  const keep = good[0];
  return { keep, remove: pods.filter(p => p !== keep) };
}

const isRunning = (p: ObservedPod) => p.phase === "Running" && p.ready && Boolean(p.podIP);

function runningFields(
  pod: ObservedPod,
  volumes: { rootfsPVCName: string; workspacePVCName: string; rootfsPoddImage?: string },
  generation: number,
) {
  return {
    phase: "Running" as const,
    podName: pod.name,
    podIP: pod.podIP,
    podUID: pod.uid,
    ...volumes,
    // What the running Pod's fill left on the volume (its own podd), else what was there.
    ...(pod.poddImage ? { rootfsPoddImage: pod.poddImage } : {}),
    rootfsGeneration: generation,
  };
}

function runningMessage(
  reason: PodBoxReason,
  generation: number,
  forked: "cloned" | "copied" | "restored",
): string {
  switch (reason) {
    case "RootFSReset":
      return `running on a new rootfs (generation ${generation}); workspace kept`;
    case "ForkCloned":
      return forked === "restored"
        ? "running on volumes restored from VolumeSnapshots"
        : `running on volumes ${forked} from the parent`;
    case "Resumed":
      return "resumed on its volumes";
    case "WarmPoolClaimed":
      return "running on a claimed warm standby";
    default:
      return "running";
  }
}

/** Assembles the plan: the full status (with observedGeneration, Ready) and the events. */
function plan(
  o: BoxObservation,
  actions: ObjectAction[],
  out: Outcome,
  waitingFor?: AwaitedObject[],
): BoxPlan {
  const prev = o.box.status ?? {};
  const envdPort = o.template?.spec.envdPort;
  const poddURL =
    out.phase === "Running" && out.podIP
      ? `http://${out.podIP}:${envdPort ?? DEFAULT_ENVD_PORT}`
      : undefined;
  const ready = readyCondition(
    prev.conditions,
    out.phase === "Running",
    o.box.generation,
    o.now,
    out.reason,
    out.message,
  );
  const badActivity = invalidActivity(o.box.lastActivityAnnotation);
  const activity = badActivity
    ? [
        condition(
          prev.conditions,
          {
            type: ACTIVITY_CONDITION,
            status: "False",
            reason: "InvalidAnnotation",
            message: badActivity,
          },
          o.box.generation,
          o.now,
        ),
      ]
    : [];
  // Whether the node of the Pod it runs on enforces its egress rules, if it has any.
  const egress = egressCondition(
    wantedEgress(o),
    out.podName ? o.pods.find(p => p.name === out.podName && !p.deleting) : undefined,
    prev.conditions,
    o.box.generation,
    o.now,
  );
  const others = (prev.conditions ?? []).filter(
    c => c.type !== "Ready" && c.type !== ACTIVITY_CONDITION && c.type !== EGRESS_CONDITION,
  );
  const status: PodBoxStatus = clean({
    phase: out.phase,
    podName: out.podName,
    podIP: out.podIP,
    podUID: out.podUID,
    poddURL,
    rootfsPVCName: out.rootfsPVCName,
    workspacePVCName: out.workspacePVCName,
    rootfsGeneration: out.rootfsGeneration,
    rootfsPoddImage:
      out.rootfsPoddImage !== undefined
        ? out.rootfsPoddImage || undefined
        : out.rootfsPVCName !== undefined && out.rootfsPVCName === prev.rootfsPVCName
          ? prev.rootfsPoddImage
          : undefined,
    ...(out.snapshots === null ? {} : (out.snapshots ?? snapshotsOf(prev) ?? {})),
    templateName: o.template?.name ?? prev.templateName,
    reason: out.reason,
    message: out.message,
    lastActivityAt:
      out.lastActivityAt ??
      (out.phase === "Running" && prev.phase !== "Running"
        ? o.now
        : latest(prev.lastActivityAt, o.box.lastActivityAnnotation)),
    observedGeneration: o.box.generation,
    conditions: [ready, ...activity, ...egress, ...others],
  });
  const events: BoxEvent[] =
    prev.phase !== status.phase || prev.reason !== status.reason
      ? [
          {
            type: PROBLEMS.includes(out.reason) ? "Warning" : "Normal",
            reason: out.reason,
            message: `${out.phase}: ${out.message}`,
          },
        ]
      : [];
  return { actions, status, events, ...(waitingFor ? { waitingFor } : {}) };
}

/**
 * The later of two RFC 3339 times. Anything else is ignored, so that a bad annotation (or a bad
 * value an earlier version stored) never reaches the status, whose writes it would fail.
 */
function latest(a?: string, b?: string): string | undefined {
  const ta = rfc3339Time(a);
  const tb = rfc3339Time(b);
  if (tb === undefined) return ta === undefined ? undefined : a;
  if (ta === undefined) return b;
  return tb > ta ? b : a;
}

function clean<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}
