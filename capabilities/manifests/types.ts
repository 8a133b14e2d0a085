import type { V1OwnerReference } from "@kubernetes/client-node";
import type { PodTemplateSpec } from "../api/podtemplate";

/** A PodTemplate as the builders need it: its name and its defaulted spec. */
export type TemplateRef = { name: string; spec: PodTemplateSpec };

/** Who owns a built object (garbage collection follows it). */
export type Owner = V1OwnerReference;
