import { createServer, IncomingMessage, Server, ServerResponse } from "node:http";
import { createServer as createTlsServer, type Server as TlsServer } from "node:https";
import type { GatewayConfig } from "./config";
import type { Answer, ControlApi } from "./control";
import { ApiError, sandboxIdOf } from "./e2b";
import type { KeyIndex } from "./keys";
import { requestDuration, requests } from "./metrics";
import { routeOf, sendJson, type SandboxProxy } from "./proxy";

/** How much of a refused (413) body is read and dropped before the connection is cut. */
const DRAIN_LIMIT = 64 * 1024 * 1024;

/**
 * The gateway's HTTP server (HTTPS with `tls`): a request that names a sandbox (headers or Host)
 * is proxied to it; any other is E2B's control API, authenticated by the `X-API-Key` of a
 * tenant's namespace. Every error is JSON `{code, message}` with `code` the HTTP status, as the
 * SDKs read it.
 */
export function gatewayServer(
  config: GatewayConfig,
  keys: KeyIndex,
  control: ControlApi,
  proxy: SandboxProxy,
  tls?: { cert: string; key: string },
): Server | TlsServer {
  const handle = (req: IncomingMessage, res: ServerResponse) => {
    const started = performance.now();
    const route = routeOf(req.headers, config.domain);
    let name = route ? "proxy" : "invalid";
    res.once("finish", () => {
      requests.inc({ route: name, code: String(res.statusCode) });
      if (name !== "proxy")
        requestDuration.observe({ route: name }, (performance.now() - started) / 1000);
    });
    if (route && "status" in route) {
      req.resume();
      return sendJson(res, route.status, { code: route.status, message: route.message });
    }
    if (route) return proxy.handle(req, res, route);
    void serveControl(req, res, n => (name = n)).catch(e => {
      const err = e instanceof ApiError ? e : unexpected(e);
      if (err.code === 413) {
        // The rest of the body is read and dropped, so that the client reads the answer, up to
        // a bound past which the connection is cut; the connection ends with the answer.
        res.setHeader("Connection", "close");
        let dropped = 0;
        const socket = req.socket;
        req.on("data", (c: Buffer) => {
          dropped += c.length;
          if (dropped > DRAIN_LIMIT) socket?.destroy();
        });
        req.resume();
      }
      if (!res.headersSent) sendJson(res, err.code, err.body());
    });
  };
  const server = tls
    ? createTlsServer({ cert: tls.cert, key: tls.key }, handle)
    : createServer(handle);
  server.on("upgrade", (req, socket, head) => {
    const route = routeOf(req.headers, config.domain);
    if (!route || "status" in route) return void socket.destroy();
    proxy.upgrade(req, socket as import("node:net").Socket, head, route);
  });
  // Proxied streams may be quiet for minutes (E2B's keep-alive events come every 50 s).
  server.requestTimeout = 0;
  server.keepAliveTimeout = 620_000;

  /** One control API call; `named` tells the metrics which route it is. */
  async function serveControl(
    req: IncomingMessage,
    res: ServerResponse,
    named: (route: string) => void,
  ): Promise<void> {
    const url = new URL(req.url ?? "/", "http://gateway");
    const method = req.method ?? "GET";
    const parts = url.pathname.split("/").filter(Boolean);
    const v2 = parts[0] === "v2";
    if (v2) parts.shift();
    // Snapshots: E2B lists them under /snapshots and deletes them as templates.
    const snapshots = !v2 && parts[0] === "snapshots" && parts.length === 1 && method === "GET";
    const template = !v2 && parts[0] === "templates" && parts.length === 2 && method === "DELETE";
    if ((parts[0] !== "sandboxes" || parts.length > 3) && !snapshots && !template) {
      req.resume();
      throw new ApiError(404, `no such API path: ${method} ${url.pathname}`);
    }
    const key = req.headers["x-api-key"];
    const ns = typeof key === "string" ? keys.namespaceOf(key) : undefined;
    if (!ns) {
      req.resume();
      throw new ApiError(401, key ? "invalid API key" : "missing API key (header X-API-Key)");
    }
    const body = await readJson(req, config.maxBodyBytes);
    if (snapshots || template) {
      named(snapshots ? "snapshots" : "delete-template");
      const answer = snapshots
        ? control.listSnapshots(ns, url.searchParams)
        : await control.deleteTemplate(ns, parts[1]);
      return send(res, answer);
    }
    // `/sandboxes/metrics` names many sandboxes, not one called "metrics".
    const many = parts[1] === "metrics" && parts.length === 2;
    const id = parts[1] === undefined || many ? undefined : sandboxIdOf(parts[1]);
    if (parts[1] !== undefined && !id) {
      throw new ApiError(400, `invalid sandbox ID ${JSON.stringify(parts[1])}: expected [a-z0-9]+`);
    }
    const action = parts[2];
    named(
      id
        ? (action ?? (method === "DELETE" ? "kill" : "info"))
        : many
          ? "metrics"
          : method === "POST"
            ? "create"
            : "list",
    );
    let answer: Answer;
    if (many && method === "GET") answer = await control.metricsOf(ns, url.searchParams);
    else if (!id && method === "POST") answer = await control.create(ns, body);
    else if (!id && method === "GET") answer = control.list(ns, url.searchParams, v2);
    else if (id && !action && method === "GET") answer = control.info(ns, id);
    else if (id && !action && method === "DELETE") answer = await control.kill(ns, id);
    else if (id && (action === "connect" || action === "resume") && method === "POST")
      answer = await control.connect(ns, id, body);
    else if (id && action === "pause" && method === "POST") answer = await control.pause(ns, id);
    else if (id && action === "timeout" && method === "POST")
      answer = await control.setTimeout(ns, id, body);
    else if (id && action === "metrics" && method === "GET")
      answer = await control.metrics(ns, id, url.searchParams);
    else if (id && action === "fork" && method === "POST")
      answer = await control.fork(ns, id, body);
    else if (id && action === "snapshots" && method === "POST")
      answer = await control.snapshot(ns, id, body);
    else throw new ApiError(404, `no such API path: ${method} ${url.pathname}`);
    send(res, answer);
  }

  return server;
}

function send(res: ServerResponse, answer: Answer): void {
  if (answer.status === 204) {
    res.writeHead(204, answer.headers);
    return void res.end();
  }
  res.setHeader("Content-Type", "application/json; charset=utf-8");
  for (const [h, v] of Object.entries(answer.headers ?? {})) res.setHeader(h, v);
  res.writeHead(answer.status);
  res.end(JSON.stringify(answer.body));
}

/**
 * The request body as JSON (undefined when empty); 413 beyond `max` bytes, 400 when not JSON. The
 * body is read with events, not an async iterator, whose early exit would destroy the socket
 * before the answer is written.
 */
function readJson(req: IncomingMessage, max: number): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= max) return void chunks.push(chunk);
      req.off("data", onData).off("end", onEnd);
      reject(new ApiError(413, `request body larger than ${max} bytes`));
    };
    const onEnd = () => {
      const text = Buffer.concat(chunks).toString("utf8").trim();
      if (!text) return resolve(undefined);
      try {
        resolve(JSON.parse(text));
      } catch {
        reject(new ApiError(400, "request body is not valid JSON"));
      }
    };
    req.on("data", onData).on("end", onEnd).on("error", reject);
  });
}

/** An error no rule expected (the API server's, a bug): logged, and answered as 500. */
function unexpected(e: unknown): ApiError {
  console.error(JSON.stringify({ level: "error", msg: "control API", error: String(e) }));
  return new ApiError(500, `internal error: ${e instanceof Error ? e.message : String(e)}`);
}
