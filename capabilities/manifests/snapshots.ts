import { ANNOTATION_PODD_IMAGE, VolumeRole, volumeLabels } from "./labels";
import { rootfsSnapshotName, workspaceSnapshotName } from "./names";
import { Owner, TemplateRef } from "./types";

/** The API group of CSI volume snapshots (the external-snapshotter's CRDs). */
export const SNAPSHOT_GROUP = "snapshot.storage.k8s.io";

/** A VolumeSnapshot, as far as CubePod writes and reads one. */
export type VolumeSnapshot = {
  apiVersion: string;
  kind: "VolumeSnapshot";
  metadata: {
    name: string;
    namespace?: string;
    uid?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: Owner[];
    deletionTimestamp?: string | Date;
  };
  spec: { volumeSnapshotClassName?: string; source: { persistentVolumeClaimName?: string } };
  status?: {
    readyToUse?: boolean;
    creationTime?: string;
    restoreSize?: string;
    error?: { message?: string; time?: string };
    boundVolumeSnapshotContentName?: string;
  };
};

/** Input of {@link buildBoxSnapshots}. */
export type BoxSnapshotsInput = {
  namespace: string;
  boxName: string;
  template: TemplateRef;
  /** The parent's volumes: its current rootfs, its workspace, and the podd its rootfs holds. */
  source: { rootfsPVCName: string; workspacePVCName: string; rootfsPoddImage?: string };
  owner: Owner;
};

/**
 * The two VolumeSnapshots a paused fork takes of its parent's volumes, of the template's class.
 * Pure: the same input gives the same manifests, so a second create is a harmless 409. The rootfs
 * snapshot says which podd it holds, so that a Pod restored from it needs no init container even
 * once the parent is gone.
 */
export function buildBoxSnapshots(input: BoxSnapshotsInput): {
  rootfs: VolumeSnapshot;
  workspace: VolumeSnapshot;
} {
  const one = (
    role: VolumeRole,
    name: string,
    pvc: string,
    annotations?: Record<string, string>,
  ) => ({
    apiVersion: `${SNAPSHOT_GROUP}/v1`,
    kind: "VolumeSnapshot" as const,
    metadata: {
      name,
      namespace: input.namespace,
      labels: volumeLabels(input.boxName, input.template.name, role),
      ...(annotations ? { annotations } : {}),
      ownerReferences: [input.owner],
    },
    spec: {
      volumeSnapshotClassName: input.template.spec.volumeSnapshotClassName,
      source: { persistentVolumeClaimName: pvc },
    },
  });
  const podd = input.source.rootfsPoddImage;
  return {
    rootfs: one(
      "rootfs",
      rootfsSnapshotName(input.boxName),
      input.source.rootfsPVCName,
      podd ? { [ANNOTATION_PODD_IMAGE]: podd } : undefined,
    ),
    workspace: one(
      "workspace",
      workspaceSnapshotName(input.boxName),
      input.source.workspacePVCName,
    ),
  };
}
