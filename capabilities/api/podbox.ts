import { z } from "zod";
import { checkEgressRules, EGRESS_RULES_CEL, egressRulesFields } from "./egress-rules";
import { conditionSchema, dnsLabel, objectName, timestamp } from "./common";
import { KindDescriptor } from "./descriptor";

export const DESIRED_STATES = ["Running", "Paused", "Terminated"] as const;
export const PHASES = ["Pending", "Running", "Paused", "Terminated", "Failed"] as const;
/** Reasons that describe a problem rather than a transition; shown as Warning Events. */
export const PROBLEM_REASONS = [
  "TemplateNotFound",
  "WarmPoolNotFound",
  "ForkParentNotFound",
  "ForkParentNotReady",
  "ForkParentDeleting",
  "VolumesNotFound",
  "VolumesInUse",
  "PodNameInUse",
  "PodFailed",
  "PodNotStarting",
  "ForkCopyFailed",
  "SnapshotFailed",
  "EgressNotEnforced",
  "Forbidden",
  "APIError",
] as const;

/** Why a box is in its phase; `status.reason`. */
export const REASONS = [
  "Creating",
  "Started",
  "WarmPoolClaimed",
  "ForkCloned",
  "ForkCopying",
  "Snapshotting",
  "Snapshotted",
  "Paused",
  "IdlePaused",
  "Resumed",
  "RootFSReset",
  "Terminated",
  "LeaseExpired",
  "Expired",
  "Deleting",
  ...PROBLEM_REASONS,
] as const;

export type PodBoxReason = (typeof REASONS)[number];

/** Fields a box may not change once created: its volumes and lifecycle are derived from them. */
export const IMMUTABLE_BOX_FIELDS = [
  "templateRef",
  "warmPoolRef",
  "forkFrom",
  "volumeKey",
  "egress",
] as const;

const shown = (obj: string, f: string) => `(has(${obj}.${f}) ? '"' + ${obj}.${f} + '"' : 'unset')`;

/**
 * The rules of a spec change, as CEL transition rules in the CRD: the API server checks them
 * itself, with the module up or down and with no webhook call, in the webhook's words
 * (admission/rules.ts states the same rules for the module).
 */
export const BOX_UPDATE_RULES = [
  ...IMMUTABLE_BOX_FIELDS.map(f => ({
    rule: `has(self.${f}) == has(oldSelf.${f}) && (!has(self.${f}) || self.${f} == oldSelf.${f})`,
    messageExpression: `'is immutable (was ' + ${shown("oldSelf", f)} + ', got ' + ${shown("self", f)} + ')'`,
    fieldPath: `.${f}`,
    reason: "FieldValueInvalid",
  })),
  {
    rule:
      "!has(self.rootfsGeneration) || !has(oldSelf.rootfsGeneration) || " +
      "self.rootfsGeneration >= oldSelf.rootfsGeneration",
    // A static message: the API server prices an int's conversion to a string as unbounded.
    message: "may not decrease",
    fieldPath: ".rootfsGeneration",
    reason: "FieldValueInvalid",
  },
];

export const podBoxSpecSchema = z
  .object({
    templateRef: objectName("PodTemplate")
      .optional()
      .meta({ description: "The PodTemplate (same namespace). Optional when warmPoolRef is set." }),
    warmPoolRef: objectName("PodWarmPool")
      .optional()
      .meta({ description: "Claim a ready standby of this PodWarmPool (same namespace)." }),
    desiredState: z.enum(DESIRED_STATES).default("Running"),
    forkFrom: objectName("PodBox")
      .optional()
      .meta({
        description:
          "Clone both volumes of this PodBox (same namespace). Created Paused, with a template " +
          "that names a volumeSnapshotClassName: take them at once as VolumeSnapshots, with no Pod.",
      }),
    volumeKey: dnsLabel(40).optional().meta({
      description:
        "Re-attach the volumes kept under this key (a retained box's name) instead of new ones.",
    }),
    rootfsGeneration: z
      .int()
      .min(1, { error: "must be >= 1" })
      .default(1)
      .meta({ description: "Increase to reset the rootfs volume; the workspace is kept." }),
    idleTimeoutSeconds: z
      .int()
      .min(0, { error: "must be >= 0" })
      .optional()
      .meta({ description: "Pause the box after this long without activity (0 or unset: never)." }),
    leaseExpiresAt: timestamp()
      .optional()
      .meta({ description: "While the lease is live the box is never idle-paused." }),
    expiresAt: timestamp().optional().meta({
      description:
        "When the box ends, whatever its activity: it is terminated, or paused with onExpiry: Pause. A later time lets it run again.",
    }),
    onExpiry: z
      .enum(["Terminate", "Pause"])
      .optional()
      .meta({ description: "What expiresAt does: Terminate (unset) or Pause." }),
    egress: z.enum(["None"]).optional().meta({
      description:
        "None: the box reaches nothing on the network, whatever its template allows (E2B's allowInternetAccess: false).",
    }),
    network: z
      .object({
        allowPublicTraffic: z.boolean().optional().meta({
          description:
            "false: the gateway answers the sandbox's own ports (not its daemon's) only to requests carrying its traffic token (header e2b-traffic-access-token), as E2B's allowPublicTraffic. Unset: true.",
        }),
        maskRequestHost: z
          .string()
          .max(253)
          .regex(/^[\x21-\x7e]+$/, {
            error: "must be a host name, with an optional :port or ${PORT}",
          })
          .optional()
          .meta({
            description:
              "The Host header the sandbox's own ports see, `${PORT}` replaced by the port; the gateway sends the original as X-Forwarded-Host (E2B's maskRequestHost).",
          }),
        ...egressRulesFields,
      })
      .strict()
      .superRefine(checkEgressRules)
      .meta({ "x-kubernetes-validations": EGRESS_RULES_CEL })
      .optional()
      .meta({
        description:
          "How the gateway serves the sandbox's ports to the outside, and what it reaches (E2B's network). allowOut and denyOut, when either is set, replace its template's.",
      }),
    volumeReclaimPolicy: z
      .enum(["Delete", "Retain"])
      .default("Delete")
      .meta({ description: "Whether the PVCs are deleted or kept when the box ends." }),
  })
  .meta({ "x-kubernetes-validations": BOX_UPDATE_RULES });

export const podBoxStatusSchema = z.object({
  phase: z.enum(PHASES).optional(),
  podName: z.string().optional(),
  podIP: z.string().optional(),
  podUID: z.string().optional().meta({
    description:
      "The UID of the box's running Pod: the gateway's credential for its daemon names it.",
  }),
  poddURL: z.string().optional(),
  rootfsPVCName: z.string().optional(),
  workspacePVCName: z.string().optional(),
  rootfsGeneration: z.int().min(1).optional(),
  rootfsPoddImage: z.string().optional().meta({
    description:
      "Filesystem mode: the podd injector image whose podd the rootfs volume holds, left there by the Pod that filled it; the next Pod on that volume with the same injector starts without init containers.",
  }),
  rootfsSnapshotName: z.string().optional().meta({
    description:
      "A paused fork's rootfs volume, held as this VolumeSnapshot (ready) until the box first runs; its forks restore from it.",
  }),
  workspaceSnapshotName: z.string().optional().meta({
    description: "The same for the workspace volume.",
  }),
  templateName: z.string().optional().meta({
    description:
      "The PodTemplate the box was last built from; a box of a pool uses it once the pool is gone.",
  }),
  // A plain string in the CRD: a newer operator may add reasons without a CRD upgrade first.
  reason: (z.string() as unknown as z.ZodType<PodBoxReason>).optional(),
  message: z.string().optional(),
  lastActivityAt: timestamp().optional(),
  observedGeneration: z.int().min(0).optional(),
  conditions: z.array(conditionSchema).optional(),
});

export type PodBoxSpec = z.output<typeof podBoxSpecSchema>;
export type PodBoxStatus = z.output<typeof podBoxStatusSchema>;
export type PodBoxPhase = (typeof PHASES)[number];

export const podBoxDescriptor: KindDescriptor = {
  kind: "PodBox",
  plural: "podboxes",
  singular: "podbox",
  shortNames: ["pbox"],
  description: "One AI-agent sandbox: a Pod on a rootfs and a workspace PVC.",
  spec: podBoxSpecSchema,
  status: podBoxStatusSchema,
  printerColumns: [
    { name: "Phase", type: "string", jsonPath: ".status.phase" },
    { name: "Pod IP", type: "string", jsonPath: ".status.podIP" },
    { name: "Reason", type: "string", jsonPath: ".status.reason" },
    { name: "Desired", type: "string", jsonPath: ".spec.desiredState", priority: 1 },
    { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
  ],
};
