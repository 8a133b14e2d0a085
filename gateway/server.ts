import { createServer, IncomingMessage, Server, ServerResponse } from "node:http";
import { createServer as createTlsServer, type Server as TlsServer } from "node:https";
import type { GatewayConfig } from "./config";
import { findRoute, type Answer, type ControlApi } from "./control/routes";
import { ApiError } from "./e2b";
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
    const found = findRoute(method, url.pathname);
    if (!found) {
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
    if (found.invalid) throw found.invalid;
    named(found.name);
    if (!found.route) throw new ApiError(404, `no such API path: ${method} ${url.pathname}`);
    const { id, v2 } = found;
    send(res, await found.route.handle(control, { ns, id, body, query: url.searchParams, v2 }));
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
