import { ApiError, sandboxIdOf } from "../e2b";
import type { SandboxMetricsApi } from "./sandbox-metrics";
import type { SandboxesApi } from "./sandboxes";
import type { SnapshotsApi } from "./snapshots";

/** What a handler answers: a status and a JSON body (none for 204), and extra headers. */
export type Answer = { status: number; body?: unknown; headers?: Record<string, string> };

/** E2B's control API over PodBoxes, by resource, each over one shared context (./context.ts). */
export type ControlApi = {
  sandboxes: SandboxesApi;
  snapshots: SnapshotsApi;
  metrics: SandboxMetricsApi;
};

/** A call as its handler gets it. */
export type Call = {
  /** The namespace the request's API key names: the only one the call acts in. */
  ns: string;
  /** The path's `{id}` (a sandbox's, `<id>-<clientID>` read as `<id>`) or `{template}`; else "". */
  id: string;
  body: unknown;
  query: URLSearchParams;
  /** Called under `/v2`. */
  v2: boolean;
};

type Route = {
  method: "GET" | "POST" | "PUT" | "DELETE";
  /** Served under `/v2` too when under `/sandboxes`. */
  path: string;
  /** What `cubepod_gateway_requests_total` and the request durations count its calls under. */
  name: string;
  handle(api: ControlApi, call: Call): Answer | Promise<Answer>;
};

const row = (
  method: Route["method"],
  path: string,
  name: string,
  handle: Route["handle"],
): Route => ({ method, path, name, handle });

const segmentsOf = (path: string) => path.split("/").filter(Boolean);

/**
 * E2B's control API, one row per call. Where two paths fit a request, the first row's wins
 * (`/sandboxes/metrics` names many sandboxes, not one called "metrics"); of a path's rows, the
 * first names the calls none answers.
 */
export const ROUTES: readonly Route[] = [
  row("GET", "/sandboxes", "list", (a, c) => a.sandboxes.list(c.ns, c.query, c.v2)),
  row("POST", "/sandboxes", "create", (a, c) => a.sandboxes.create(c.ns, c.body)),
  row("GET", "/sandboxes/metrics", "metrics", (a, c) => a.metrics.ofSandboxes(c.ns, c.query)),
  row("GET", "/sandboxes/{id}", "info", (a, c) => a.sandboxes.info(c.ns, c.id)),
  row("DELETE", "/sandboxes/{id}", "kill", (a, c) => a.sandboxes.kill(c.ns, c.id)),
  row("POST", "/sandboxes/{id}/connect", "connect", (a, c) =>
    a.sandboxes.connect(c.ns, c.id, c.body),
  ),
  row("POST", "/sandboxes/{id}/resume", "resume", (a, c) =>
    a.sandboxes.connect(c.ns, c.id, c.body),
  ),
  row("POST", "/sandboxes/{id}/pause", "pause", (a, c) => a.sandboxes.pause(c.ns, c.id)),
  row("POST", "/sandboxes/{id}/timeout", "timeout", (a, c) =>
    a.sandboxes.setTimeout(c.ns, c.id, c.body),
  ),
  row("GET", "/sandboxes/{id}/metrics", "metrics", (a, c) =>
    a.metrics.ofSandbox(c.ns, c.id, c.query),
  ),
  row("PUT", "/sandboxes/{id}/network", "network", (a, c) =>
    a.sandboxes.updateNetwork(c.ns, c.id, c.body),
  ),
  row("POST", "/sandboxes/{id}/fork", "fork", (a, c) => a.sandboxes.fork(c.ns, c.id, c.body)),
  row("POST", "/sandboxes/{id}/snapshots", "snapshots", (a, c) =>
    a.snapshots.create(c.ns, c.id, c.body),
  ),
  // Snapshots: E2B lists them under /snapshots and deletes them as templates.
  row("GET", "/snapshots", "snapshots", (a, c) => a.snapshots.list(c.ns, c.query)),
  row("DELETE", "/templates/{template}", "delete-template", (a, c) =>
    a.snapshots.delete(c.ns, c.id),
  ),
];

/** A request's place in the table, found from its method and path alone. */
export type Found = {
  /** The row that answers it; none for a path under `/sandboxes` that no row answers. */
  route?: Route;
  name: string;
  /** The path's `{id}`, read as a sandbox's ID, or its `{template}` as sent; "" when it has none. */
  id: string;
  v2: boolean;
  /** The 400 of a path whose `{id}` is no sandbox ID, answered once the key is checked. */
  invalid?: ApiError;
};

/**
 * The route of a request; undefined when it is no API path, answered 404 before its key is read.
 * Under `/sandboxes` (to an action's depth) a path is the control API's even when no row answers
 * it: its key and its ID are checked before its 404, and it is counted as `unknown`.
 */
export function findRoute(method: string, pathname: string): Found | undefined {
  const parts = segmentsOf(pathname);
  const v2 = parts[0] === "v2";
  if (v2) parts.shift();
  const sandboxes = parts[0] === "sandboxes";
  if (v2 && !sandboxes) return undefined;
  const fits = (r: Route) => {
    const segments = segmentsOf(r.path);
    return (
      segments.length === parts.length &&
      segments.every((s, i) => s.startsWith("{") || s === parts[i])
    );
  };
  const path = ROUTES.find(fits)?.path;
  const rows = ROUTES.filter(r => r.path === path);
  const route = rows.find(r => r.method === method);
  if (!route && !(sandboxes && parts.length <= 3)) return undefined;
  const segments = segmentsOf(path ?? "/sandboxes/{id}/{action}");
  // Under `/sandboxes` the second segment is read as the `{id}` of the path's row, and refused
  // unless it is a sandbox's ID.
  const raw = sandboxes ? parts[1] : undefined;
  const id = raw !== undefined && segments[1] === "{id}" ? sandboxIdOf(raw) : undefined;
  const invalid =
    raw !== undefined && segments[1] === "{id}" && !id
      ? new ApiError(400, `invalid sandbox ID ${JSON.stringify(raw)}: expected [a-z0-9]+`)
      : undefined;
  // A path no row knows is counted under one name: a client's made-up actions would otherwise
  // each add a series to the gateway's metrics.
  const name = route?.name ?? rows[0]?.name ?? "unknown";
  return { route, name, id: id ?? parts[segments.indexOf("{template}")] ?? "", v2, invalid };
}
