import { z } from "zod";
import { checkEgressRules, EGRESS_RULES_CEL, egressRulesFields } from "./egress-rules";
import {
  cidr,
  conditionSchema,
  DEFAULT_ENVD_PORT,
  DEFAULT_SANDBOX_USER,
  envVarSchema,
  image,
  objectName,
  resourcesSchema,
  volumeSize as size,
} from "./common";
import { KindDescriptor } from "./descriptor";
import { poddInjectorImage } from "./podd-injector";

/** Default sizes of a sandbox's two volumes. */
export const DEFAULT_ROOTFS_SIZE = "10Gi";
export const DEFAULT_WORKSPACE_SIZE = "20Gi";

const volumeSize = (dflt: string) => z.object({ size: size().default(dflt) });

/**
 * The image's top-level directories that live on the rootfs volume: what a sandbox writes under
 * them survives a pause and goes with a fork. The kernel's filesystems and the workspace cannot
 * be among them; a merged-/usr image's /bin, /lib and /sbin are links into /usr, which is.
 */
export const DEFAULT_ROOTFS_PATHS = ["etc", "home", "opt", "root", "srv", "tmp", "usr", "var"];
const NOT_ON_ROOTFS = ["dev", "proc", "sys", "workspace"];

const rootfsPath = z
  .string()
  .regex(/^[^/]{1,255}$/, { error: "must be one top-level directory name such as usr" })
  .refine(p => p !== "." && p !== ".." && !p.includes("\0"), {
    error: "must be one top-level directory name",
  })
  .refine(p => !NOT_ON_ROOTFS.includes(p), {
    error: `must not be ${NOT_ON_ROOTFS.join(", ")}: the runtime and CubePod mount those`,
  })
  .refine(p => !p.startsWith(".cubepod"), {
    error: "must not start with .cubepod: CubePod keeps its own files on the volume there",
  });

const rootfsSchema = z.object({
  size: size().default(DEFAULT_ROOTFS_SIZE),
  paths: z
    .array(rootfsPath)
    .min(1, { error: "must name at least one directory" })
    .max(32)
    .refine(ps => new Set(ps).size === ps.length, { error: "must not name a directory twice" })
    .default(DEFAULT_ROOTFS_PATHS)
    .meta({
      description:
        "Filesystem mode: the image's top-level directories copied onto the rootfs volume at its first start and mounted from it, so that what the sandbox writes there is kept.",
    }),
  seed: z.boolean().optional().meta({
    description:
      "Filesystem mode: keep one rootfs volume filled from the image (a seed PVC per template version) and clone it (PVC dataSource) for every new rootfs (a box's first start, a standby, a reset), so that their Pods start with no init container. Needs a StorageClass that clones; costs one rootfs volume per template.",
  }),
});

export const egressSchema = z
  .object({
    enabled: z.boolean().default(false),
    image: image().optional().meta({
      description:
        "Egress proxy sidecar image; unset: CubePod's own (cubepod-egress, from the podd injector image). Its sockets must carry CUBEPOD_EGRESS_MARK to get out.",
    }),
    allowHosts: z
      .array(z.string().min(1, { error: "must not be empty" }))
      .optional()
      .meta({ description: "Hosts (or *.suffix patterns) the sandbox may reach." }),
    secretName: objectName("Secret")
      .optional()
      .meta({ description: "Secret with the proxy's upstream credentials, mounted read-only." }),
    port: z.int().min(1).max(65535).default(15001),
  })
  .meta({
    description:
      "The egress sidecar: the only way out of the Pod; the sandbox container's own traffic is refused.",
  });

export const networkSchema = z
  .object({
    egress: z.enum(["Internet", "None"]).default("Internet").meta({
      description:
        "What the sandboxes reach: Internet (the cluster's DNS and every address outside the cluster's own networks) or None (nothing).",
    }),
    egressCIDRs: z.array(cidr()).max(64).optional().meta({
      description:
        "Also reachable, whatever egress says, even inside the cluster's networks; the template's author must be allowed to create NetworkPolicies.",
    }),
    ...egressRulesFields,
  })
  .superRefine(checkEgressRules)
  .meta({
    "x-kubernetes-validations": EGRESS_RULES_CEL,
    description:
      "The sandboxes' network: they take traffic from the CubePod gateway only, and reach what this allows.",
  });

/** core/v1 Toleration. */
export const tolerationSchema = z.object({
  key: z.string().optional(),
  operator: z.enum(["Exists", "Equal"]).optional(),
  value: z.string().optional(),
  effect: z.enum(["NoSchedule", "PreferNoSchedule", "NoExecute"]).optional(),
  tolerationSeconds: z.int().optional(),
});

/**
 * Where the sandbox Pods may run, as a Pod says it: Kata sandboxes on Kata nodes, for example.
 * `affinity` is core/v1 Affinity, kept as written: the API server checks it when the template's
 * Pod is created in a dry run at admission (template-dry-run.ts).
 */
const schedulingFields = {
  nodeSelector: z
    .record(z.string().min(1), z.string())
    .optional()
    .meta({ description: "Node labels the sandbox Pods require (Pod spec.nodeSelector)." }),
  tolerations: z
    .array(tolerationSchema)
    .optional()
    .meta({ description: "Taints the sandbox Pods tolerate (Pod spec.tolerations)." }),
  affinity: z.record(z.string(), z.unknown()).optional().meta({
    description: "Pod spec.affinity (core/v1 Affinity), checked by the API server.",
    "x-kubernetes-preserve-unknown-fields": true,
  }),
  priorityClassName: objectName("PriorityClass", "cluster")
    .optional()
    .meta({ description: "PriorityClass of the sandbox Pods." }),
};

export const securitySchema = z
  .object({
    allowPrivilegeEscalation: z.boolean().default(false).meta({
      description:
        "Set-user-ID programs such as sudo may raise the sandbox user's privileges (E2B's images give their user sudo); off, the kernel refuses them (no_new_privs).",
    }),
    seccompProfile: z.enum(["RuntimeDefault", "Unconfined"]).default("RuntimeDefault").meta({
      description:
        "The sandbox Pod's seccomp profile: the runtime's default filter, or none (debuggers, strace).",
    }),
  })
  .meta({
    description:
      "How far the sandbox's own code may reach: hardened unless a field here relaxes it.",
  });

export const podTemplateSpecSchema = z.object({
  image: image().meta({ description: "The sandbox image (its root filesystem)." }),
  runtimeClassName: z
    .string()
    .max(253, { error: "must be at most 253 characters", abort: true })
    .regex(/^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)?$/, {
      error: "must be a RuntimeClass name, or empty for the cluster's default runtime",
    })
    .default("kata-qemu")
    .meta({ description: "RuntimeClass of the sandbox Pod; empty for the cluster default." }),
  volumeMode: z.enum(["Block", "Filesystem"]).default("Block"),
  storageClassName: objectName("StorageClass", "cluster").optional(),
  rootfs: rootfsSchema.default({ size: DEFAULT_ROOTFS_SIZE, paths: DEFAULT_ROOTFS_PATHS }),
  workspace: volumeSize(DEFAULT_WORKSPACE_SIZE).default({ size: DEFAULT_WORKSPACE_SIZE }),
  poddInjectorImage: image()
    .optional()
    .meta({
      description:
        "Image holding /opt/cubepod/bin/{podd-init,podd}; unset: the module's CUBEPOD_PODD_INJECTOR_IMAGE (the chart's images.registry and images.tag).",
    })
    .transform(v => v ?? poddInjectorImage()),
  envdPort: z.int().min(1).max(65535).default(DEFAULT_ENVD_PORT),
  user: z
    .string()
    .regex(/^[a-z_][a-z0-9_-]{0,31}$/, { error: "must be a POSIX user name such as user" })
    .default(DEFAULT_SANDBOX_USER)
    .meta({
      description:
        "The image's account that commands and file writes run as when a call names none (E2B's default user); it must exist in the image.",
    }),
  resources: resourcesSchema.optional(),
  env: z.array(envVarSchema).optional(),
  egress: egressSchema.optional(),
  network: networkSchema.default({ egress: "Internet" }),
  security: securitySchema.default({
    allowPrivilegeEscalation: false,
    seccompProfile: "RuntimeDefault",
  }),
  ...schedulingFields,
  forkStrategy: z
    .enum(["Clone", "Copy"])
    .default("Clone")
    .meta({
      description:
        "Clone: fork PVCs through dataSource (CSI clone). Copy: for classes without clone support, " +
        "create empty PVCs and let the operator copy the parent's data.",
    }),
  volumeSnapshotClassName: objectName("VolumeSnapshotClass", "cluster")
    .optional()
    .meta({
      description:
        "A VolumeSnapshotClass of the storage class's driver. A fork created Paused (E2B's " +
        "snapshots) then takes its parent's volumes at once as VolumeSnapshots of this class, with " +
        "no Pod, and its own forks restore from them. Unset: such a fork takes its volumes when it " +
        "first runs.",
    }),
});

export const podTemplateStatusSchema = z.object({
  observedGeneration: z.int().min(0).optional(),
  conditions: z.array(conditionSchema).optional(),
});

/** PodTemplate spec after defaults (what the API server stores). */
export type PodTemplateSpec = z.output<typeof podTemplateSpecSchema>;
export type PodTemplateStatus = z.output<typeof podTemplateStatusSchema>;

export const podTemplateDescriptor: KindDescriptor = {
  kind: "PodTemplate",
  plural: "podtemplates",
  singular: "podtemplate",
  shortNames: ["ptpl"],
  description: "A sandbox blueprint: image, runtime class, storage, network and egress.",
  spec: podTemplateSpecSchema,
  status: podTemplateStatusSchema,
  printerColumns: [
    { name: "Image", type: "string", jsonPath: ".spec.image" },
    { name: "Runtime", type: "string", jsonPath: ".spec.runtimeClassName" },
    { name: "Volumes", type: "string", jsonPath: ".spec.volumeMode" },
    { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
  ],
};
