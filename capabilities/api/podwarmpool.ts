import { z } from "zod";
import { conditionSchema, objectName } from "./common";
import { KindDescriptor } from "./descriptor";

/**
 * The most standbys one pool may keep. A namespace's total is a ResourceQuota's business (count of
 * Pods and PVCs, storage requests; docs/warm-pools.md).
 */
export const MAX_POOL_REPLICAS = 1000;
/** Bounds of an autoscaling pool's demand window. */
export const MIN_DEMAND_WINDOW_SECONDS = 10;
export const MAX_DEMAND_WINDOW_SECONDS = 3600;

export const podWarmPoolSpecSchema = z.object({
  templateRef: objectName("PodTemplate").meta({
    description: "The PodTemplate (same namespace) whose standbys this pool keeps.",
  }),
  replicas: z
    .int()
    .min(0, { error: "must be >= 0" })
    .max(MAX_POOL_REPLICAS, { error: `must be <= ${MAX_POOL_REPLICAS}` })
    .default(1)
    .meta({
      description:
        "How many standby sandboxes to keep ready; with autoscale, the fewest (the floor).",
    }),
  autoscale: z
    .object({
      maxReplicas: z
        .int()
        .min(1, { error: "must be >= 1" })
        .max(MAX_POOL_REPLICAS, { error: `must be <= ${MAX_POOL_REPLICAS}` })
        .meta({ description: "The most standbys the pool keeps (the ceiling)." }),
      windowSeconds: z
        .int()
        .min(MIN_DEMAND_WINDOW_SECONDS, { error: `must be >= ${MIN_DEMAND_WINDOW_SECONDS}` })
        .max(MAX_DEMAND_WINDOW_SECONDS, { error: `must be <= ${MAX_DEMAND_WINDOW_SECONDS}` })
        .default(60)
        .meta({
          description:
            "The demand window: the pool keeps a standby for each box that asked it for one in the last window, and lowers its target only after a whole window in which the higher one was not needed.",
        }),
    })
    .optional()
    .meta({
      description:
        "Follow demand: keep as many standbys as boxes claimed from this pool in the recent window, within spec.replicas and maxReplicas, so that a burst like the last finds standbys. The target is in status.desiredReplicas.",
    }),
});

export const podWarmPoolStatusSchema = z.object({
  replicas: z.int().min(0).optional(),
  /** The standbys the pool keeps now: spec.replicas, or with autoscale what demand asks for. */
  desiredReplicas: z.int().min(0).optional(),
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
    { name: "Desired", type: "integer", jsonPath: ".status.desiredReplicas" },
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
