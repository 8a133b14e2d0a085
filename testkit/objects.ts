import { createHash } from "node:crypto";
import { validatePodTemplate } from "../capabilities/admission/rules";
import { templateHash } from "../capabilities/manifests/template-hash";
import { VM_STANDIN } from "../local-cluster/local-module-env";

/* The CubePod objects the integration tests and the benchmarks create. */

/** A PodTemplate that runs anywhere: no VM runtime, Filesystem volumes. */
export const TEMPLATE = { image: "py:3", runtimeClassName: "", volumeMode: "Filesystem" };

/** What steers a Pod to the real node (local-cluster/real-node.sh), as a cluster steers Pods to capable nodes. */
export const REAL_NODE_PLACEMENT = {
  nodeSelector: { "cubepod.dev/node": "real" },
  tolerations: [{ key: "cubepod.dev/real-node", operator: "Exists", effect: "NoSchedule" }],
};

/**
 * A PodTemplate for the real node: its images, volumes of `size` each from its CSI driver, forks
 * cloned, paused forks (E2B's snapshots) taken as its VolumeSnapshots; runc, and in Block mode
 * runc standing in for the VM that mounts the devices (runtime-class.yaml).
 */
export function realTemplate(volumeMode: "Filesystem" | "Block", size: string) {
  return {
    image: "cubepod.local/base:dev",
    poddInjectorImage: "cubepod.local/podd-injector:dev",
    runtimeClassName: volumeMode === "Block" ? VM_STANDIN : "",
    volumeMode,
    storageClassName: "cubepod-local",
    forkStrategy: "Clone",
    volumeSnapshotClassName: "cubepod-local",
    // The Debian image is E2B's kind: its user has sudo, which needs set-user-ID to work.
    security: { allowPrivilegeEscalation: true },
    rootfs: { size },
    workspace: { size },
    ...REAL_NODE_PLACEMENT,
  };
}

export function podTemplate(name: string, spec: object = TEMPLATE) {
  return { apiVersion: "pod.cubeplex.ai/v1alpha1", kind: "PodTemplate", metadata: { name }, spec };
}

/**
 * The `pod.cubeplex.ai/template-hash` label CubePod puts on a sandbox Pod built from `spec`
 * (validated, defaults applied): the version the mutate webhook may take from its cache.
 */
export function templateHashOf(spec: object): string {
  const verdict = validatePodTemplate(spec);
  if (!verdict.ok) throw new Error(verdict.errors.join("; "));
  return templateHash(verdict.spec);
}

export function podBox(name: string, spec: object) {
  return { apiVersion: "pod.cubeplex.ai/v1alpha1", kind: "PodBox", metadata: { name }, spec };
}

/** A gateway API key as its tenant stores it: a PodAPIKey holding the key's SHA-256. */
export function podAPIKey(name: string, key: string) {
  return {
    apiVersion: "pod.cubeplex.ai/v1alpha1",
    kind: "PodAPIKey",
    metadata: { name },
    spec: { sha256: createHash("sha256").update(key).digest("hex") },
  };
}
