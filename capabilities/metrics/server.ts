import { createServer, Server } from "node:http";
import { collectDefaultMetrics, Registry } from "prom-client";
import { registry as moduleRegistry } from "./registry";

/** What /healthz reports: healthy, or why not. */
export type HealthCheck = () => Promise<{ ok: boolean; detail: string }>;

/**
 * Serves /metrics (Prometheus text) and /healthz over plain HTTP (CEP-0008), on the port and
 * address of the configuration. `before` fills the gauges read from caches at scrape time. The
 * module's registry unless another (the gateway's) is given.
 */
export function startMetricsServer(
  health: HealthCheck,
  before: () => void,
  port: number,
  host: string,
  registry: Registry = moduleRegistry,
): Server {
  // The process's own figures (resident memory, V8 heap, event-loop lag), as any operator has.
  collectDefaultMetrics({ register: registry });
  const server = createServer((req, res) => {
    if (req.url === "/metrics") {
      before();
      registry
        .metrics()
        .then(text => {
          res.writeHead(200, { "Content-Type": registry.contentType });
          res.end(text);
        })
        .catch(e => {
          res.writeHead(500);
          res.end(String(e));
        });
      return;
    }
    if (req.url === "/healthz") {
      void health().then(h => {
        res.writeHead(h.ok ? 200 : 503, { "Content-Type": "text/plain" });
        res.end(`${h.ok ? "ok" : "unhealthy"}: ${h.detail}\n`);
      });
      return;
    }
    res.writeHead(404);
    res.end();
  });
  server.listen(port, host);
  return server;
}
