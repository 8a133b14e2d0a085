import type { PodTemplateSpec } from "../api/podtemplate";
import type { ApiClient } from "../client/api-client";

/** A right in the template's namespace: a verb on a resource, on one name or on all. */
export type Access = {
  verb: "get" | "create";
  resource: "secrets" | "pods" | "networkpolicies";
  name?: string;
};

/** The API group of each resource a template lends rights on. */
const GROUPS: Record<Access["resource"], string> = {
  secrets: "",
  pods: "",
  networkpolicies: "networking.k8s.io",
};

/** Who asks, as the admission request names them. */
export type Requester = {
  username?: string;
  uid?: string;
  groups?: string[];
  extra?: Record<string, string[]>;
};

/**
 * The rights a user must hold to write a PodTemplate: the operator creates Pods from it (images
 * of the author's choosing) and mounts the Secret it names into them, so writing a template must
 * not reach further than the author's own RBAC. Egress to named CIDRs is a NetworkPolicy the
 * operator writes for the author: it needs `create` on those. Pure.
 */
export function accessNeeded(spec: PodTemplateSpec): Access[] {
  const needs: Access[] = [{ verb: "create", resource: "pods" }];
  if (spec.egress?.enabled && spec.egress.secretName) {
    needs.push({ verb: "get", resource: "secrets", name: spec.egress.secretName });
  }
  if (spec.network?.egressCIDRs?.length) {
    needs.push({ verb: "create", resource: "networkpolicies" });
  }
  return needs;
}

/** A right in words, as a denial names it. */
export const describeAccess = (a: Access, namespace: string) =>
  `${a.verb} ${a.resource}${a.name ? ` "${a.name}"` : ""} in namespace "${namespace}"`;

type SubjectAccessReview = {
  apiVersion: string;
  kind: string;
  spec: object;
  status?: { allowed?: boolean };
};

/** The rights of `needs` that the requester lacks, asked of the API server (SubjectAccessReview). */
export async function missingAccess(
  client: ApiClient,
  who: Requester,
  namespace: string,
  needs: Access[],
): Promise<Access[]> {
  const answers = await Promise.all(
    needs.map(a =>
      client.create<SubjectAccessReview>("/apis/authorization.k8s.io/v1/subjectaccessreviews", {
        apiVersion: "authorization.k8s.io/v1",
        kind: "SubjectAccessReview",
        spec: {
          user: who.username,
          uid: who.uid,
          groups: who.groups,
          extra: who.extra,
          resourceAttributes: { namespace, group: GROUPS[a.resource], ...a },
        },
      }),
    ),
  );
  return needs.filter((_, i) => !answers[i].status?.allowed);
}
