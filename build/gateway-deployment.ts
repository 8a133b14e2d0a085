import { createHash } from "node:crypto";
import { gzipSync } from "node:zlib";
import { stringify } from "yaml";

/**
 * The gateway as the module manifest and the Helm chart install it: its bundled code in a Secret,
 * run by Node on the controller image the module's own Deployments use, so that no image beyond
 * Pepr's is needed.
 */
export const GATEWAY_NAME = "cubepod-gateway";
const NAMESPACE = "pepr-system";
const PORT = 8080;
const METRICS_PORT = 8082;
const TLS_PORT = 8443;
const TLS_DIR = "/etc/cubepod/gateway-tls";
const CODE_DIR = "/app/gateway";
const CODE_FILE = "gateway.js.gz";
const LABELS = { "app.kubernetes.io/name": "cubepod", "app.kubernetes.io/component": "gateway" };
const UID = 65532;

/**
 * Runs the gzipped bundle from the mounted Secret with the image's Node. A Secret holds at most
 * 1 MiB and the bundle is larger unzipped; `new Function` runs it with this process's `require`.
 */
export const LOADER = [
  `const f=require("fs"),z=require("zlib"),p=${JSON.stringify(`${CODE_DIR}/${CODE_FILE}`)};`,
  `new Function("require","module","exports","__filename","__dirname",`,
  `z.gunzipSync(f.readFileSync(p)).toString())(require,module,exports,p,${JSON.stringify(CODE_DIR)})`,
].join("");

export type GatewayDeploymentInput = {
  /** The bundle (`dist/cubepod-gateway.js`). */
  code: Buffer;
  image: string;
  replicas: number;
  domain: string;
  /**
   * A `kubernetes.io/tls` Secret (the user's, or cert-manager's) whose certificate names
   * `<domain>` and `*.<domain>`: HTTPS is then served too, on the Service's 443, as E2B's SDKs
   * call it given only the domain.
   */
  tlsSecretName?: string;
  /** The cluster runs the node egress agent: E2B's allowOut and denyOut are served. */
  egressAgent?: boolean;
  /** Where its Pods may run, as the module's own Deployments take from the chart's values. */
  nodeSelector?: Record<string, string>;
  tolerations?: Record<string, string>[];
};

/**
 * What the gateway may do, and nothing more: PodBoxes are its sandboxes; templates and pools it
 * reads to choose warm or cold; PodAPIKeys (hashes) tell it which namespace a key acts in. It
 * reads no Secret: a sandbox's envVars are sealed into its box, and its own token key reaches it
 * through its Pod's environment, which the kubelet fills.
 */
export const GATEWAY_RULES = [
  {
    apiGroups: ["pod.cubeplex.ai"],
    resources: ["podboxes"],
    verbs: ["list", "watch", "create", "patch", "delete"],
  },
  { apiGroups: ["pod.cubeplex.ai"], resources: ["podtemplates"], verbs: ["get", "list", "watch"] },
  { apiGroups: ["pod.cubeplex.ai"], resources: ["podwarmpools"], verbs: ["list", "watch"] },
  { apiGroups: ["pod.cubeplex.ai"], resources: ["podapikeys"], verbs: ["list", "watch"] },
];

/**
 * The token key's Secret, which the module makes at its first start (capabilities/admission/
 * control-key.ts), so that no artifact holds it: the module's rights to make it and read it back,
 * in the gateway's namespace only.
 */
export function tokenKeyRole(moduleServiceAccount: string): Record<string, unknown>[] {
  const name = `${GATEWAY_NAME}-token-key`;
  const metadata = { name, namespace: NAMESPACE, labels: LABELS };
  return [
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "Role",
      metadata,
      rules: [
        { apiGroups: [""], resources: ["secrets"], verbs: ["create"] },
        { apiGroups: [""], resources: ["secrets"], resourceNames: [name], verbs: ["get"] },
      ],
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "RoleBinding",
      metadata,
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name },
      subjects: [{ kind: "ServiceAccount", name: moduleServiceAccount, namespace: NAMESPACE }],
    },
  ];
}

/** The gateway's objects: ServiceAccount, ClusterRole and binding, code Secret, Deployment, Service. */
export function gatewayDeployment(input: GatewayDeploymentInput): Record<string, unknown>[] {
  const zipped = gzipSync(input.code, { level: 9 });
  const tls = input.tlsSecretName;
  const meta = (name: string, namespaced = true) => ({
    name,
    ...(namespaced ? { namespace: NAMESPACE } : {}),
    labels: LABELS,
  });
  return [
    { apiVersion: "v1", kind: "ServiceAccount", metadata: meta(GATEWAY_NAME) },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRole",
      metadata: meta(GATEWAY_NAME, false),
      rules: GATEWAY_RULES,
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: meta(GATEWAY_NAME, false),
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: GATEWAY_NAME },
      subjects: [{ kind: "ServiceAccount", name: GATEWAY_NAME, namespace: NAMESPACE }],
    },
    {
      apiVersion: "v1",
      kind: "Secret",
      metadata: meta(`${GATEWAY_NAME}-code`),
      type: "Opaque",
      data: { [CODE_FILE]: zipped.toString("base64") },
    },
    {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: meta(GATEWAY_NAME),
      spec: {
        replicas: input.replicas,
        selector: { matchLabels: LABELS },
        template: {
          metadata: {
            labels: LABELS,
            // A new bundle rolls the Pods.
            annotations: {
              "pod.cubeplex.ai/gateway-code": createHash("sha256")
                .update(zipped)
                .digest("hex")
                .slice(0, 16),
            },
          },
          spec: {
            serviceAccountName: GATEWAY_NAME,
            ...(input.nodeSelector ? { nodeSelector: input.nodeSelector } : {}),
            ...(input.tolerations ? { tolerations: input.tolerations } : {}),
            securityContext: { runAsUser: UID, runAsGroup: UID, runAsNonRoot: true },
            containers: [
              {
                name: "gateway",
                image: input.image,
                imagePullPolicy: "IfNotPresent",
                // The image's entrypoint is Node, as for the module's own containers.
                args: ["-e", LOADER],
                env: [
                  { name: "CUBEPOD_GATEWAY_HOST", value: "0.0.0.0" },
                  { name: "CUBEPOD_GATEWAY_PORT", value: String(PORT) },
                  { name: "CUBEPOD_GATEWAY_METRICS_PORT", value: String(METRICS_PORT) },
                  { name: "CUBEPOD_GATEWAY_DOMAIN", value: input.domain },
                  {
                    name: "CUBEPOD_GATEWAY_EGRESS_AGENT",
                    value: input.egressAgent ? "enabled" : "disabled",
                  },
                  // Made by the module at its first start: until then the kubelet holds the
                  // container back, and a rotation (docs/deploy.md) restarts the Pods.
                  {
                    name: "CUBEPOD_GATEWAY_TOKEN_KEY",
                    valueFrom: { secretKeyRef: { name: `${GATEWAY_NAME}-token-key`, key: "key" } },
                  },
                  {
                    name: "CUBEPOD_GATEWAY_PREVIOUS_TOKEN_KEY",
                    valueFrom: {
                      secretKeyRef: {
                        name: `${GATEWAY_NAME}-token-key`,
                        key: "previous",
                        optional: true,
                      },
                    },
                  },
                  ...(tls
                    ? [
                        { name: "CUBEPOD_GATEWAY_TLS_PORT", value: String(TLS_PORT) },
                        { name: "CUBEPOD_GATEWAY_TLS_CERT_FILE", value: `${TLS_DIR}/tls.crt` },
                        { name: "CUBEPOD_GATEWAY_TLS_KEY_FILE", value: `${TLS_DIR}/tls.key` },
                      ]
                    : []),
                ],
                ports: [
                  { name: "http", containerPort: PORT, protocol: "TCP" },
                  ...(tls ? [{ name: "https", containerPort: TLS_PORT, protocol: "TCP" }] : []),
                  { name: "metrics", containerPort: METRICS_PORT, protocol: "TCP" },
                ],
                readinessProbe: { httpGet: { path: "/healthz", port: METRICS_PORT } },
                livenessProbe: {
                  httpGet: { path: "/healthz", port: METRICS_PORT },
                  initialDelaySeconds: 30,
                },
                resources: {
                  requests: { cpu: "100m", memory: "128Mi" },
                  limits: { memory: "512Mi" },
                },
                securityContext: {
                  allowPrivilegeEscalation: false,
                  readOnlyRootFilesystem: true,
                  capabilities: { drop: ["ALL"] },
                },
                volumeMounts: [
                  { name: "code", mountPath: CODE_DIR, readOnly: true },
                  ...(tls ? [{ name: "tls", mountPath: TLS_DIR, readOnly: true }] : []),
                ],
              },
            ],
            volumes: [
              { name: "code", secret: { secretName: `${GATEWAY_NAME}-code` } },
              ...(tls ? [{ name: "tls", secret: { secretName: tls } }] : []),
            ],
          },
        },
      },
    },
    {
      apiVersion: "v1",
      kind: "Service",
      metadata: meta(GATEWAY_NAME),
      spec: {
        selector: LABELS,
        ports: [
          { name: "http", port: 80, targetPort: "http", protocol: "TCP" },
          ...(tls ? [{ name: "https", port: 443, targetPort: "https", protocol: "TCP" }] : []),
          { name: "metrics", port: METRICS_PORT, targetPort: "metrics", protocol: "TCP" },
        ],
      },
    },
  ];
}

/** The chart's values for the gateway, and their schema (Pepr's schema refuses unknown keys). */
export const GATEWAY_VALUES = {
  replicas: 2,
  domain: "cubepod.localhost",
  nodeSelector: {},
  tolerations: [],
  tls: { secretName: "" },
};
export const GATEWAY_VALUES_SCHEMA = {
  type: "object",
  additionalProperties: false,
  properties: {
    replicas: { type: "integer", minimum: 0 },
    domain: { type: "string" },
    nodeSelector: { type: "object", additionalProperties: { type: "string" } },
    tolerations: { type: "array", items: { type: "object" } },
    tls: {
      type: "object",
      additionalProperties: false,
      properties: { secretName: { type: "string" } },
    },
  },
};

/**
 * The chart template: the same objects, with the replica count, domain and image taken from
 * values by whole lines (the code's base64 is never touched); the Deployment and Service come in
 * two forms, with HTTPS when `gateway.tls.secretName` names a certificate's Secret, and without.
 */
export function gatewayChartTemplate(
  input: Omit<
    GatewayDeploymentInput,
    "replicas" | "domain" | "nodeSelector" | "tolerations" | "tlsSecretName"
  >,
) {
  const placeholders = {
    ...input,
    replicas: -1,
    domain: "@@domain@@",
    nodeSelector: { "@@nodeSelector@@": "" },
    tolerations: [{ "@@tolerations@@": "" }],
  };
  const served = (d: Record<string, unknown>) => d.kind === "Deployment" || d.kind === "Service";
  const plain = gatewayDeployment(placeholders);
  const https = gatewayDeployment({ ...placeholders, tlsSecretName: "@@tlsSecret@@" });
  const fromValues = (indent: string, key: string) =>
    `${indent}${key}:\n${indent}  {{- toYaml .Values.gateway.${key} | nindent ${indent.length + 2} }}`;
  const text = (docs: Record<string, unknown>[]) =>
    docs
      .map(d => stringify(d, { lineWidth: 0 }))
      .join("---\n")
      .split("\n")
      .map(line =>
        line
          .replace(/^(\s*replicas: )-1$/, "$1{{ .Values.gateway.replicas }}")
          .replace(/^(\s*value: )"?@@domain@@"?$/, "$1{{ .Values.gateway.domain | quote }}")
          .replace(
            /^(\s*value: )"?disabled"?$/,
            '$1{{ ternary "enabled" "disabled" .Values.egressAgent.enabled | quote }}',
          )
          .replace(/^(\s*secretName: )"?@@tlsSecret@@"?$/, "$1{{ .Values.gateway.tls.secretName }}")
          .replace(/^(\s*image: ).*$/, "$1{{ .Values.watcher.image }}")
          .replace(/^(\s*)nodeSelector:$/, (_, i: string) => fromValues(i, "nodeSelector"))
          .replace(/^(\s*)tolerations:$/, (_, i: string) => fromValues(i, "tolerations")),
      )
      .filter(line => !line.includes("@@nodeSelector@@") && !line.includes("@@tolerations@@"))
      .join("\n");
  return [
    text(plain.filter(d => !served(d))),
    "{{- if .Values.gateway.tls.secretName }}",
    text(https.filter(served)),
    "{{- else }}",
    text(plain.filter(served)),
    "{{- end }}\n",
  ].join("\n---\n");
}
