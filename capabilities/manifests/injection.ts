import type {
  V1Container,
  V1EnvVar,
  V1Pod,
  V1Volume,
  V1VolumeMount,
} from "@kubernetes/client-node";
import type { PodTemplateSpec } from "../api/podtemplate";
import { ANNOTATION_INJECTED, LABEL_BOX } from "./labels";
import { mtlsSecretName } from "./names";
import { PODD_BIN_DIR, SANDBOX_CONTAINER } from "./pod";

export const INSTALLER_CONTAINER = "podd-installer";
export const EGRESS_CONTAINER = "egress";
export const BIN_VOLUME = "cubepod-bin";
export const MTLS_VOLUME = "cubepod-mtls";
export const EGRESS_SECRET_VOLUME = "cubepod-egress";
/** Where the installer sees the shared emptyDir (its own /opt/cubepod/bin holds the sources). */
const INSTALLER_TARGET = "/cubepod-bin";
export const EGRESS_SECRET_MOUNT = "/etc/cubepod/egress";

/**
 * Injects the CubePod runtime into a sandbox Pod, given its PodTemplate: the podd-installer init
 * container copying podd-init and podd into an emptyDir mounted at /opt/cubepod/bin, the egress
 * sidecar when enabled, and the per-pod mTLS Secret. Returns a new Pod; the input is not changed.
 *
 * Idempotent: every injected item is upserted by name, so injecting twice equals injecting once,
 * and a Pod declared in Git with some of these items already present ends up the same as one
 * built by the operator.
 *
 * Throws for a template with mTLS and a Pod whose name is not known yet (`generateName`, as every
 * Deployment's and Job's Pods): its Secret is named after the Pod, and all such Pods would share
 * one Secret whose name is not even valid.
 */
export function injectRuntime(pod: V1Pod, tpl: PodTemplateSpec): V1Pod {
  const out: V1Pod = structuredClone(pod);
  const spec = (out.spec ??= { containers: [] });
  const podName = out.metadata?.labels?.[LABEL_BOX] ?? out.metadata?.name ?? "";

  const volumes: V1Volume[] = [{ name: BIN_VOLUME, emptyDir: {} }];
  const mainMounts: V1VolumeMount[] = [
    { name: BIN_VOLUME, mountPath: PODD_BIN_DIR, readOnly: true },
  ];
  const mainEnv: V1EnvVar[] = [];

  if (tpl.mtls?.enabled) {
    if (!podName) {
      throw new Error(
        `the PodTemplate has mTLS enabled, which mounts the Secret "${tpl.mtls.secretPrefix}-<Pod name>", ` +
          "and this Pod has no name yet (generateName): give it a name, or use a template without mTLS",
      );
    }
    volumes.push({
      name: MTLS_VOLUME,
      secret: { secretName: mtlsSecretName(tpl.mtls.secretPrefix, podName), defaultMode: 0o400 },
    });
    mainMounts.push({ name: MTLS_VOLUME, mountPath: tpl.mtls.mountPath, readOnly: true });
    mainEnv.push({ name: "CUBEPOD_MTLS_DIR", value: tpl.mtls.mountPath });
  }

  const egress = tpl.egress?.enabled ? tpl.egress : undefined;
  if (egress) {
    const proxy = `http://127.0.0.1:${egress.port}`;
    mainEnv.push(
      { name: "HTTP_PROXY", value: proxy },
      { name: "HTTPS_PROXY", value: proxy },
      { name: "NO_PROXY", value: "127.0.0.1,localhost" },
    );
    if (egress.secretName) {
      volumes.push({
        name: EGRESS_SECRET_VOLUME,
        secret: { secretName: egress.secretName, defaultMode: 0o400 },
      });
    }
  }

  spec.volumes = upsertAll(spec.volumes ?? [], volumes);
  spec.initContainers = upsertAll(spec.initContainers ?? [], [
    {
      name: INSTALLER_CONTAINER,
      image: tpl.poddInjectorImage,
      command: ["cp", `${PODD_BIN_DIR}/podd-init`, `${PODD_BIN_DIR}/podd`, `${INSTALLER_TARGET}/`],
      volumeMounts: [{ name: BIN_VOLUME, mountPath: INSTALLER_TARGET }],
    },
  ]);

  const main = spec.containers.find(c => c.name === SANDBOX_CONTAINER) ?? spec.containers[0];
  if (main) {
    main.volumeMounts = upsertAll(main.volumeMounts ?? [], mainMounts);
    main.env = upsertAll(main.env ?? [], mainEnv);
  }

  if (egress) {
    spec.containers = upsertAll(spec.containers, [egressSidecar(egress)]);
  }

  out.metadata = out.metadata ?? {};
  out.metadata.annotations = { ...out.metadata.annotations, [ANNOTATION_INJECTED]: "true" };
  return out;
}

function egressSidecar(egress: NonNullable<PodTemplateSpec["egress"]>): V1Container {
  return {
    name: EGRESS_CONTAINER,
    // Validation guarantees an image whenever egress is enabled.
    image: egress.image ?? "",
    ports: [{ name: "egress", containerPort: egress.port, protocol: "TCP" }],
    env: [
      { name: "CUBEPOD_EGRESS_PORT", value: String(egress.port) },
      { name: "CUBEPOD_EGRESS_ALLOW_HOSTS", value: (egress.allowHosts ?? []).join(",") },
      ...(egress.secretName
        ? [{ name: "CUBEPOD_EGRESS_SECRET_DIR", value: EGRESS_SECRET_MOUNT }]
        : []),
    ],
    ...(egress.secretName
      ? {
          volumeMounts: [
            { name: EGRESS_SECRET_VOLUME, mountPath: EGRESS_SECRET_MOUNT, readOnly: true },
          ],
        }
      : {}),
  };
}

/** Replaces items with the same name in place, appends the others; keeps the list's order. */
function upsertAll<T extends { name: string }>(list: T[], items: T[]): T[] {
  const out = [...list];
  for (const item of items) {
    const i = out.findIndex(x => x.name === item.name);
    if (i >= 0) out[i] = item;
    else out.push(item);
  }
  return out;
}
