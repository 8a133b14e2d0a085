import { podTemplateSpecSchema } from "../../capabilities/api/podtemplate";
import { TemplateRef } from "../../capabilities/manifests/types";

/** A PodTemplate as stored (defaults applied), with overrides. */
export function template(overrides: Record<string, unknown> = {}, name = "python"): TemplateRef {
  return {
    name,
    spec: podTemplateSpecSchema.parse({ image: "ghcr.io/x/sandbox:1", ...overrides }),
  };
}

export const OWNER = {
  apiVersion: "pod.cubeplex.ai/v1alpha1",
  kind: "PodBox",
  name: "box",
  uid: "0b6d5c38-1111-4e5e-9a57-000000000001",
  controller: true,
  blockOwnerDeletion: true,
};
