import { z } from "zod";

/** A printer column of a CRD (`kubectl get` output). */
export type PrinterColumn = {
  name: string;
  type: "string" | "integer" | "number" | "boolean" | "date";
  jsonPath: string;
  description?: string;
  priority?: number;
};

/** Everything needed to generate one CRD and validate its objects. */
export type KindDescriptor = {
  kind: string;
  plural: string;
  singular: string;
  shortNames: string[];
  description: string;
  spec: z.ZodType;
  status: z.ZodType;
  printerColumns: PrinterColumn[];
  /** The `scale` subresource, for a kind that autoscalers (HPA, KEDA) may size. */
  scale?: { specReplicasPath: string; statusReplicasPath: string; labelSelectorPath: string };
};
