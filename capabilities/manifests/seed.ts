import type { V1PersistentVolumeClaim, V1Pod } from "@kubernetes/client-node";
import type { PodTemplateSpec } from "../api/podtemplate";
import { BIN_VOLUME, installer, ROOTFS_FILL_CONTAINER, rootfsFill } from "./injection";
import { LABEL_MANAGED_BY, LABEL_SEED, LABEL_SEED_OF, MANAGED_BY } from "./labels";
import { placementOf, ROOTFS_VOLUME } from "./pod";
import { stableHash } from "./template-hash";
import type { Owner } from "./types";

/**
 * Whether a template keeps a seed: asked for, and in Filesystem mode (a Block device is formatted
 * and filled by podd-init inside the VM; admission refuses the pair). Asking says the class
 * clones a PVC named as `dataSource`, which a seed needs even where forks copy: a seed has no Pod
 * writing to it while it is cloned.
 */
export const seedsRootfs = (spec: PodTemplateSpec): boolean =>
  spec.rootfs.seed === true && spec.volumeMode === "Filesystem";

/**
 * The key of what a filled rootfs volume depends on: the image and the directories copied from
 * it, the podd copied beside them, the runtime that copies (gVisor keeps no file capabilities),
 * and what a clone must match (class and size). A template change to any of them needs a new seed.
 */
export function seedKey(spec: PodTemplateSpec): string {
  return stableHash({
    image: spec.image,
    paths: spec.rootfs.paths,
    size: spec.rootfs.size,
    storageClassName: spec.storageClassName,
    runtimeClassName: spec.runtimeClassName,
    poddInjectorImage: spec.poddInjectorImage,
  });
}

/**
 * The seed PVC's name, which its fill Pod shares: the template's (cut so that the whole stays a
 * valid name) and the key. A box's PVC names end in `-workspace` or `-rootfs-g<N>`, never so.
 */
export const seedName = (template: string, key: string) =>
  `${template.slice(0, 200).replace(/[-.]+$/, "")}-seed-${key}`;

/** Input of {@link buildSeed}. */
export type SeedInput = {
  namespace: string;
  template: string;
  spec: PodTemplateSpec;
  key: string;
  owner: Owner;
};

/**
 * Builds a template's seed: a rootfs PVC like a box's, and the Pod that fills it once, as a box's
 * first start would (podd-installer, then `podd-init fill` on the template's image, under its
 * runtime and placement). The fill is the Pod's only container, so the Pod Succeeds when the
 * volume is filled; `OnFailure`, the kubelet retries a failed fill with its back-off, and a fill
 * starts over from its staging directory.
 */
export function buildSeed(input: SeedInput): { pvc: V1PersistentVolumeClaim; pod: V1Pod } {
  const { spec } = input;
  const name = seedName(input.template, input.key);
  const metadata = {
    name,
    namespace: input.namespace,
    labels: {
      [LABEL_MANAGED_BY]: MANAGED_BY,
      [LABEL_SEED_OF]: input.template,
      [LABEL_SEED]: input.key,
    },
    ownerReferences: [input.owner],
  };
  const pvc: V1PersistentVolumeClaim = {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata,
    spec: {
      accessModes: ["ReadWriteOnce"],
      volumeMode: "Filesystem",
      resources: { requests: { storage: spec.rootfs.size } },
      ...(spec.storageClassName ? { storageClassName: spec.storageClassName } : {}),
    },
  };
  const fill = { ...rootfsFill(spec), name: ROOTFS_FILL_CONTAINER };
  const pod: V1Pod = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: structuredClone(metadata),
    spec: {
      ...(spec.runtimeClassName ? { runtimeClassName: spec.runtimeClassName } : {}),
      ...placementOf(spec),
      restartPolicy: "OnFailure",
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      terminationGracePeriodSeconds: 5,
      securityContext: { seccompProfile: { type: "RuntimeDefault" } },
      initContainers: [installer(spec, false)],
      containers: [fill],
      volumes: [
        { name: BIN_VOLUME, emptyDir: {} },
        { name: ROOTFS_VOLUME, persistentVolumeClaim: { claimName: name } },
      ],
    },
  };
  return { pvc, pod };
}
