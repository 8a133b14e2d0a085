import { API_VERSION, GROUP } from "../api/common";

/** Names the tenant default a template was copied from (`<namespace>/<name>`). */
export const ANNOTATION_TENANT_DEFAULT = `${GROUP}/tenant-default`;

/**
 * A namespace's copy of a tenant default: the platform's template, of the same name and spec,
 * marked with where it came from. It is then the namespace's own: the operator never writes it
 * again, so its tenant (or their GitOps) may change or replace it.
 */
export function tenantDefaultCopy(name: string, from: string, spec: unknown) {
  return {
    apiVersion: API_VERSION,
    kind: "PodTemplate",
    metadata: { name, annotations: { [ANNOTATION_TENANT_DEFAULT]: from } },
    spec,
  };
}
