import type { V1PersistentVolumeClaim } from "@kubernetes/client-node";
import {
  ANNOTATION_COPY_FROM,
  LABEL_ROOTFS_GENERATION,
  LABEL_ROOTFS_PODD,
  LABEL_VOLUME_KEY,
  VolumeRole,
  volumeLabels,
} from "./labels";
import { rootfsPVCName, workspacePVCName } from "./names";
import { SNAPSHOT_GROUP } from "./snapshots";
import { poddImageHash } from "./template-hash";
import { Owner, TemplateRef } from "./types";

/** Input of {@link buildBoxPVCs}. */
export type BoxVolumesInput = {
  namespace: string;
  /** The box (or warm standby) the volumes belong to. */
  boxName: string;
  /** Names the PVCs; defaults to boxName. */
  volumeKey?: string;
  template: TemplateRef;
  rootfsGeneration: number;
  /** When forking: the parent's PVCs, cloned (or copied, per the template's forkStrategy). */
  forkFrom?: { rootfsPVCName: string; workspacePVCName: string };
  /** When restoring a paused fork's volumes: its VolumeSnapshots (its own, or its parent's). */
  restoreFrom?: { rootfsSnapshotName: string; workspaceSnapshotName: string };
  owner?: Owner;
};

/**
 * Builds the rootfs and workspace PVCs of a box. Pure: the same input gives the same manifests,
 * so creating them twice is harmless (the second create is a 409). A rootfs that is not a fork's
 * is cloned from the template's filled seed when it has one, and says which podd it holds.
 */
export function buildBoxPVCs(input: BoxVolumesInput): {
  rootfs: V1PersistentVolumeClaim;
  workspace: V1PersistentVolumeClaim;
} {
  const key = input.volumeKey ?? input.boxName;
  const gen = input.rootfsGeneration;
  const tpl = input.template.spec;
  const seed = input.forkFrom || input.restoreFrom ? undefined : input.template.seed;
  const restore = input.restoreFrom;
  return {
    rootfs: buildPVC(
      input,
      "rootfs",
      rootfsPVCName(key, gen),
      tpl.rootfs.size,
      {
        [LABEL_ROOTFS_GENERATION]: String(gen),
        ...(seed ? { [LABEL_ROOTFS_PODD]: poddImageHash(tpl.poddInjectorImage) } : {}),
      },
      restore
        ? snapshotSource(restore.rootfsSnapshotName)
        : pvcSource(input.forkFrom?.rootfsPVCName ?? seed?.pvcName),
    ),
    workspace: buildPVC(
      input,
      "workspace",
      workspacePVCName(key),
      tpl.workspace.size,
      {},
      restore
        ? snapshotSource(restore.workspaceSnapshotName)
        : pvcSource(input.forkFrom?.workspacePVCName),
    ),
  };
}

/** Where a volume's data comes from: a PVC cloned (or copied), or a VolumeSnapshot restored. */
type VolumeSource = { kind: "PersistentVolumeClaim" | "VolumeSnapshot"; name: string };

const pvcSource = (name: string | undefined): VolumeSource | undefined =>
  name === undefined ? undefined : { kind: "PersistentVolumeClaim", name };

const snapshotSource = (name: string): VolumeSource => ({ kind: "VolumeSnapshot", name });

function buildPVC(
  input: BoxVolumesInput,
  role: VolumeRole,
  name: string,
  size: string,
  extraLabels: Record<string, string>,
  source: VolumeSource | undefined,
): V1PersistentVolumeClaim {
  const tpl = input.template.spec;
  const copy =
    input.forkFrom !== undefined &&
    source?.kind === "PersistentVolumeClaim" &&
    tpl.forkStrategy === "Copy";
  const pvc: V1PersistentVolumeClaim = {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: {
      name,
      namespace: input.namespace,
      labels: {
        ...volumeLabels(input.boxName, input.template.name, role),
        [LABEL_VOLUME_KEY]: input.volumeKey ?? input.boxName,
        ...extraLabels,
      },
      ...(copy ? { annotations: { [ANNOTATION_COPY_FROM]: source.name } } : {}),
      ...(input.owner ? { ownerReferences: [input.owner] } : {}),
    },
    spec: {
      accessModes: ["ReadWriteOnce"],
      volumeMode: tpl.volumeMode,
      resources: { requests: { storage: size } },
      ...(tpl.storageClassName ? { storageClassName: tpl.storageClassName } : {}),
      // A clone or a restore must use the same class and mode as its source, and at least its
      // size: a parent, a seed and a parent's snapshot have them by construction.
      ...(source?.kind === "PersistentVolumeClaim" && !copy
        ? { dataSource: { kind: source.kind, name: source.name } }
        : {}),
      ...(source?.kind === "VolumeSnapshot"
        ? { dataSource: { apiGroup: SNAPSHOT_GROUP, kind: source.kind, name: source.name } }
        : {}),
    },
  };
  return pvc;
}
