import type { V1OwnerReference } from "@kubernetes/client-node";
import type { PodTemplateSpec } from "../api/podtemplate";

/**
 * A PodTemplate as the builders need it: its name, its defaulted spec and, when it has one, its
 * filled seed PVC for this spec (`rootfs.seed`), which new rootfs volumes are cloned from.
 */
export type TemplateRef = { name: string; spec: PodTemplateSpec; seed?: { pvcName: string } };

/** Who owns a built object (garbage collection follows it). */
export type Owner = V1OwnerReference;
