import { DEFAULT_ENVD_PORT } from "../api/common";
import { PROBLEM_REASONS } from "../api/podbox";
import type { PodBoxPhase, PodBoxReason, PodBoxStatus } from "../api/podbox";
import { buildBoxPod, egressLabels } from "../manifests/pod";
import { buildBoxPVCs } from "../manifests/pvcs";
import { buildCopyPod, CopyPodInput } from "../manifests/copy-pod";
import { rootfsPVCName, workspacePVCName } from "../manifests/names";
import type { Owner } from "../manifests/types";
import { boxOwnerRef } from "../manifests/owner";
import { poddImageHash } from "../manifests/template-hash";
import { effectiveState, invalidActivity, rfc3339Time } from "../reaper/activity";
import { condition, readyCondition } from "../kit/conditions";
import type { ObjectAction } from "../kit/object-actions";
import type {
  AwaitedObject,
  BoxEvent,
  BoxObservation,
  BoxPlan,
  NameConflict,
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
  lastActivityAt?: string;
};

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

function run(o: BoxObservation): BoxPlan {
  const { box } = o;
  const spec = box.spec;
  const prev = box.status ?? {};
  const key = volumeKeyOf(o);
  const { pvcs, claimedFromPool } = boxVolumes(o, key);
  const actions: ObjectAction[] = [];

  // Generations: the one the box runs (or, re-attaching, the newest kept), and the one it wants.
  const keptGens = pvcs.filter(p => p.role === "rootfs" && !p.deleting && p.generation);
  // The status is writable by whoever holds podboxes/status: a generation beyond the spec's counts
  // only when a rootfs of that generation exists (a re-attached key's), or a write to the status
  // alone would replace the rootfs.
  const reported = prev.rootfsGeneration;
  const trusted =
    reported !== undefined &&
    (reported <= spec.rootfsGeneration || keptGens.some(p => p.generation === reported))
      ? reported
      : undefined;
  const current =
    trusted ?? (keptGens.length > 0 ? Math.max(...keptGens.map(p => p.generation!)) : undefined);
  const target = Math.max(spec.rootfsGeneration, current ?? 0);
  const resetting = current !== undefined && target > current;
  // A box that never ran yet: only then are a fork's volumes cloned from its parent.
  const initial = prev.rootfsGeneration === undefined;
  const rootfsName = rootfsPVCName(key, target);
  const workspaceName = workspacePVCName(key);
  const clone = Boolean(spec.forkFrom) && initial && !resetting;
  // The podd an earlier Pod left on the rootfs volume: the box's record of its volume, or a new
  // fork's parent's, whose rootfs volume its own is a copy or a clone of, or the template's
  // seed's when the volume is (or is about to be) a clone of it.
  const volumePodd =
    prev.rootfsPVCName === rootfsName
      ? prev.rootfsPoddImage
      : clone
        ? o.parent?.state === "ready"
          ? o.parent.rootfsPoddImage
          : undefined
        : seededPodd(
            o,
            pvcs.find(p => p.role === "rootfs" && p.name === rootfsName),
          );
  const volumes = {
    rootfsPVCName: rootfsName,
    workspacePVCName: workspaceName,
    ...(volumePodd ? { rootfsPoddImage: volumePodd } : {}),
  };

  // Nothing is created or deleted next to an object that only looks like the box's.
  if (o.conflict) return plan(o, [], nameInUse(o.conflict, key));

  const reason = transitionReason(o, resetting, initial);
  const sandboxPods = o.pods.filter(p => p.role !== "copy");
  const copyPods = o.pods.filter(p => p.role === "copy");
  const livePods = sandboxPods.filter(p => !p.deleting);
  const { keep: pod, remove } = choosePod(livePods, rootfsName, workspaceName);
  // A claimed standby's volumes still the pool's become the box's before its Pod goes (a reset
  // replaces it): the pool removes a standby's volumes once their Pod is gone.
  if (remove.length > 0) actions.push(...adoptClaimed(o));
  actions.push(...remove.map(p => ({ type: "deletePod" as const, name: p.name })));
  const podGoing = remove.length > 0 || sandboxPods.some(p => p.deleting);

  // Only volumes the operator kept for this key are re-attached; any other is someone else's.
  const inUse = pvcs.find(
    p =>
      p.owner === "other" ||
      (p.owner === "pool" && !claimedFromPool(p)) ||
      (p.owner === "none" && !p.retained && !claimedFromPool(p)),
  );
  if (inUse) {
    return plan(o, actions, {
      phase: "Failed",
      reason: "VolumesInUse",
      message: `PVC ${inUse.name} belongs to another object; volume key "${key}" is in use`,
    });
  }

  const workspace = pvcs.find(p => p.role === "workspace" && p.name === workspaceName);
  const rootfs = pvcs.find(p => p.role === "rootfs" && p.name === rootfsName);

  // Old rootfs generations go once no Pod uses them (a reset keeps only the new one).
  for (const old of pvcs) {
    if (old.role !== "rootfs" || old.name === rootfsName || old.deleting) continue;
    if (!o.pods.some(p => p.rootfsClaim === old.name) && old.owner !== "other") {
      actions.push({ type: "deletePVC", name: old.name });
    }
  }
  // Re-attached volumes, and a claimed standby's, become this box's: its volume policy applies.
  for (const pvc of [workspace, rootfs]) {
    const adopting = actions.some(a => a.type === "adoptPVC" && a.name === pvc?.name);
    if (pvc && (pvc.owner === "none" || pvc.owner === "pool") && !adopting)
      actions.push({ type: "adoptPVC", name: pvc.name, owner: boxOwner(o) });
  }
  // A claimed standby's Pod whose relabelling the claim's finish did not get to.
  if (pod?.unlabelled && !pod.deleting) actions.push({ type: "labelClaimedPod", name: pod.name });

  const deletingVolume = [workspace, rootfs].find(p => p?.deleting);
  if (deletingVolume) {
    return plan(
      o,
      actions,
      {
        phase: "Pending",
        reason: "VolumesNotFound",
        message: `PVC ${deletingVolume.name} is being deleted; waiting for it to go before creating it again`,
      },
      [{ kind: "PersistentVolumeClaim", name: deletingVolume.name }],
    );
  }

  const missing = !workspace || !rootfs;
  if (missing && spec.volumeKey && !workspace) {
    return plan(
      o,
      actions,
      {
        phase: "Pending",
        reason: "VolumesNotFound",
        message: `no workspace PVC ${workspaceName} to re-attach for volume key "${spec.volumeKey}"`,
      },
      [{ kind: "PersistentVolumeClaim", name: workspaceName }],
    );
  }

  if (!o.template) {
    const ref = spec.templateRef ?? "(the pool's template)";
    const running = pod && isRunning(pod);
    if (running) {
      // Nothing to do until the Pod must be made again; a template watch brings the box back.
      return plan(o, actions, {
        ...runningFields(pod, volumes, target),
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
        message: `PodTemplate ${ref} not found in namespace ${box.namespace}`,
      },
      templateWaits(o),
    );
  }

  if (missing && clone) {
    const parent = o.parent ?? { state: "missing" as const };
    if (parent.state !== "ready") return waitForParent(o, actions, parent.state);
  }

  const parent = o.parent?.state === "ready" && clone ? o.parent : undefined;
  if (missing) {
    // Named after the key the box runs on, which for a claimed standby's is the standby's: the
    // status and the Pod name the same volume the create makes.
    const built = buildBoxPVCs({
      namespace: box.namespace,
      boxName: box.name,
      volumeKey: key,
      template: o.template,
      rootfsGeneration: target,
      owner: boxOwner(o),
      forkFrom: parent,
    });
    if (!workspace) actions.push({ type: "createPVC", pvc: built.workspace });
    if (!rootfs) actions.push({ type: "createPVC", pvc: built.rootfs });
  }

  // A fork's copied volumes: the box's Pod starts only once the copy is complete and its Pod gone.
  const copyFrom = {
    rootfsPVCName: rootfs?.copyFrom ?? parent?.rootfsPVCName,
    workspacePVCName: workspace?.copyFrom ?? parent?.workspacePVCName,
  };
  const uncopied = [workspace, rootfs].filter(p => p?.copyFrom && !p.copied) as ObservedPVC[];
  const copyStarts = missing && parent !== undefined && o.template.spec.forkStrategy === "Copy";
  if ((uncopied.length > 0 || copyStarts) && copyFrom.rootfsPVCName && copyFrom.workspacePVCName) {
    const source = copyFrom as typeof volumes;
    return copy(o, actions, copyPods, uncopied, { target: volumes, source });
  }
  if (copyPods.length > 0) {
    actions.push(
      ...copyPods.filter(p => !p.deleting).map(p => ({ type: "deletePod" as const, name: p.name })),
    );
    return plan(o, actions, {
      phase: "Pending",
      reason,
      message: "volumes copied; waiting for the copy Pod to go",
      ...volumes,
    });
  }

  // A Pod that needed no init container, as its volume held podd, and does not start: the next
  // one brings podd and checks the fill again, in case the volume is not what its record says.
  if (pod?.rootfsPodd && pod.failure && !pod.deleting) {
    actions.push({ type: "deletePod", name: pod.name });
    return plan(o, actions, {
      phase: "Pending",
      reason,
      message: `Pod ${pod.name} is not starting: ${pod.failure}; starting one that brings podd`,
      ...volumes,
      rootfsPoddImage: "",
      rootfsGeneration: prev.rootfsGeneration,
    });
  }

  if (!pod && !podGoing) {
    const sameInjector = volumePodd === o.template.spec.poddInjectorImage;
    actions.push({
      type: "createPod",
      pod: buildBoxPod({
        namespace: box.namespace,
        podName: box.name,
        boxName: box.name,
        volumeKey: key,
        template: o.template,
        rootfsPVCName: rootfsName,
        workspacePVCName: workspaceName,
        owner: boxOwner(o),
        labels: egressLabels(box.spec),
        ...(sameInjector ? { rootfsPodd: volumePodd } : {}),
      }),
    });
  }

  if (pod && isRunning(pod)) {
    // A box that is already Running for this reason keeps the message its transition wrote
    // (a claim names its standby): rewriting it would cost a status write and change nothing.
    const keep = prev.phase === "Running" && prev.reason === reason && prev.message;
    return plan(o, actions, {
      ...runningFields(pod, volumes, target),
      reason,
      message: keep
        ? prev.message!
        : runningMessage(reason, target, o.template.spec.forkStrategy === "Copy"),
    });
  }
  const failed = livePods.find(p => p.phase === "Failed" || p.phase === "Succeeded");
  // A Pod whose containers keep failing before it is ready (a volume that cannot be prepared,
  // an image without a shell): the sandbox never half-starts, and the box says why.
  const failing = !failed && !podGoing && pod?.failure ? pod : undefined;
  return plan(o, actions, {
    ...(userResume(o) ? { lastActivityAt: o.now } : {}),
    phase: "Pending",
    reason: failed ? "PodFailed" : failing ? "PodNotStarting" : reason,
    message: failed
      ? `Pod ${failed.name} ended (${failed.phase}); starting a new one`
      : failing
        ? `Pod ${failing.name} is not starting: ${failing.failure}; the kubelet retries it`
        : podGoing
          ? "waiting for the previous Pod to terminate"
          : `waiting for Pod ${pod?.name ?? box.name} to be ready`,
    podName: pod?.name ?? (podGoing ? undefined : box.name),
    ...volumes,
    rootfsGeneration: prev.rootfsGeneration,
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

function waitForParent(
  o: BoxObservation,
  actions: ObjectAction[],
  state: "missing" | "deleting" | "notReady",
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

function runningMessage(reason: PodBoxReason, generation: number, copied: boolean): string {
  switch (reason) {
    case "RootFSReset":
      return `running on a new rootfs (generation ${generation}); workspace kept`;
    case "ForkCloned":
      return copied
        ? "running on volumes copied from the parent"
        : "running on volumes cloned from the parent";
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
  const others = (prev.conditions ?? []).filter(
    c => c.type !== "Ready" && c.type !== ACTIVITY_CONDITION,
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
    templateName: o.template?.name ?? prev.templateName,
    reason: out.reason,
    message: out.message,
    lastActivityAt:
      out.lastActivityAt ??
      (out.phase === "Running" && prev.phase !== "Running"
        ? o.now
        : latest(prev.lastActivityAt, o.box.lastActivityAnnotation)),
    observedGeneration: o.box.generation,
    conditions: [ready, ...activity, ...others],
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
