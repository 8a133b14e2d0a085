import { hostname } from "node:os";
import { K8s, kind, sdk } from "pepr";
import type { PodBoxStatus } from "../api/podbox";
import { PodBox } from "../api/kinds";
import { LABEL_BOX, LABEL_POOL } from "../manifests/labels";
import type { BoxAction, BoxEvent } from "./box-types";
import { isRetryable, PermanentError, statusOf } from "./errors";
import { kubeRequest, mergePatchStatus } from "./fast-client";
import type { Owner } from "../manifests/types";
import { failpoint } from "./failpoint";

/** The finalizer Pepr's Finalize binding adds at admission; the reconciler removes it. */
export const FINALIZER = "pepr.dev/finalizer";

/**
 * Applies one action. Creating what exists (409) and deleting what is gone (404) count as done,
 * so an action replayed after a restart is harmless. Errors a retry cannot fix become
 * {@link PermanentError}s; the others are thrown as they are, for the queue to retry.
 */
export async function applyAction(namespace: string, boxName: string, a: BoxAction): Promise<void> {
  try {
    await apply(namespace, boxName, a);
  } catch (e) {
    const s = statusOf(e);
    if ((a.type === "createPVC" || a.type === "createPod") && s === 409) return;
    if (s === 404 && a.type !== "createPVC" && a.type !== "createPod") return;
    if (!isRetryable(e)) throw new PermanentError(`${a.type} failed: HTTP ${s}`);
    throw e;
  }
  await failpoint(a.type);
}

async function apply(namespace: string, boxName: string, a: BoxAction): Promise<void> {
  switch (a.type) {
    case "createPVC":
      await K8s(kind.PersistentVolumeClaim).Create(a.pvc as kind.PersistentVolumeClaim);
      return;
    case "createPod":
      await K8s(kind.Pod).Create(a.pod as kind.Pod);
      return;
    case "deletePod":
      await K8s(kind.Pod).InNamespace(namespace).Delete(a.name);
      return;
    case "deletePVC":
      await K8s(kind.PersistentVolumeClaim).InNamespace(namespace).Delete(a.name);
      return;
    case "adoptPVC":
      await takeOverPVC(namespace, a.name, a.owner, boxName);
      return;
    case "orphanPVC":
      await patchPVC(namespace, a.name, { metadata: { ownerReferences: null } });
      return;
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
  kubeRequest(
    "PATCH",
    `/api/v1/namespaces/${namespace}/persistentvolumeclaims/${name}`,
    patch,
    "application/merge-patch+json",
  );

/**
 * Writes the box's status when it differs from the stored one. A merge patch keeps fields it
 * does not mention, so fields that must go (the Pod IP of a paused box) are sent as null.
 * Returns the new resourceVersion, or undefined when nothing was written.
 */
export async function writeStatus(box: PodBox, status: PodBoxStatus): Promise<string | undefined> {
  const before = (box.status ?? {}) as Record<string, unknown>;
  if (sameJSON(before, status)) return undefined;
  const patch: Record<string, unknown> = { ...status };
  for (const k of Object.keys(before)) if (!(k in status)) patch[k] = null;
  const path = `/apis/pod.cubeplex.ai/v1alpha1/namespaces/${box.metadata!.namespace}/podboxes/${box.metadata!.name}`;
  const updated = await mergePatchStatus<PodBox>(path, patch);
  return updated.metadata?.resourceVersion;
}

/** Removes the finalizer, guarded by a test of the list read, so a concurrent change is not lost. */
export async function removeFinalizer(box: PodBox): Promise<void> {
  const finalizers = box.metadata?.finalizers ?? [];
  if (!finalizers.includes(FINALIZER)) return;
  await K8s(PodBox, { namespace: box.metadata!.namespace, name: box.metadata!.name }).Patch([
    { op: "test", path: "/metadata/finalizers", value: finalizers },
    { op: "replace", path: "/metadata/finalizers", value: finalizers.filter(f => f !== FINALIZER) },
  ]);
}

/** Records a Kubernetes Event on the box; a lost event must not fail the reconcile. */
export async function recordEvent(box: PodBox, e: BoxEvent): Promise<void> {
  try {
    await sdk.writeEvent(
      box,
      { message: e.message },
      {
        eventType: e.type,
        eventReason: e.reason,
        reportingComponent: "cubepod",
        reportingInstance: hostname(),
      },
    );
  } catch {
    // Events are best effort: the status carries the same information.
  }
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
