import { hostname } from "node:os";
import { API_VERSION } from "../api/common";
import type { PodBoxStatus } from "../api/podbox";
import type { PodBox } from "../api/kinds";
import { FINALIZER, LABEL_BOX, LABEL_POOL } from "../manifests/labels";
import type { BoxAction, BoxEvent } from "./box-types";
import {
  describeError,
  isNamespaceTerminating,
  isRetryable,
  NamespaceTerminatingError,
  PermanentError,
  statusOf,
} from "./errors";
import { kubeRequest } from "../client/fast-client";
import {
  createObject,
  deleteObject,
  jsonPatch,
  mergePatch,
  mergePatchStatus,
  paths,
} from "../client/resources";
import type { Owner } from "../manifests/types";
import { podOwnerRef } from "../manifests/owner";
import { failpoint } from "./failpoint";
import { ClaimClock, QuietSink } from "./quiet-sink";
import { Log } from "pepr";

/** The finalizer of earlier versions (Pepr's `Finalize`): removed along with ours. */
const LEGACY_FINALIZERS = ["pepr.dev/finalizer"];

/**
 * Applies one action. Creating what exists (409) and deleting what is gone (404) count as done,
 * so an action replayed after a restart is harmless; such an action resolves to false (it found
 * its work done: whoever decided on it read an outdated state), the others to true. A create
 * refused because the namespace is being deleted throws {@link NamespaceTerminatingError}. Other
 * errors a retry cannot fix become {@link PermanentError}s; the rest are thrown as they are, for
 * the queue to retry. `createdPods` (name to uid) collects the Pods created, for a later
 * `addPodOwner` of the same plan.
 */
export async function applyAction(
  namespace: string,
  boxName: string,
  a: BoxAction,
  createdPods = new Map<string, string>(),
): Promise<boolean> {
  try {
    if (!(await apply(namespace, boxName, a, createdPods))) return false;
  } catch (e) {
    const s = statusOf(e);
    if ((a.type === "createPVC" || a.type === "createPod") && s === 409) return false;
    // The PVC's owners are no longer as observed (a box took it over): nothing to add.
    if (a.type === "addPodOwner" && (s === 422 || s === 404)) return false;
    if (s === 404 && a.type !== "createPVC" && a.type !== "createPod") return false;
    if (isNamespaceTerminating(e)) throw new NamespaceTerminatingError(describeError(e));
    if (!isRetryable(e)) throw new PermanentError(`${a.type} failed: ${describeError(e)}`);
    throw e;
  }
  await failpoint(a.type);
  return true;
}

/** Applies one action; false when it had nothing to act on (a Pod owner with no uid known). */
async function apply(
  namespace: string,
  boxName: string,
  a: BoxAction,
  createdPods: Map<string, string>,
): Promise<boolean> {
  switch (a.type) {
    case "createPVC":
      await createObject(paths.pvcs(namespace), a.pvc);
      return true;
    case "createPod": {
      const pod = await createObject(paths.pods(namespace), a.pod);
      createdPods.set(a.pod.metadata!.name!, pod.metadata!.uid!);
      return true;
    }
    case "addPodOwner": {
      const uid = a.podUid ?? createdPods.get(a.pod);
      if (!uid) return false;
      await jsonPatch(paths.pvcs(namespace, a.name), [
        { op: "test", path: "/metadata/ownerReferences", value: a.owners },
        {
          op: "add",
          path: "/metadata/ownerReferences",
          value: [...a.owners, podOwnerRef(a.pod, uid)],
        },
      ]);
      return true;
    }
    case "deletePod":
      await deleteObject(paths.pods(namespace, a.name), a.resourceVersion);
      return true;
    case "deletePVC":
      await deleteObject(paths.pvcs(namespace, a.name));
      return true;
    case "adoptPVC":
      await takeOverPVC(namespace, a.name, a.owner, boxName);
      return true;
    case "orphanPVC":
      await patchPVC(namespace, a.name, { metadata: { ownerReferences: null } });
      return true;
  }
}

/**
 * Makes a box the owner of a PVC (re-attached volumes, a claimed standby's): its ownerReference,
 * its box label, no pool label. A merge patch, so that it holds whatever the PVC had before and
 * a replay is harmless.
 */
export function takeOverPVC(namespace: string, name: string, owner: Owner, boxName: string) {
  return patchPVC(namespace, name, {
    metadata: { labels: { [LABEL_BOX]: boxName, [LABEL_POOL]: null }, ownerReferences: [owner] },
  });
}

const patchPVC = (namespace: string, name: string, patch: object) =>
  mergePatch(paths.pvcs(namespace, name), patch);

/**
 * Writes an object's status when it differs from the stored one (`before`). A merge patch keeps
 * fields it does not mention, so fields that must go (the Pod IP of a paused box) are sent as
 * null. Returns the new resourceVersion, or undefined when nothing was written.
 */
export async function writeStatusAt(
  path: string,
  before: object,
  status: object,
): Promise<string | undefined> {
  if (sameJSON(before, status)) return undefined;
  const patch: Record<string, unknown> = { ...status };
  for (const k of Object.keys(before)) if (!(k in status)) patch[k] = null;
  const updated = await mergePatchStatus<{ metadata?: { resourceVersion?: string } }>(path, patch);
  return updated.metadata?.resourceVersion;
}

/** Writes the box's status when it changed (see {@link writeStatusAt}). */
export const writeStatus = (box: PodBox, status: PodBoxStatus) =>
  writeStatusAt(
    paths.podBoxes(box.metadata!.namespace!, box.metadata!.name!),
    box.status ?? {},
    status,
  );

/** True when the box carries the cleanup finalizer (or is being deleted: none may be added). */
export const hasFinalizer = (box: PodBox) =>
  Boolean(box.metadata?.deletionTimestamp) || (box.metadata?.finalizers ?? []).includes(FINALIZER);

/**
 * Adds the cleanup finalizer. A server-side apply of that one list entry: `finalizers` is a set,
 * so the API server merges it with everyone else's, with no read and no conflict to retry.
 * Returns the box's new resourceVersion.
 */
export async function addFinalizer(box: PodBox): Promise<string | undefined> {
  const { namespace, name } = box.metadata!;
  const updated = await kubeRequest<PodBox>(
    "PATCH",
    `${paths.podBoxes(namespace!, name!)}?fieldManager=cubepod`,
    { apiVersion: API_VERSION, kind: "PodBox", metadata: { name, finalizers: [FINALIZER] } },
    "application/apply-patch+yaml",
  );
  return updated.metadata?.resourceVersion;
}

/** Removes the finalizer, guarded by a test of the list read, so a concurrent change is not lost. */
export async function removeFinalizer(box: PodBox): Promise<void> {
  const finalizers = box.metadata?.finalizers ?? [];
  const ours = [FINALIZER, ...LEGACY_FINALIZERS];
  if (!finalizers.some(f => ours.includes(f))) return;
  await jsonPatch(paths.podBoxes(box.metadata!.namespace!, box.metadata!.name!), [
    { op: "test", path: "/metadata/finalizers", value: finalizers },
    {
      op: "replace",
      path: "/metadata/finalizers",
      value: finalizers.filter(f => !ours.includes(f)),
    },
  ]);
}

/** When the last warm claim started: Events and claims' finishes wait until claims are quiet. */
export const claimClock = new ClaimClock();

/** An Event to create: the events collection it goes to, and the Event. */
type PendingEvent = { path: string; event: object };

/** Box Events, written once warm claims are quiet ({@link QuietSink}). */
const boxEvents = new QuietSink<PendingEvent>(
  ({ path, event }) => createObject(path, event).then(() => undefined),
  {
    quietMs: Number(process.env.CUBEPOD_EVENT_QUIET_MS ?? 100),
    maxDelayMs: Number(process.env.CUBEPOD_EVENT_MAX_DELAY_MS ?? 5000),
    concurrency: 4,
    capacity: 5000,
    onDropped: count => Log.warn({ count }, "Events dropped: too many were waiting to be written"),
  },
  claimClock,
);

/**
 * Records a Kubernetes Event on the box. It is stamped now and written once warm claims are
 * quiet; a lost event never fails the reconcile (the status carries the same information).
 */
export function recordEvent(box: PodBox, e: BoxEvent): void {
  const { namespace, name, uid } = box.metadata!;
  const now = new Date().toISOString();
  boxEvents.record({
    path: paths.events(namespace!),
    event: {
      metadata: { namespace, generateName: `${name}.` },
      involvedObject: { apiVersion: API_VERSION, kind: "PodBox", name, namespace, uid },
      type: e.type,
      reason: e.reason,
      message: e.message,
      firstTimestamp: now,
      lastTimestamp: now,
      count: 1,
      source: { component: "cubepod" },
      reportingComponent: "cubepod",
      reportingInstance: hostname(),
    },
  });
}

/** Deep equality of two JSON values, ignoring key order. */
export function sameJSON(a: unknown, b: unknown): boolean {
  return JSON.stringify(sortKeys(a)) === JSON.stringify(sortKeys(b));
}

function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === "object") {
    return Object.fromEntries(
      Object.keys(v as object)
        .sort()
        .map(k => [k, sortKeys((v as Record<string, unknown>)[k])]),
    );
  }
  return v;
}
