import type {
  V1Container,
  V1EnvVar,
  V1Pod,
  V1PodSpec,
  V1SecurityContext,
  V1Volume,
  V1VolumeMount,
} from "@kubernetes/client-node";
import type { PodTemplateSpec } from "../api/podtemplate";
import { ANNOTATION_INJECTED, ANNOTATION_PODD_IMAGE, LABEL_ROOTFS_PODD } from "./labels";
import { poddImageHash } from "./template-hash";
import {
  PODD_BIN_DIR,
  ROOTFS_MOUNT,
  ROOTFS_PODD_DIR,
  ROOTFS_VOLUME,
  rootfsMounts,
  SANDBOX_CONTAINER,
} from "./pod";

export const INSTALLER_CONTAINER = "podd-installer";
export const ROOTFS_FILL_CONTAINER = "rootfs-fill";
export const EGRESS_CONTAINER = "egress";
export const EGRESS_ISOLATE_CONTAINER = "egress-isolate";
/** The mark of the sidecar's sockets, the only ones the Pod's rules let out (podd/egress). */
export const EGRESS_MARK = "0x4350";
const EGRESS_PROGRAM = `${PODD_BIN_DIR}/cubepod-egress`;
export const BIN_VOLUME = "cubepod-bin";
export const EGRESS_SECRET_VOLUME = "cubepod-egress";
/** Where the installer sees the shared emptyDir (its own /opt/cubepod/bin holds the sources). */
const INSTALLER_TARGET = "/cubepod-bin";
export const EGRESS_SECRET_MOUNT = "/etc/cubepod/egress";

/**
 * Injects the CubePod runtime into a sandbox Pod, given its PodTemplate: the podd-installer init
 * container copying podd-init and podd into an emptyDir mounted at /opt/cubepod/bin, in
 * Filesystem mode the rootfs volume as the sandbox's root ({@link rootfsFill}), what podd
 * checks the gateway's credentials against (the gateway's public key and the Pod's own UID), and
 * the egress sidecar when enabled. The sandbox container is hardened ({@link sandboxSecurity})
 * and the Pod gets the template's seccomp profile. No container keeps a service account token:
 * sandboxed code would act as the account.
 * Returns a new Pod; the input is not changed.
 *
 * Idempotent: every injected item is upserted by name, so injecting twice equals injecting once,
 * and a Pod declared in Git with some of these items already present ends up the same as one
 * built by the operator.
 *
 * In Block mode podd-init formats and mounts the devices itself ({@link blockMode}), with rights
 * the sandbox container gets only under one of `vmRuntimeClasses`, whose kernel is the VM's.
 */
export function injectRuntime(
  pod: V1Pod,
  tpl: PodTemplateSpec,
  controlPublicKey: string,
  vmRuntimeClasses: readonly string[],
): V1Pod {
  const out: V1Pod = structuredClone(pod);
  const spec = (out.spec ??= { containers: [] });

  const rootfsRoot =
    tpl.volumeMode === "Filesystem" && (spec.volumes ?? []).some(v => v.name === ROOTFS_VOLUME);
  // A volume an earlier Pod filled holds podd from the template's injector: nothing to bring.
  const prepared =
    rootfsRoot &&
    out.metadata?.labels?.[LABEL_ROOTFS_PODD] === poddImageHash(tpl.poddInjectorImage);
  const volumes: V1Volume[] = prepared ? [] : [{ name: BIN_VOLUME, emptyDir: {} }];
  // In Filesystem mode the sandbox runs podd from its rootfs volume, where the fill keeps it.
  const mainMounts: V1VolumeMount[] = rootfsRoot
    ? []
    : [{ name: BIN_VOLUME, mountPath: PODD_BIN_DIR, readOnly: true }];
  const mainEnv: V1EnvVar[] = [
    { name: "CUBEPOD_CONTROL_PUBLIC_KEY", value: controlPublicKey },
    { name: "CUBEPOD_POD_UID", valueFrom: { fieldRef: { fieldPath: "metadata.uid" } } },
  ];

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

  const block = blockMode(tpl, vmRuntimeClasses);
  // podd-init fills from them in Block mode; podd measures the sandbox's disk by them.
  if (block || rootfsRoot) mainEnv.push(...rootfsEnv(tpl));

  withoutServiceAccountToken(spec);
  spec.volumes = upsertAll(spec.volumes ?? [], volumes);
  spec.initContainers = upsertAll(spec.initContainers ?? [], [
    ...(prepared ? [] : [installer(tpl, block?.mountable ?? false)]),
    ...(rootfsRoot && !prepared ? [rootfsFill(tpl)] : []),
    ...(egress ? [egressIsolation(tpl.poddInjectorImage)] : []),
  ]);

  const main = spec.containers.find(c => c.name === SANDBOX_CONTAINER) ?? spec.containers[0];
  if (main) {
    main.volumeMounts = upsertAll(main.volumeMounts ?? [], mainMounts);
    if (rootfsRoot) {
      const poddFromVolume: V1VolumeMount = {
        name: ROOTFS_VOLUME,
        mountPath: PODD_BIN_DIR,
        subPath: ROOTFS_PODD_DIR,
        readOnly: true,
      };
      main.volumeMounts = upsertBy(
        main.volumeMounts,
        [...rootfsMounts(tpl.rootfs.paths), poddFromVolume],
        "mountPath",
      );
    }
    main.env = upsertAll(main.env ?? [], mainEnv);
    main.securityContext = sandboxSecurity(tpl, main.securityContext, block?.mountable ?? false);
  }
  spec.securityContext = {
    ...spec.securityContext,
    seccompProfile: { type: tpl.security.seccompProfile },
  };

  if (egress) {
    spec.containers = upsertAll(spec.containers, [egressSidecar(egress, tpl.poddInjectorImage)]);
  }

  out.metadata = out.metadata ?? {};
  out.metadata.annotations = {
    ...out.metadata.annotations,
    [ANNOTATION_INJECTED]: "true",
    ...(rootfsRoot ? { [ANNOTATION_PODD_IMAGE]: tpl.poddInjectorImage } : {}),
  };
  return out;
}

/** The init container that copies podd-init and podd (and mke2fs, to mount devices) in. */
export function installer(tpl: PodTemplateSpec, mountsDevices: boolean): V1Container {
  return {
    name: INSTALLER_CONTAINER,
    image: tpl.poddInjectorImage,
    command: [
      "cp",
      ...(mountsDevices ? ["-r", MKE2FS_DIR] : []),
      `${PODD_BIN_DIR}/podd-init`,
      `${PODD_BIN_DIR}/podd`,
      `${INSTALLER_TARGET}/`,
    ],
    volumeMounts: [{ name: BIN_VOLUME, mountPath: INSTALLER_TARGET }],
    // A copy into an emptyDir anyone may write to needs no capability.
    securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } },
  };
}

/**
 * What podd needs and no more, whatever the Pod declared: it runs as root to start commands as
 * the sandbox's user (SETUID, SETGID), to write files with their owner (CHOWN, FOWNER,
 * DAC_OVERRIDE, FSETID), to signal them (KILL), for sudo's audit records (AUDIT_WRITE) and
 * servers on low ports (NET_BIND_SERVICE). Not NET_RAW: with it the sandbox's code could forge
 * packets on the node's bridge or watch other Pods' traffic; nor MKNOD, SETPCAP, SETFCAP,
 * SYS_CHROOT. No privilege escalation unless the template allows it (sudo), never privileged.
 */
export const SANDBOX_CAPABILITIES = [
  "AUDIT_WRITE",
  "CHOWN",
  "DAC_OVERRIDE",
  "FOWNER",
  "FSETID",
  "KILL",
  "NET_BIND_SERVICE",
  "SETGID",
  "SETUID",
];

/**
 * What podd-init needs beyond podd in Block mode, and gives up before it becomes podd (from the
 * bounding set too, so that nothing the sandbox runs gets them back): mounting the devices
 * (SYS_ADMIN), filling the rootfs device with every file's owner, mode and capabilities
 * (DAC_READ_SEARCH, SETFCAP), and dropping capabilities (SETPCAP). Granted only under a VM
 * runtime: there the kernel they act on is the sandbox's own.
 */
export const BLOCK_CAPABILITIES = ["DAC_READ_SEARCH", "SETFCAP", "SETPCAP", "SYS_ADMIN"];

/** Where the injector image keeps mke2fs with its libraries and loader (podd-init, Block mode). */
export const MKE2FS_DIR = `${PODD_BIN_DIR}/mke2fs`;

/**
 * A Block mode template's devices, and whether podd-init may mount them: only under a
 * RuntimeClass the module is told is a VM. Elsewhere podd-init stops with a message saying so,
 * and admission refuses such templates (rules.ts).
 */
function blockMode(
  tpl: PodTemplateSpec,
  vmRuntimeClasses: readonly string[],
): { mountable: boolean } | undefined {
  if (tpl.volumeMode !== "Block") return undefined;
  return { mountable: vmRuntimeClasses.includes(tpl.runtimeClassName) };
}

/** What podd-init fills the rootfs volume with: the template's directories, from its image. */
function rootfsEnv(tpl: PodTemplateSpec): V1EnvVar[] {
  return [
    { name: "CUBEPOD_ROOTFS_DIRS", value: tpl.rootfs.paths.join(",") },
    { name: "CUBEPOD_ROOTFS_IMAGE", value: tpl.image },
  ];
}

function sandboxSecurity(
  tpl: PodTemplateSpec,
  declared: V1SecurityContext | undefined,
  mountsDevices: boolean,
): V1SecurityContext {
  const add = mountsDevices ? [...SANDBOX_CAPABILITIES, ...BLOCK_CAPABILITIES].sort() : undefined;
  return {
    ...declared,
    privileged: false,
    allowPrivilegeEscalation: tpl.security.allowPrivilegeEscalation,
    capabilities: { drop: ["ALL"], add: add ?? SANDBOX_CAPABILITIES },
    seccompProfile: { type: tpl.security.seccompProfile },
  };
}

/**
 * No token of the Pod's service account: a hand-declared sandbox Pod gets one from the API
 * server's ServiceAccount admission before any webhook sees it, so its volume (a projection
 * with a serviceAccountToken source) is removed with its mounts, and none is added again.
 */
function withoutServiceAccountToken(spec: V1PodSpec): void {
  spec.automountServiceAccountToken = false;
  const tokens = new Set(
    (spec.volumes ?? [])
      .filter(v => v.projected?.sources?.some(s => s.serviceAccountToken))
      .map(v => v.name),
  );
  if (tokens.size === 0) return;
  spec.volumes = spec.volumes!.filter(v => !tokens.has(v.name));
  for (const c of [...(spec.initContainers ?? []), ...spec.containers]) {
    if (c.volumeMounts) c.volumeMounts = c.volumeMounts.filter(m => !tokens.has(m.name));
  }
}

/**
 * The init container that fills the rootfs volume from the template's image, on that image, at
 * the first start of a volume (podd-init fill; a filled volume is kept as it is): the copies
 * the sandbox container mounts over the image's directories. It runs as root to keep every
 * file's owner, mode and capabilities, with only the rights that takes, before any sandbox code.
 */
export function rootfsFill(tpl: PodTemplateSpec): V1Container {
  return {
    name: ROOTFS_FILL_CONTAINER,
    image: tpl.image,
    command: [`${PODD_BIN_DIR}/podd-init`, "fill"],
    // Why a fill failed reaches the box's status (PodNotStarting) from its last log lines.
    terminationMessagePolicy: "FallbackToLogsOnError",
    env: rootfsEnv(tpl),
    volumeMounts: [
      { name: BIN_VOLUME, mountPath: PODD_BIN_DIR, readOnly: true },
      { name: ROOTFS_VOLUME, mountPath: ROOTFS_MOUNT },
    ],
    ...(tpl.resources ? { resources: tpl.resources } : {}),
    securityContext: {
      runAsUser: 0,
      runAsGroup: 0,
      allowPrivilegeEscalation: false,
      capabilities: {
        drop: ["ALL"],
        add: ["CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "SETFCAP"],
      },
    },
  };
}

/**
 * The init container that writes the Pod's egress rules (podd/egress): only the sidecar's marked
 * sockets leave the Pod. It alone holds CAP_NET_ADMIN, and only before the sandbox starts.
 */
function egressIsolation(injectorImage: string): V1Container {
  return {
    name: EGRESS_ISOLATE_CONTAINER,
    image: injectorImage,
    command: [EGRESS_PROGRAM, "isolate"],
    // Why the rules could not be written (a runtime without nftables) reaches the box's status.
    terminationMessagePolicy: "FallbackToLogsOnError",
    env: [{ name: "CUBEPOD_EGRESS_MARK", value: EGRESS_MARK }],
    securityContext: {
      runAsUser: 0,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ["ALL"], add: ["NET_ADMIN"] },
    },
  };
}

/**
 * The egress sidecar: the template's proxy image, or CubePod's own. CAP_NET_RAW is what lets it
 * mark its sockets (SO_MARK); it gets nothing else.
 */
function egressSidecar(
  egress: NonNullable<PodTemplateSpec["egress"]>,
  injectorImage: string,
): V1Container {
  const own = !egress.image;
  return {
    name: EGRESS_CONTAINER,
    image: egress.image ?? injectorImage,
    ...(own ? { command: [EGRESS_PROGRAM, "proxy"] } : {}),
    ports: [{ name: "egress", containerPort: egress.port, protocol: "TCP" }],
    securityContext: {
      ...(own ? { runAsUser: 0 } : {}),
      allowPrivilegeEscalation: false,
      capabilities: { drop: ["ALL"], add: ["NET_RAW"] },
    },
    env: [
      { name: "CUBEPOD_EGRESS_PORT", value: String(egress.port) },
      { name: "CUBEPOD_EGRESS_MARK", value: EGRESS_MARK },
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
  return upsertBy(list, items, "name");
}

/** Replaces items with the same key in place, appends the others; keeps the list's order. */
function upsertBy<T, K extends keyof T>(list: T[], items: T[], key: K): T[] {
  const out = [...list];
  for (const item of items) {
    const i = out.findIndex(x => x[key] === item[key]);
    if (i >= 0) out[i] = item;
    else out.push(item);
  }
  return out;
}
