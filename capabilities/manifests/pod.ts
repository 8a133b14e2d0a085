import type {
  V1Container,
  V1EnvVar,
  V1Pod,
  V1PodSpec,
  V1VolumeMount,
} from "@kubernetes/client-node";
import type { PodBoxSpec } from "../api/podbox";
import {
  EGRESS_NONE,
  LABEL_BOX,
  LABEL_EGRESS,
  LABEL_MANAGED_BY,
  LABEL_ROOTFS_PODD,
  LABEL_TEMPLATE,
  LABEL_TEMPLATE_HASH,
  LABEL_VOLUME_KEY,
  MANAGED_BY,
} from "./labels";
import { ANNOTATION_EGRESS, egressAnnotation, egressRulesOf } from "../network/egress-agent";
import { poddImageHash, templateHash } from "./template-hash";
import { Owner, TemplateRef } from "./types";

/** Paths inside the sandbox container: fixed by podd-init. */
export const PODD_BIN_DIR = "/opt/cubepod/bin";
export const PODD_COMMAND = [`${PODD_BIN_DIR}/podd-init`, `${PODD_BIN_DIR}/podd`];
export const ROOTFS_DEVICE = "/dev/cubepod-rootfs";
export const WORKSPACE_DEVICE = "/dev/cubepod-workspace";
export const ROOTFS_MOUNT = "/mnt/cubepod/rootfs";
export const WORKSPACE_MOUNT = "/workspace";
export const SANDBOX_CONTAINER = "sandbox";
export const ROOTFS_VOLUME = "rootfs";
/** Where a filled rootfs volume keeps podd-init and podd (podd/rootfs PoddDir). */
export const ROOTFS_PODD_DIR = ".cubepod/bin";
export const WORKSPACE_VOLUME = "workspace";

/** Input of {@link buildBoxPod}. */
export type BoxPodInput = {
  namespace: string;
  podName: string;
  boxName: string;
  /** The volume key of its PVCs (defaults to boxName), as a label. */
  volumeKey?: string;
  template: TemplateRef;
  rootfsPVCName: string;
  workspacePVCName: string;
  /** Extra labels, e.g. the warm pool a standby belongs to. */
  labels?: Record<string, string>;
  /** Extra annotations, e.g. the egress rules its node's agent enforces. */
  annotations?: Record<string, string>;
  owner?: Owner;
  /**
   * The podd injector image whose podd the rootfs volume holds from an earlier Pod, if known:
   * the Pod is labelled with it, and needs no init container when it is the template's.
   */
  rootfsPodd?: string;
};

/**
 * Builds a sandbox Pod on the box's two PVCs. The runtime (podd-installer, egress sidecar) is not
 * part of it: the mutate webhook injects that into every Pod labelled with a template, so a Pod
 * built here and one declared by hand end up identical.
 */
export function buildBoxPod(input: BoxPodInput): V1Pod {
  const tpl = input.template.spec;
  const block = tpl.volumeMode === "Block";
  const env: V1EnvVar[] = [
    ...(tpl.env ?? []),
    { name: "CUBEPOD_VOLUME_MODE", value: tpl.volumeMode },
    { name: "CUBEPOD_ENVD_PORT", value: String(tpl.envdPort) },
  ];

  const container: V1Container = {
    name: SANDBOX_CONTAINER,
    image: tpl.image,
    command: PODD_COMMAND,
    terminationMessagePolicy: "FallbackToLogsOnError",
    ports: [{ name: "envd", containerPort: tpl.envdPort, protocol: "TCP" }],
    readinessProbe: {
      httpGet: { path: "/health", port: "envd" },
      periodSeconds: 2,
      failureThreshold: 3,
    },
    env,
    ...(tpl.resources ? { resources: tpl.resources } : {}),
    ...(block
      ? {
          volumeDevices: [
            { name: ROOTFS_VOLUME, devicePath: ROOTFS_DEVICE },
            { name: WORKSPACE_VOLUME, devicePath: WORKSPACE_DEVICE },
          ],
        }
      : {
          volumeMounts: [
            ...rootfsMounts(tpl.rootfs.paths),
            { name: WORKSPACE_VOLUME, mountPath: WORKSPACE_MOUNT },
          ],
        }),
  };

  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: input.podName,
      namespace: input.namespace,
      labels: {
        ...input.labels,
        [LABEL_MANAGED_BY]: MANAGED_BY,
        [LABEL_BOX]: input.boxName,
        [LABEL_TEMPLATE]: input.template.name,
        // Which version of the template the Pod was built from, for the webhook's cache.
        [LABEL_TEMPLATE_HASH]: templateHash(tpl),
        [LABEL_VOLUME_KEY]: input.volumeKey ?? input.boxName,
        ...(input.rootfsPodd && !block
          ? { [LABEL_ROOTFS_PODD]: poddImageHash(input.rootfsPodd) }
          : {}),
      },
      ...(input.annotations ? { annotations: input.annotations } : {}),
      ...(input.owner ? { ownerReferences: [input.owner] } : {}),
    },
    spec: {
      ...(tpl.runtimeClassName ? { runtimeClassName: tpl.runtimeClassName } : {}),
      ...placementOf(tpl),
      restartPolicy: "Always",
      // Sandboxes run untrusted agent code: no API credentials, no service discovery env.
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      terminationGracePeriodSeconds: 10,
      containers: [container],
      volumes: [
        { name: ROOTFS_VOLUME, persistentVolumeClaim: { claimName: input.rootfsPVCName } },
        { name: WORKSPACE_VOLUME, persistentVolumeClaim: { claimName: input.workspacePVCName } },
      ],
    },
  };
}

/**
 * The rootfs volume as the sandbox's root, in Filesystem mode: each of the image's top-level
 * directories the template names is mounted from its copy on the volume (podd-init fill makes
 * it, injection.ts), so that every write under them lands on the volume. The kubelet mounts
 * subpaths unprivileged under any runtime, which an overlay and pivot_root in the container
 * could not do under runc without rights that would reach the node.
 */
export function rootfsMounts(paths: string[]): V1VolumeMount[] {
  return paths.map(p => ({ name: ROOTFS_VOLUME, mountPath: `/${p}`, subPath: p }));
}

/**
 * The labels a box's own network settings put on its Pod: with `egress: None`, the one that
 * keeps its template's egress policy off it (network/decide.ts).
 */
export function egressLabels(spec: Pick<PodBoxSpec, "egress">): Record<string, string> | undefined {
  return spec.egress === "None" ? { [LABEL_EGRESS]: EGRESS_NONE } : undefined;
}

/**
 * The annotations a box's egress rules put on its Pod, for its node's egress agent
 * (network/egress-agent.ts); a standby gets its template's.
 */
export function egressAnnotations(
  spec: Pick<PodBoxSpec, "egress" | "network"> | undefined,
  tpl: TemplateRef["spec"],
): Record<string, string> | undefined {
  const rules = egressRulesOf(spec, tpl);
  return rules ? { [ANNOTATION_EGRESS]: egressAnnotation(rules) } : undefined;
}

/**
 * Where a template's Pods may run (node selector, tolerations, affinity, priority class): the
 * sandbox's and its fork's copy Pod alike, as their volumes may be local to those nodes.
 */
export function placementOf(tpl: TemplateRef["spec"]): Partial<V1PodSpec> {
  return {
    ...(tpl.nodeSelector ? { nodeSelector: tpl.nodeSelector } : {}),
    ...(tpl.tolerations ? { tolerations: tpl.tolerations } : {}),
    ...(tpl.affinity ? { affinity: tpl.affinity } : {}),
    ...(tpl.priorityClassName ? { priorityClassName: tpl.priorityClassName } : {}),
  };
}
