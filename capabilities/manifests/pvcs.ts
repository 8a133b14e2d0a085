import type { V1PersistentVolumeClaim } from "@kubernetes/client-node";
import {
  ANNOTATION_COPY_FROM,
  LABEL_BOX,
  LABEL_MANAGED_BY,
  LABEL_ROOTFS_GENERATION,
  LABEL_ROOTFS_PODD,
  LABEL_TEMPLATE,
  LABEL_VOLUME,
  LABEL_VOLUME_KEY,
  MANAGED_BY,
  VolumeRole,
} from "./labels";
import { rootfsPVCName, workspacePVCName } from "./names";
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
  const seed = input.forkFrom ? undefined : input.template.seed;
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
      input.forkFrom?.rootfsPVCName ?? seed?.pvcName,
    ),
    workspace: buildPVC(
      input,
      "workspace",
      workspacePVCName(key),
      tpl.workspace.size,
      {},
      input.forkFrom?.workspacePVCName,
    ),
  };
}

function buildPVC(
  input: BoxVolumesInput,
  role: VolumeRole,
  name: string,
  size: string,
  extraLabels: Record<string, string>,
  parentPVC: string | undefined,
): V1PersistentVolumeClaim {
  const tpl = input.template.spec;
  const copy =
    input.forkFrom !== undefined && parentPVC !== undefined && tpl.forkStrategy === "Copy";
  const pvc: V1PersistentVolumeClaim = {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: {
      name,
      namespace: input.namespace,
      labels: {
        [LABEL_MANAGED_BY]: MANAGED_BY,
        [LABEL_BOX]: input.boxName,
        [LABEL_TEMPLATE]: input.template.name,
        [LABEL_VOLUME]: role,
        [LABEL_VOLUME_KEY]: input.volumeKey ?? input.boxName,
        ...extraLabels,
      },
      ...(copy ? { annotations: { [ANNOTATION_COPY_FROM]: parentPVC } } : {}),
      ...(input.owner ? { ownerReferences: [input.owner] } : {}),
    },
    spec: {
      accessModes: ["ReadWriteOnce"],
      volumeMode: tpl.volumeMode,
      resources: { requests: { storage: size } },
      ...(tpl.storageClassName ? { storageClassName: tpl.storageClassName } : {}),
      // A clone must use the same class, mode and size as its source: a parent and a seed have
      // them by construction.
      ...(parentPVC !== undefined && !copy
        ? { dataSource: { kind: "PersistentVolumeClaim", name: parentPVC } }
        : {}),
    },
  };
  return pvc;
}
