import type { V1Container, V1Pod } from "@kubernetes/client-node";
import { LABEL_BOX, LABEL_MANAGED_BY, LABEL_POD_ROLE, MANAGED_BY } from "./labels";
import { placementOf, PODD_BIN_DIR, ROOTFS_VOLUME, WORKSPACE_VOLUME } from "./pod";
import { Owner, TemplateRef } from "./types";

export const COPY_ROLE = "copy";
export const COPY_CONTAINER = "copy";
/** The copy program of the podd-injector image: `podd-copy MODE SRC DST [SRC DST]...`. */
export const PODD_COPY = `${PODD_BIN_DIR}/podd-copy`;
const SOURCE_PREFIX = "source-";

/**
 * The copy Pod's name: the box's with a dot, which no box name has (they are DNS labels), so it
 * can never be another box's Pod.
 */
export const copyPodName = (boxName: string) => `${boxName}.copy`;

/** Input of {@link buildCopyPod}. */
export type CopyPodInput = {
  namespace: string;
  boxName: string;
  template: TemplateRef;
  /** The fork's own (new) PVCs, and the parent's they are copied from. */
  target: { rootfsPVCName: string; workspacePVCName: string };
  source: { rootfsPVCName: string; workspacePVCName: string };
  owner?: Owner;
};

/**
 * Builds the Pod that copies a fork's parent volumes into its own (`forkStrategy: Copy`), with
 * the podd-injector image's copy program, placed as the box's Pod will be (the volumes may be
 * local to a node). It mounts the parent's volumes read-only. `OnFailure`: the kubelet retries a
 * failed copy with its back-off, and each attempt starts from an empty target, so a Pod that
 * Succeeded copied everything. Its own volumes are named as the sandbox Pod's, so that its target
 * PVCs read as in use by the box.
 */
export function buildCopyPod(input: CopyPodInput): V1Pod {
  const tpl = input.template.spec;
  const block = tpl.volumeMode === "Block";
  const roles = [ROOTFS_VOLUME, WORKSPACE_VOLUME] as const;
  const at = (volume: string) => (block ? `/dev/cubepod-${volume}` : `/cubepod/${volume}`);
  const args: string[] = [tpl.volumeMode];
  for (const r of roles) args.push(at(SOURCE_PREFIX + r), at(r));
  const volumes = roles.flatMap(r => [SOURCE_PREFIX + r, r]);
  const readOnly = (v: string) => v.startsWith(SOURCE_PREFIX);

  const container: V1Container = {
    name: COPY_CONTAINER,
    image: tpl.poddInjectorImage,
    command: [PODD_COPY, ...args],
    ...(block
      ? { volumeDevices: volumes.map(v => ({ name: v, devicePath: at(v) })) }
      : { volumeMounts: volumes.map(v => ({ name: v, mountPath: at(v), readOnly: readOnly(v) })) }),
  };
  const claim = (v: string) => {
    const role = v.replace(SOURCE_PREFIX, "") as (typeof roles)[number];
    const of = readOnly(v) ? input.source : input.target;
    return role === ROOTFS_VOLUME ? of.rootfsPVCName : of.workspacePVCName;
  };

  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: copyPodName(input.boxName),
      namespace: input.namespace,
      labels: {
        [LABEL_MANAGED_BY]: MANAGED_BY,
        [LABEL_BOX]: input.boxName,
        [LABEL_POD_ROLE]: COPY_ROLE,
      },
      ...(input.owner ? { ownerReferences: [input.owner] } : {}),
    },
    spec: {
      ...placementOf(tpl),
      restartPolicy: "OnFailure",
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      terminationGracePeriodSeconds: 5,
      containers: [container],
      volumes: volumes.map(v => ({
        name: v,
        persistentVolumeClaim: { claimName: claim(v), ...(readOnly(v) ? { readOnly: true } : {}) },
      })),
    },
  };
}
