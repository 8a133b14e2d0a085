import { API_VERSION } from "../api/common";
import { LABEL_BOX } from "./labels";
import type { Owner } from "./types";

/**
 * The controller ownerReference a CubePod object puts on what it owns (GC follows it).
 *
 * A box blocks its own foreground deletion until its Pod and PVCs are gone. A pool does not:
 * its standbys change owner when a box claims them, and the garbage collector answers every
 * removed reference that blocks owner deletion with a live GET of that owner (three per claim,
 * the Pod and both PVCs), deletion or not. The standbys are still collected with the pool.
 */
function controllerRef(
  kind: "PodBox" | "PodWarmPool" | "PodTemplate",
  name: string,
  uid: string,
): Owner {
  const ref = { apiVersion: API_VERSION, kind, name, uid, controller: true };
  return kind === "PodBox" ? { ...ref, blockOwnerDeletion: true } : ref;
}

/**
 * The second owner of a pool standby's PVCs: its Pod, as a plain (not controller, not blocking)
 * reference. The garbage collector deletes an object only once every owner is gone, so a PVC of
 * a standby a box has claimed (its Pod now the box's) stays when the pool is deleted, until the
 * box takes it over; and a standby PVC still goes with its pool.
 */
export function podOwnerRef(name: string, uid: string): Owner {
  return { apiVersion: "v1", kind: "Pod", name, uid };
}

/** The controller ownerReference that ties a Pod or PVC to its box. */
export const boxOwnerRef = (name: string, uid: string): Owner => controllerRef("PodBox", name, uid);

/** The controller ownerReference that ties a standby's Pod and PVCs to its pool. */
export const poolOwnerRef = (name: string, uid: string): Owner =>
  controllerRef("PodWarmPool", name, uid);

/** The controller ownerReference that ties a template's seed PVC and its fill Pod to it. */
export const templateOwnerRef = (name: string, uid: string): Owner =>
  controllerRef("PodTemplate", name, uid);

/** True when the object's controller ownerReference names the object with this uid. */
export function isControlledBy(
  metadata: { ownerReferences?: { controller?: boolean; uid: string }[] } | undefined,
  uid: string,
): boolean {
  return (metadata?.ownerReferences ?? []).some(r => r.controller && r.uid === uid);
}

/**
 * The box a Pod belongs to: its controller when that is a PodBox (a claimed standby keeps its
 * pool's labels until the claim's finish relabels it), else its box label.
 */
export function boxOfPod(metadata: {
  labels?: Record<string, string>;
  ownerReferences?: { controller?: boolean; kind: string; name: string }[];
}): string | undefined {
  const controller = metadata.ownerReferences?.find(r => r.controller);
  if (controller) return controller.kind === "PodBox" ? controller.name : undefined;
  return metadata.labels?.[LABEL_BOX];
}
