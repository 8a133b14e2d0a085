import { z } from "zod";
import { conditionSchema, objectName } from "./common";
import { KindDescriptor } from "./descriptor";

/**
 * The most standbys one pool may keep. A namespace's total is a ResourceQuota's business (count of
 * Pods and PVCs, storage requests; docs/warm-pools.md).
 */
export const MAX_POOL_REPLICAS = 1000;

export const podWarmPoolSpecSchema = z.object({
  templateRef: objectName("PodTemplate").meta({
    description: "The PodTemplate (same namespace) whose standbys this pool keeps.",
  }),
  replicas: z
    .int()
    .min(0, { error: "must be >= 0" })
    .max(MAX_POOL_REPLICAS, { error: `must be <= ${MAX_POOL_REPLICAS}` })
    .default(1)
    .meta({ description: "How many standby sandboxes to keep ready." }),
});

export const podWarmPoolStatusSchema = z.object({
  replicas: z.int().min(0).optional(),
  readyReplicas: z.int().min(0).optional(),
  /** Standbys built from the template as it is now (the others are stale and being replaced). */
  updatedReplicas: z.int().min(0).optional(),
  observedGeneration: z.int().min(0).optional(),
  templateHash: z.string().optional(),
  /** The label selector of the pool's standbys, as the `scale` subresource reports it. */
  selector: z.string().optional(),
  conditions: z.array(conditionSchema).optional(),
});

export type PodWarmPoolSpec = z.output<typeof podWarmPoolSpecSchema>;
export type PodWarmPoolStatus = z.output<typeof podWarmPoolStatusSchema>;

export const podWarmPoolDescriptor: KindDescriptor = {
  kind: "PodWarmPool",
  plural: "podwarmpools",
  singular: "podwarmpool",
  shortNames: ["pwp"],
  description: "N standby sandboxes of one PodTemplate, Pods running and both PVCs provisioned.",
  spec: podWarmPoolSpecSchema,
  status: podWarmPoolStatusSchema,
  printerColumns: [
    { name: "Template", type: "string", jsonPath: ".spec.templateRef" },
    { name: "Ready", type: "integer", jsonPath: ".status.readyReplicas" },
    { name: "Desired", type: "integer", jsonPath: ".spec.replicas" },
    { name: "Up-to-date", type: "integer", jsonPath: ".status.updatedReplicas", priority: 1 },
    { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
  ],
  // `kubectl scale`, an HPA or KEDA set spec.replicas through it, within the schema's bounds.
  scale: {
    specReplicasPath: ".spec.replicas",
    statusReplicasPath: ".status.replicas",
    labelSelectorPath: ".status.selector",
  },
};
