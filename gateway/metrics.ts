import { Counter, Gauge, Histogram, Registry } from "prom-client";

/** The gateway's own metrics, served on their own port (`CUBEPOD_GATEWAY_METRICS_PORT`). */
export const gatewayRegistry = new Registry();

/** From a proxied request's millisecond to a start's 30-second limit. */
const SECONDS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export const requests = new Counter({
  name: "cubepod_gateway_requests_total",
  help: "Requests answered, by route (a control API call, or proxy) and HTTP status",
  labelNames: ["route", "code"] as const,
  registers: [gatewayRegistry],
});

export const requestDuration = new Histogram({
  name: "cubepod_gateway_request_duration_seconds",
  help: "Time to the answer's headers, by route (for proxy: the sandbox's own time included)",
  labelNames: ["route"] as const,
  buckets: SECONDS,
  registers: [gatewayRegistry],
});

export const proxiedConnections = new Gauge({
  name: "cubepod_gateway_proxied_connections",
  help: "Requests and WebSockets being streamed to sandboxes now",
  registers: [gatewayRegistry],
});

export const droppedConnections = new Counter({
  name: "cubepod_gateway_dropped_connections_total",
  help: "Connections closed on arrival: the port held CUBEPOD_GATEWAY_MAX_CONNECTIONS already",
  registers: [gatewayRegistry],
});

export const autoResumes = new Counter({
  name: "cubepod_gateway_auto_resumes_total",
  help: "Paused sandboxes resumed by their own traffic (created with autoResume)",
  registers: [gatewayRegistry],
});

/**
 * Where a sandbox's start (a create, a fork, a resume) spends its time, by step: `write` (the
 * box's write to the API server), `run` (from that write until the watch shows the box running:
 * the operator's claim or start), `init` (the daemon's `/init`, waiting for `GET /health` when it
 * does not answer yet). A step is observed once it succeeds; failures show in the requests' codes.
 */
export const sandboxStart = new Histogram({
  name: "cubepod_gateway_sandbox_start_seconds",
  help: "Time a sandbox's start spends in each step: write, run, init",
  labelNames: ["step"] as const,
  buckets: SECONDS,
  registers: [gatewayRegistry],
});
