import { GROUP } from "../api/common";
import {
  LABEL_BOX,
  LABEL_MANAGED_BY,
  LABEL_POD_ROLE,
  LABEL_POOL,
  LABEL_RETAINED,
  LABEL_ROOTFS_GENERATION,
  LABEL_SEED,
  LABEL_SEED_FILLED,
  LABEL_SEED_OF,
  LABEL_TEMPLATE_HASH,
  LABEL_VOLUME,
  LABEL_VOLUME_KEY,
  MANAGED_BY,
} from "../manifests/labels";

/**
 * The labels by which the operator recognises its own Pods and PVCs: whose box or pool they are,
 * which volumes, which template version, which template's seed and whether it is filled.
 * `app.kubernetes.io/managed-by` counts only with the value `cubepod`. `pod.cubeplex.ai/template`
 * is not one of them: it is how a hand-declared Pod asks for the sandbox runtime.
 */
export const PROVENANCE_LABELS = [
  LABEL_BOX,
  LABEL_POOL,
  LABEL_VOLUME,
  LABEL_VOLUME_KEY,
  LABEL_ROOTFS_GENERATION,
  LABEL_TEMPLATE_HASH,
  LABEL_RETAINED,
  LABEL_POD_ROLE,
  LABEL_SEED_OF,
  LABEL_SEED,
  LABEL_SEED_FILLED,
  LABEL_MANAGED_BY,
];

/**
 * Who may remove ownerReferences to CubePod objects besides the operator: the garbage collector,
 * when an owner is deleted with `propagationPolicy: Orphan`, under either identity
 * kube-controller-manager may run it with.
 */
export const GARBAGE_COLLECTORS = [
  "system:serviceaccount:kube-system:generic-garbage-collector",
  "system:kube-controller-manager",
];

export const PROVENANCE_POLICY_NAME = "cubepod-provenance";

/** The CEL list of an object's provenance marks: its CubePod labels and owner references. */
const marksOf = (o: string) =>
  `(${JSON.stringify(PROVENANCE_LABELS)}.filter(k, has(${o}.metadata.labels) && ` +
  `k in ${o}.metadata.labels && (k != "${LABEL_MANAGED_BY}" || ` +
  `${o}.metadata.labels[k] == "${MANAGED_BY}"))` +
  `.map(k, "label " + k + "=" + ${o}.metadata.labels[k]) + ` +
  `(has(${o}.metadata.ownerReferences) ? ${o}.metadata.ownerReferences` +
  `.filter(r, r.apiVersion.startsWith("${GROUP}/"))` +
  `.map(r, "ownerReference to " + r.kind + " " + r.name + " (uid " + r.uid + ")") : []))`;

/**
 * The admission policy that makes CubePod's provenance unforgeable: only the operator's identity
 * may create a Pod or PVC that carries a provenance label or an ownerReference to a CubePod
 * object, or add, change or remove one on an existing object; nobody else may change the spec of
 * a Pod that carries them. The operator then trusts what it reads: a box's Pod, a pool's standby
 * and a key's retained volumes are what it made them. The API server evaluates it in-process: no
 * webhook round trip (claims stay as fast), and it holds while the module is down.
 *
 * @param moduleUser the username the module's requests carry (its ServiceAccount once deployed)
 */
export function provenancePolicy(moduleUser: string) {
  const policy = {
    apiVersion: "admissionregistration.k8s.io/v1",
    kind: "ValidatingAdmissionPolicy",
    metadata: { name: PROVENANCE_POLICY_NAME },
    spec: {
      failurePolicy: "Fail",
      matchConstraints: {
        resourceRules: [
          {
            apiGroups: [""],
            apiVersions: ["v1"],
            operations: ["CREATE", "UPDATE"],
            resources: ["pods", "pods/ephemeralcontainers", "persistentvolumeclaims"],
          },
        ],
      },
      matchConditions: [
        { name: "not-the-operator", expression: `request.userInfo.username != "${moduleUser}"` },
      ],
      variables: [
        { name: "marks", expression: marksOf("object") },
        {
          name: "oldMarks",
          expression: `request.operation == "UPDATE" ? ${marksOf("oldObject")} : []`,
        },
        { name: "added", expression: "variables.marks.filter(m, !(m in variables.oldMarks))" },
        { name: "removed", expression: "variables.oldMarks.filter(m, !(m in variables.marks))" },
      ],
      validations: [
        {
          expression:
            "size(variables.added) == 0 && (size(variables.removed) == 0 || " +
            `(request.userInfo.username in ${JSON.stringify(GARBAGE_COLLECTORS)} && ` +
            'variables.removed.all(m, m.startsWith("ownerReference"))))',
          messageExpression:
            "(size(variables.added) > 0 ? variables.added[0] : variables.removed[0]) + " +
            `": CubePod's marks on Pods and PVCs are set, changed and removed only by its ` +
            `operator (${moduleUser})"`,
          reason: "Forbidden",
        },
        {
          expression:
            'request.operation != "UPDATE" || request.resource.resource != "pods" || ' +
            "size(variables.oldMarks) == 0 || object.spec == oldObject.spec",
          message: `the spec of a CubePod sandbox Pod is changed only by its operator (${moduleUser})`,
          reason: "Forbidden",
        },
      ],
    },
  };
  const binding = {
    apiVersion: "admissionregistration.k8s.io/v1",
    kind: "ValidatingAdmissionPolicyBinding",
    metadata: { name: PROVENANCE_POLICY_NAME },
    spec: { policyName: PROVENANCE_POLICY_NAME, validationActions: ["Deny"] },
  };
  return [policy, binding];
}
