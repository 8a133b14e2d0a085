import { GROUP } from "../api/common";

/** Labels and annotations CubePod puts on the objects it manages. */
export const LABEL_BOX = `${GROUP}/box`;
export const LABEL_TEMPLATE = `${GROUP}/template`;
export const LABEL_POOL = `${GROUP}/pool`;
export const LABEL_VOLUME = `${GROUP}/volume`;
export const LABEL_VOLUME_KEY = `${GROUP}/volume-key`;
export const LABEL_ROOTFS_GENERATION = `${GROUP}/rootfs-generation`;
/**
 * On a sandbox Pod (and a standby's PVCs): the hash of the template spec it was built from. A
 * standby whose hash is not its template's is stale; the mutate webhook injects a cached spec
 * with the Pod's hash without reading the template.
 */
export const LABEL_TEMPLATE_HASH = `${GROUP}/template-hash`;
/**
 * On a PVC the operator kept when its box went (`volumeReclaimPolicy: Retain`): the name of that
 * box. Only such PVCs are re-attached by a later box with their volume key.
 */
export const LABEL_RETAINED = `${GROUP}/retained`;
export const LABEL_MANAGED_BY = "app.kubernetes.io/managed-by";
export const MANAGED_BY = "cubepod";
/** On a PVC created by the Copy fork strategy: the parent PVC whose data is to be copied in. */
export const ANNOTATION_COPY_FROM = `${GROUP}/copy-from`;
/**
 * On such a PVC once its copy Pod succeeded: the data is all there. The box's Pod is created only
 * after both of its volumes carry it.
 */
export const ANNOTATION_COPIED = `${GROUP}/copied`;
/** On a box's Pod that is not its sandbox: `copy`, the Pod that copies a fork's volumes. */
export const LABEL_POD_ROLE = `${GROUP}/pod-role`;
/** On a Pod: set by the mutate webhook once the runtime was injected. */
export const ANNOTATION_INJECTED = `${GROUP}/injected`;
/**
 * On a sandbox Pod whose podd runs from its rootfs volume (Filesystem mode): the podd injector
 * image that podd came from, set by the mutate webhook. The box records it in its status.
 */
export const ANNOTATION_PODD_IMAGE = `${GROUP}/podd-image`;
/**
 * On a sandbox Pod built for a rootfs volume an earlier Pod filled and left podd on: the hash of
 * that podd's injector image ({@link poddImageHash}). When it is the template's, the mutate
 * webhook adds no init container to bring podd or fill the volume. On a rootfs PVC cloned from
 * its template's seed: the podd that the seed holds.
 */
export const LABEL_ROOTFS_PODD = `${GROUP}/rootfs-podd`;

/**
 * On a template's seed PVC and the Pod that fills it (`rootfs.seed`): the template's name, and
 * the key of the spec fields the fill depends on ({@link seedKey}). A seed is cloned only once
 * it carries {@link LABEL_SEED_FILLED}.
 */
export const LABEL_SEED_OF = `${GROUP}/seed-of`;
export const LABEL_SEED = `${GROUP}/seed`;
export const LABEL_SEED_FILLED = `${GROUP}/seed-filled`;

/**
 * On a sandbox Pod whose box says `egress: None`: the template's egress policy does not select
 * it, so it reaches nothing.
 */
export const LABEL_EGRESS = `${GROUP}/egress`;
export const EGRESS_NONE = "none";
/** The gateway's Pods: the only ones sandboxes take traffic from (build/gateway-deployment.ts). */
export const GATEWAY_POD_LABELS = {
  "app.kubernetes.io/name": "cubepod",
  "app.kubernetes.io/component": "gateway",
};

export type VolumeRole = "rootfs" | "workspace";

/** The labels of a box's volume, as a PVC or a VolumeSnapshot of it: whose, of what, which. */
export function volumeLabels(boxName: string, templateName: string, role: VolumeRole) {
  return {
    [LABEL_MANAGED_BY]: MANAGED_BY,
    [LABEL_BOX]: boxName,
    [LABEL_TEMPLATE]: templateName,
    [LABEL_VOLUME]: role,
  };
}

/**
 * The finalizer that holds a deleted box until its Pod is gone and its volumes are deleted or
 * orphaned. The reconciler adds it itself before it creates anything for the box (a claim, right
 * after the box status): Pepr's `Finalize` would add it through a mutating webhook, one more
 * webhook call on every create and update of a box.
 */
export const FINALIZER = `${GROUP}/cleanup`;

/**
 * On every namespaced object a sharded watcher reads (CubePod's kinds, stamped at admission; the
 * Pods, PVCs and NetworkPolicies the operator creates, stamped by its client): the shard of its
 * namespace, as `<index>-of-<count>`. Each replica watches only the shards it holds; the count is
 * in the value so that a change of it shows which objects still carry the old split.
 */
export const LABEL_SHARD = `${GROUP}/shard`;
