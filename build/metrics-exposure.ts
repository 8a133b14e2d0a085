import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseDocument } from "yaml";

/** The operator's metrics and health endpoint (CEP-0008), plain HTTP, served by the watcher. */
export const METRICS_PORT = 8081;
const PORT_NAME = "cubepod-metrics";

/**
 * Restarts a watcher whose watches died (the endpoint answers 503 then). Only the fields (and a
 * numeric port) that the chart's values schema, written by Pepr, accepts for a probe.
 */
const LIVENESS_PROBE = {
  httpGet: { path: "/healthz", port: METRICS_PORT, scheme: "HTTP" },
  initialDelaySeconds: 30,
};
const SERVICE_LABELS = {
  "app.kubernetes.io/name": "cubepod",
  "app.kubernetes.io/component": "metrics",
};

type Doc = {
  kind?: string;
  metadata?: { name?: string; namespace?: string; labels?: Record<string, string> };
  spec?: {
    selector?: { matchLabels?: Record<string, string> };
    template?: {
      spec?: {
        containers?: {
          name: string;
          ports?: object[];
          livenessProbe?: object;
          readinessProbe?: object;
        }[];
      };
    };
  };
};

/**
 * Exposes the watcher's :8081 in the module manifest: a named container port, a liveness probe on
 * /healthz (a dead watch restarts the watcher) and a Service that a ServiceMonitor can select.
 * Returns the documents with the Service appended; unchanged when there is no watcher.
 */
export function exposeMetrics(docs: Doc[], watcherName: string): Doc[] {
  const watcher = docs.find(d => d.kind === "Deployment" && d.metadata?.name === watcherName);
  const container = watcher?.spec?.template?.spec?.containers?.[0];
  if (!watcher || !container) return docs;
  container.ports = [
    ...(container.ports ?? []).filter(p => (p as { name?: string }).name !== PORT_NAME),
    { name: PORT_NAME, containerPort: METRICS_PORT, protocol: "TCP" },
  ];
  container.livenessProbe = LIVENESS_PROBE;
  const service: Doc & Record<string, unknown> = {
    apiVersion: "v1",
    kind: "Service",
    metadata: {
      name: `${watcherName}-metrics`,
      namespace: watcher.metadata?.namespace,
      labels: SERVICE_LABELS,
    },
    spec: {
      selector: watcher.spec?.selector?.matchLabels,
      ports: [{ name: "metrics", port: METRICS_PORT, targetPort: PORT_NAME, protocol: "TCP" }],
    } as Doc["spec"],
  };
  return [
    ...docs.filter(d => !(d.kind === "Service" && d.metadata?.name === service.metadata?.name)),
    service,
  ];
}

/**
 * The same exposure in the Helm chart Pepr generates: the watcher template gets the named port
 * (a line inserted after Pepr's own port, so the rest of its templating stays as it is), the
 * chart's default watcher liveness probe becomes the /healthz above, and a Service template
 * selects the watcher. Idempotent; returns false when the chart has no watcher template.
 */
export function exposeMetricsInChart(chartDir: string): boolean {
  const deployment = join(chartDir, "templates", "watcher-deployment.yaml");
  const values = join(chartDir, "values.yaml");
  if (!existsSync(deployment) || !existsSync(values)) return false;

  const template = readFileSync(deployment, "utf8");
  if (!template.includes(PORT_NAME)) {
    const withPort = template.replace(
      /^(\s*)- containerPort: 3000$/m,
      (line, indent: string) =>
        `${line}\n${indent}- name: ${PORT_NAME}\n${indent}  containerPort: ${METRICS_PORT}\n${indent}  protocol: TCP`,
    );
    if (withPort === template) throw new Error(`${deployment}: no "- containerPort: 3000" line`);
    writeFileSync(deployment, withPort);
  }

  const doc = parseDocument(readFileSync(values, "utf8"));
  doc.setIn(["watcher", "livenessProbe"], doc.createNode(LIVENESS_PROBE));
  writeFileSync(values, doc.toString({ lineWidth: 0 }));

  const labels = Object.entries(SERVICE_LABELS)
    .map(([k, v]) => `    ${k}: ${v}`)
    .join("\n");
  writeFileSync(
    join(chartDir, "templates", "watcher-metrics-service.yaml"),
    `{{- if .Values.watcher.enabled }}
# CubePod's /metrics and /healthz (plain HTTP on :${METRICS_PORT}), for a ServiceMonitor to select.
apiVersion: v1
kind: Service
metadata:
  name: {{ .Values.uuid }}-watcher-metrics
  namespace: pepr-system
  labels:
${labels}
spec:
  selector:
    app: {{ .Values.uuid }}-watcher
    pepr.dev/controller: watcher
  ports:
    - name: metrics
      port: ${METRICS_PORT}
      targetPort: ${PORT_NAME}
      protocol: TCP
{{- end }}
`,
  );
  return true;
}
