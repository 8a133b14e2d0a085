/** The operator's metrics and health endpoint (CEP-0008), plain HTTP, served by the watcher. */
export const METRICS_PORT = 8081;

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
    ...(container.ports ?? []).filter(p => (p as { name?: string }).name !== "cubepod-metrics"),
    { name: "cubepod-metrics", containerPort: METRICS_PORT, protocol: "TCP" },
  ];
  container.livenessProbe = {
    httpGet: { path: "/healthz", port: "cubepod-metrics", scheme: "HTTP" },
    initialDelaySeconds: 30,
    periodSeconds: 15,
    failureThreshold: 4,
  };
  const service: Doc & Record<string, unknown> = {
    apiVersion: "v1",
    kind: "Service",
    metadata: {
      name: `${watcherName}-metrics`,
      namespace: watcher.metadata?.namespace,
      labels: { "app.kubernetes.io/name": "cubepod", "app.kubernetes.io/component": "metrics" },
    },
    spec: {
      selector: watcher.spec?.selector?.matchLabels,
      ports: [
        { name: "metrics", port: METRICS_PORT, targetPort: "cubepod-metrics", protocol: "TCP" },
      ],
    } as Doc["spec"],
  };
  return [
    ...docs.filter(d => !(d.kind === "Service" && d.metadata?.name === service.metadata?.name)),
    service,
  ];
}
