import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { stringify } from "yaml";
import { addChartValues } from "./chart-values";
import { DEFAULT_CLUSTER_NETWORKS, DEFAULT_EGRESS_AGENT_PORTS } from "../capabilities/config";

/**
 * The node egress agent as the Helm chart installs it when `egressAgent.enabled`: a DaemonSet on
 * every node, in the node's network namespace, with its own ServiceAccount and the least it
 * needs (podd/egressagent; docs/network.md, "Egress rules").
 */
export const EGRESS_AGENT_NAME = "cubepod-egress-agent";
const NAMESPACE = "pepr-system";
const HEALTH_PORT = 15021;
const LABELS = {
  "app.kubernetes.io/name": "cubepod",
  "app.kubernetes.io/component": "egress-agent",
};

/**
 * It reads the Pods of its node (a field selector on `spec.nodeName`; RBAC cannot narrow a list
 * by field) and answers on them with an annotation; nothing else. It reads no Secret, box or
 * template: the operator writes each sandbox's rules on its Pod.
 */
export const EGRESS_AGENT_RULES = [
  { apiGroups: [""], resources: ["pods"], verbs: ["list", "watch", "patch"] },
];

/** The chart's values for the agent, and their schema (Pepr's schema refuses unknown keys). */
export const EGRESS_AGENT_VALUES = {
  enabled: false,
  /** Where a redirected connection lands: each node's address on its Pod network. */
  addresses: [] as string[],
  clusterNetworks: DEFAULT_CLUSTER_NETWORKS,
  /** The sandboxes' DNS servers: allowed with domains; its proxy resolves through the first. */
  resolvers: [] as string[],
  /**
   * The address its proxy dials from, where nodes route sandbox traffic by source (the local
   * real node); empty: the kernel's choice.
   */
  sourceAddress: "",
  nodeSelector: {},
  tolerations: [{ operator: "Exists" }],
};
export const EGRESS_AGENT_VALUES_SCHEMA = {
  type: "object",
  additionalProperties: false,
  properties: {
    enabled: { type: "boolean" },
    addresses: { type: "array", items: { type: "string" } },
    clusterNetworks: { type: "array", items: { type: "string" }, minItems: 1 },
    resolvers: { type: "array", items: { type: "string" } },
    sourceAddress: { type: "string" },
    nodeSelector: { type: "object", additionalProperties: { type: "string" } },
    tolerations: { type: "array", items: { type: "object" } },
  },
};

/** The agent's objects, with `{{ ... }}` placeholders the chart template fills from values. */
function egressAgentObjects(): Record<string, unknown>[] {
  const meta = (namespaced = true) => ({
    name: EGRESS_AGENT_NAME,
    ...(namespaced ? { namespace: NAMESPACE } : {}),
    labels: LABELS,
  });
  const env = (name: string, value: string) => ({ name, value });
  return [
    { apiVersion: "v1", kind: "ServiceAccount", metadata: meta() },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRole",
      metadata: meta(false),
      rules: EGRESS_AGENT_RULES,
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: meta(false),
      roleRef: {
        apiGroup: "rbac.authorization.k8s.io",
        kind: "ClusterRole",
        name: EGRESS_AGENT_NAME,
      },
      subjects: [{ kind: "ServiceAccount", name: EGRESS_AGENT_NAME, namespace: NAMESPACE }],
    },
    {
      apiVersion: "apps/v1",
      kind: "DaemonSet",
      metadata: meta(),
      spec: {
        selector: { matchLabels: LABELS },
        updateStrategy: { type: "RollingUpdate", rollingUpdate: { maxUnavailable: 1 } },
        template: {
          metadata: { labels: LABELS },
          spec: {
            serviceAccountName: EGRESS_AGENT_NAME,
            // Its table and proxy belong in the node's namespace, out of every sandbox's reach.
            hostNetwork: true,
            dnsPolicy: "ClusterFirstWithHostNet",
            nodeSelector: "@@nodeSelector@@",
            tolerations: "@@tolerations@@",
            containers: [
              {
                name: "agent",
                image: "@@image@@",
                imagePullPolicy: "IfNotPresent",
                env: [
                  { name: "NODE_NAME", valueFrom: { fieldRef: { fieldPath: "spec.nodeName" } } },
                  { name: "HOST_IP", valueFrom: { fieldRef: { fieldPath: "status.hostIP" } } },
                  env("CUBEPOD_CLUSTER_NETWORKS", "@@clusterNetworks@@"),
                  env("CUBEPOD_EGRESS_RESOLVERS", "@@resolvers@@"),
                  env("CUBEPOD_EGRESS_AGENT_SOURCE", "@@sourceAddress@@"),
                  env("CUBEPOD_EGRESS_AGENT_PORTS", DEFAULT_EGRESS_AGENT_PORTS.join(",")),
                  // On the node's address, where the kubelet probes it and Prometheus scrapes it.
                  env("CUBEPOD_EGRESS_AGENT_HEALTH", `$(HOST_IP):${HEALTH_PORT}`),
                ],
                ports: [{ name: "metrics", containerPort: HEALTH_PORT, protocol: "TCP" }],
                readinessProbe: { httpGet: { path: "/healthz", port: HEALTH_PORT } },
                livenessProbe: {
                  httpGet: { path: "/healthz", port: HEALTH_PORT },
                  initialDelaySeconds: 30,
                },
                resources: {
                  requests: { cpu: "50m", memory: "64Mi" },
                  limits: { memory: "256Mi" },
                },
                // Root for netlink in the node's namespace, with NET_ADMIN alone of its rights.
                securityContext: {
                  runAsUser: 0,
                  allowPrivilegeEscalation: false,
                  readOnlyRootFilesystem: true,
                  capabilities: { drop: ["ALL"], add: ["NET_ADMIN"] },
                },
              },
            ],
          },
        },
      },
    },
  ];
}

/**
 * The chart template: the objects when `egressAgent.enabled`, and an install that fails naming
 * `egressAgent.addresses` when they are missing (the module could not admit the agent's ports).
 */
export function egressAgentChartTemplate(): string {
  const values = ".Values.egressAgent";
  const text = egressAgentObjects()
    .map(d => stringify(d, { lineWidth: 0 }))
    .join("---\n")
    .split("\n")
    .map(line =>
      line
        .replace(
          /^(\s*)image: "?@@image@@"?$/,
          '$1image: {{ printf "%s/egress-agent:%s" .Values.images.registry .Values.images.tag | quote }}',
        )
        .replace(/"?@@clusterNetworks@@"?/, `{{ join "," ${values}.clusterNetworks | quote }}`)
        .replace(/"?@@resolvers@@"?/, `{{ join "," ${values}.resolvers | quote }}`)
        .replace(/"?@@sourceAddress@@"?/, `{{ ${values}.sourceAddress | quote }}`)
        .replace(
          /^(\s*)(nodeSelector|tolerations): "?@@\w+@@"?$/,
          (_, i: string, key: string) =>
            `${i}${key}:\n${i}  {{- toYaml ${values}.${key} | nindent ${i.length + 2} }}`,
        ),
    )
    .join("\n");
  return [
    `{{- if ${values}.enabled }}`,
    `{{- if not ${values}.addresses }}`,
    `{{- fail "egressAgent.addresses: name where sandboxes reach the agent (each node's address on its Pod network), or leave egressAgent.enabled false" }}`,
    "{{- end }}",
    text,
    "{{- end }}\n",
  ].join("\n");
}

/**
 * Adds the `egressAgent` values and its template, and tells the module where the agent is
 * reached (CUBEPOD_EGRESS_AGENT_ADDRESSES, after PEPR_WATCH_MODE in both of its Deployments)
 * when it runs; false when the chart is not as Pepr writes it. The gateway's template takes
 * CUBEPOD_GATEWAY_EGRESS_AGENT from the same value (gateway-deployment.ts).
 */
export function addEgressAgentInChart(chart: string): boolean {
  const templates = ["admission-deployment.yaml", "watcher-deployment.yaml"].map(f =>
    join(chart, "templates", f),
  );
  const env = /^(\s*)- name: PEPR_WATCH_MODE\n\s*value: "(?:true|false)"\n/m;
  const addresses = (m: string, i: string) =>
    `${m}${i}{{- if .Values.egressAgent.enabled }}\n${i}- name: CUBEPOD_EGRESS_AGENT_ADDRESSES\n` +
    `${i}  value: {{ join "," .Values.egressAgent.addresses | quote }}\n${i}{{- end }}\n`;
  for (const file of templates) {
    if (!existsSync(file)) return false;
    const text = readFileSync(file, "utf8");
    if (!env.test(text)) return false;
    writeFileSync(file, text.replace(env, addresses));
  }
  writeFileSync(join(chart, "templates", "egress-agent.yaml"), egressAgentChartTemplate());
  addChartValues(chart, "egressAgent", EGRESS_AGENT_VALUES, EGRESS_AGENT_VALUES_SCHEMA);
  return true;
}
