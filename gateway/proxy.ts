import { Agent, IncomingHttpHeaders, IncomingMessage, request, ServerResponse } from "node:http";
import { connect, Socket } from "node:net";
import type { PodBox } from "../capabilities/api/kinds";
import type { ApiClient } from "../capabilities/client/api-client";
import { paths } from "../capabilities/client/paths";
import { kubeTime } from "../capabilities/kit/conditions";
import { ANNOTATION_LAST_ACTIVITY } from "../capabilities/reaper/activity";
import type { GatewayConfig } from "./config";
import { autoResumes, proxiedConnections, requestDuration } from "./metrics";
import { DEFAULT_ENVD_PORT } from "../capabilities/api/common";
import { accessToken, ended, endpointOf, resumesOnTraffic, sandboxIdOf } from "./e2b";
import type { SandboxIndex } from "./sandboxes";

/** Paths of the daemon's port that only the control plane may call (E2B's list). */
const CONTROL_PATHS = [
  "/init",
  "/freeze",
  "/unfreeze",
  "/fsfreeze",
  "/fsthaw",
  "/collapse",
  "/upgrade",
];
/** Activity is written to a box at most this often, however busy its traffic. */
const ACTIVITY_EVERY_MS = 5000;
/** Headers of one connection, never forwarded (RFC 9110, 7.6.1). */
const HOP_BY_HOP = ["connection", "keep-alive", "proxy-connection", "te", "trailer", "upgrade"];

/** Where a request goes: a sandbox and a port of it. */
export type Route = { id: string; port: number };
/** A request that names a sandbox badly: the status and message to answer. */
export type RouteError = { status: number; message: string };

/**
 * The sandbox a request is for, from the `E2b-Sandbox-Id` and `E2b-Sandbox-Port` headers, else
 * from a Host `<port>-<id>.<domain>`; undefined for a request to the control API. Nothing else of
 * the request is used: the address is always the box's own.
 */
export function routeOf(
  headers: IncomingHttpHeaders,
  domain: string,
): Route | RouteError | undefined {
  const idHeader = headers["e2b-sandbox-id"];
  const portHeader = headers["e2b-sandbox-port"];
  if (idHeader !== undefined || portHeader !== undefined) {
    if (typeof idHeader !== "string" || typeof portHeader !== "string") {
      return {
        status: 400,
        message: "E2b-Sandbox-Id and E2b-Sandbox-Port go together: one is missing",
      };
    }
    return route(idHeader, portHeader);
  }
  const host = (headers.host ?? "").replace(/:\d+$/, "").toLowerCase();
  if (!host.endsWith(`.${domain}`)) return undefined;
  const label = host.slice(0, -domain.length - 1);
  const m = /^(\d+)-([a-z0-9]+)$/.exec(label);
  if (!m) return { status: 400, message: `Host ${host}: expected <port>-<sandbox ID>.${domain}` };
  return route(m[2], m[1]);
}

function route(rawId: string, rawPort: string): Route | RouteError {
  const id = sandboxIdOf(rawId);
  if (!id) return { status: 400, message: `invalid sandbox ID ${JSON.stringify(rawId)}` };
  const port = /^\d{1,5}$/.test(rawPort) ? Number(rawPort) : NaN;
  if (!(port >= 1 && port <= 65535)) {
    return { status: 400, message: `invalid sandbox port ${JSON.stringify(rawPort)}` };
  }
  return { id, port };
}

export const sendJson = (res: ServerResponse, status: number, body: unknown) => {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    "Content-Type": "application/json; charset=utf-8",
    "Content-Length": Buffer.byteLength(text),
  });
  res.end(text);
};

/**
 * Live routing to sandboxes: each request (and WebSocket) is streamed, both ways and unbuffered,
 * to `http://<podIP>:<port>` of the box the route names. The daemon's port takes the sandbox's
 * access token (`X-Access-Token`), checked here, except `GET /health`; its control paths are not
 * reachable from outside. Traffic is recorded as the box's activity.
 */
export class SandboxProxy {
  readonly #agent = new Agent({ keepAlive: true, maxSockets: 256 });
  readonly #lastActivity = new Map<string, number>();

  /**
   * @param resume resumes a paused sandbox and resolves once it serves (ControlApi.resume)
   */
  constructor(
    private readonly boxes: SandboxIndex,
    private readonly client: ApiClient,
    private readonly config: GatewayConfig,
    private readonly resume: (namespace: string, id: string) => Promise<unknown>,
  ) {}

  /** The box and address a request goes to, or the error to answer. */
  resolve(
    route: Route,
    method: string,
    path: string,
    headers: IncomingHttpHeaders,
  ): { box: PodBox; ip: string } | { sleeping: PodBox } | RouteError {
    const notFound = {
      status: 502,
      message: "The sandbox was not found",
    };
    const live = this.boxes
      .named(route.id)
      .map(box => ({ box, at: endpointOf(box) }))
      .filter(c => c.at !== undefined)
      .sort((a, b) =>
        String(a.box.metadata?.creationTimestamp).localeCompare(
          String(b.box.metadata?.creationTimestamp),
        ),
      );
    if (live.length === 0) return this.#sleeping(route, headers) ?? notFound;
    const envd = live[0].at!.envdPort === route.port;
    if (!envd) return { box: live[0].box, ip: live[0].at!.ip };
    const pathname = path.split("?")[0];
    if (CONTROL_PATHS.includes(pathname)) {
      return { status: 404, message: `${pathname} is reserved for the CubePod control plane` };
    }
    if (method === "GET" && pathname === "/health") return { box: live[0].box, ip: live[0].at!.ip };
    const token = headers["x-access-token"];
    const match = live.find(c => token === accessToken(this.config.tokenKey, c.box));
    if (!match)
      return { status: 401, message: "missing or invalid X-Access-Token for this sandbox" };
    return { box: match.box, ip: match.at!.ip };
  }

  /**
   * A paused sandbox created with `autoResume` that this traffic may wake: on the daemon's port
   * only with its access token (so that no one else can), on a user's port as E2B does.
   */
  #sleeping(route: Route, headers: IncomingHttpHeaders): { sleeping: PodBox } | undefined {
    const token = headers["x-access-token"];
    const candidates = this.boxes
      .named(route.id)
      .filter(b => !ended(b) && resumesOnTraffic(b))
      .filter(b =>
        route.port === DEFAULT_ENVD_PORT || token !== undefined
          ? token === accessToken(this.config.tokenKey, b)
          : true,
      );
    return candidates.length > 0 ? { sleeping: candidates[0] } : undefined;
  }

  /** Resumes the sandbox, then serves the request as if it had been running. */
  #wake(box: PodBox, fail: (message: string) => void, then: () => void): void {
    autoResumes.inc();
    this.resume(box.metadata!.namespace!, box.metadata!.name!).then(then, e =>
      fail(`The sandbox could not be resumed: ${e instanceof Error ? e.message : String(e)}`),
    );
  }

  handle(req: IncomingMessage, res: ServerResponse, route: Route, woken = false): void {
    const target = this.resolve(route, req.method ?? "GET", req.url ?? "/", req.headers);
    if ("sleeping" in target && !woken) {
      const fail = (message: string) =>
        sendJson(res, 502, { sandboxId: route.id, message, code: 502 });
      return this.#wake(target.sleeping, fail, () => this.handle(req, res, route, true));
    }
    if ("sleeping" in target) {
      sendJson(res, 502, { sandboxId: route.id, message: "The sandbox was not found", code: 502 });
      req.resume();
      return;
    }
    if ("status" in target) {
      sendJson(res, target.status, {
        sandboxId: route.id,
        message: target.message,
        code: target.status,
      });
      req.resume();
      return;
    }
    this.#recordActivity(target.box);
    const started = performance.now();
    proxiedConnections.inc();
    res.once("close", () => proxiedConnections.dec());
    const upstream = request({
      host: target.ip,
      port: route.port,
      method: req.method,
      path: req.url,
      headers: forwardable(req.headers),
      agent: this.#agent,
    });
    req.pipe(upstream);
    upstream.on("response", r => {
      requestDuration.observe({ route: "proxy" }, (performance.now() - started) / 1000);
      res.writeHead(r.statusCode ?? 502, forwardable(r.headers));
      r.pipe(res);
      // A stream that is quiet at first still gets its headers now; an answer whose body is
      // already here goes out with them in one write.
      setImmediate(() => {
        if (!res.headersSent && !res.destroyed) res.flushHeaders();
      });
    });
    upstream.on("error", () => {
      if (res.headersSent) return void res.destroy();
      sendJson(res, 502, {
        sandboxId: route.id,
        message: "The sandbox is running but port is not open",
        port: route.port,
        code: 502,
      });
    });
    res.on("close", () => {
      if (!res.writableFinished) upstream.destroy();
    });
  }

  /** A WebSocket (or any Upgrade): the raw bytes both ways once the request head is passed on. */
  upgrade(req: IncomingMessage, socket: Socket, head: Buffer, route: Route, woken = false): void {
    const target = this.resolve(route, req.method ?? "GET", req.url ?? "/", req.headers);
    if ("sleeping" in target && !woken) {
      const again = () => this.upgrade(req, socket, head, route, true);
      return this.#wake(target.sleeping, () => socket.destroy(), again);
    }
    if ("sleeping" in target || "status" in target) {
      const status = "status" in target ? target.status : 502;
      const message = "status" in target ? target.message : "The sandbox was not found";
      const body = JSON.stringify({ sandboxId: route.id, message, code: status });
      socket.end(
        `HTTP/1.1 ${status} Error\r\nContent-Type: application/json\r\n` +
          `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
      );
      return;
    }
    this.#recordActivity(target.box);
    proxiedConnections.inc();
    socket.once("close", () => proxiedConnections.dec());
    const upstream = connect(route.port, target.ip, () => {
      const lines = [`${req.method} ${req.url} HTTP/1.1`];
      for (let i = 0; i < req.rawHeaders.length; i += 2) {
        lines.push(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}`);
      }
      upstream.write(`${lines.join("\r\n")}\r\n\r\n`);
      if (head.length > 0) upstream.write(head);
      upstream.pipe(socket);
      socket.pipe(upstream);
    });
    upstream.on("error", () => socket.destroy());
    socket.on("error", () => upstream.destroy());
  }

  #recordActivity(box: PodBox): void {
    const key = `${box.metadata?.namespace}/${box.metadata?.name}`;
    const now = Date.now();
    if (now - (this.#lastActivity.get(key) ?? 0) < ACTIVITY_EVERY_MS) return;
    this.#lastActivity.set(key, now);
    void this.client
      .mergePatch(paths.podBoxes(box.metadata!.namespace!, box.metadata!.name!), {
        metadata: { annotations: { [ANNOTATION_LAST_ACTIVITY]: kubeTime(new Date(now)) } },
      })
      .catch(() => this.#lastActivity.delete(key));
  }

  close(): void {
    this.#agent.destroy();
  }
}

function forwardable(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  const out = { ...headers };
  for (const h of HOP_BY_HOP) delete out[h];
  return out;
}
