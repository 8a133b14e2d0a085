import { createServer, IncomingMessage, Server, ServerResponse } from "node:http";
import { createServer as createTlsServer, type Server as TlsServer } from "node:https";
import type { Socket } from "node:net";
import type { GatewayConfig } from "./config";
import { findRoute, type Answer, type ControlApi } from "./control/routes";
import { ApiError } from "./e2b";
import { internalError } from "./internal-errors";
import type { KeyIndex } from "./keys";
import { droppedConnections, requestDuration, requests } from "./metrics";
import { routeOf, sendJson, type SandboxProxy } from "./proxy";
import { retryAfterSeconds, type TokenBuckets } from "./rate-limit";

/** What a refused call is answered: `{code, message}` as JSON, and these headers. */
type Refusal = { code: number; message: string; headers?: Record<string, string> };

/** A control call let through by its headers: its tenant's namespace and its route. */
type Admitted = {
  url: URL;
  method: string;
  found: NonNullable<ReturnType<typeof findRoute>>;
  ns: string;
};

/** How much of a refused call's body is read and dropped before the connection is cut. */
const DRAIN_LIMIT = 64 * 1024 * 1024;
/**
 * How often the server looks for requests whose headers are late: the headers timeout holds to
 * within this.
 */
const TIMEOUT_CHECK_MS = 1000;

/**
 * The gateway's HTTP server (HTTPS with `tls`): a request that names a sandbox (headers or Host)
 * is proxied to it; any other is E2B's control API, authenticated by the `X-API-Key` of a
 * tenant's namespace. Every error is JSON `{code, message}` with `code` the HTTP status, as the
 * SDKs read it.
 *
 * Its limits: connections per port (`maxConnections`), the time a request's headers and a
 * control call's body may take, each tenant's rate of control calls (`rateLimit`: one set of
 * buckets for every port, as a tenant's calls may come to either). A proxied request has no
 * time limit past its headers: a stream may be quiet for minutes and last for hours.
 */
export function gatewayServer(
  config: GatewayConfig,
  keys: KeyIndex,
  control: ControlApi,
  proxy: SandboxProxy,
  rateLimit: TokenBuckets | undefined,
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
    const admitted = admit(req);
    if ("refusal" in admitted) {
      if (admitted.name) name = admitted.name;
      refuse(req, res, admitted.refusal);
      // Once answered: before, Node would resume the connection itself if the call was pipelined.
      const holdMs = admitted.holdMs;
      if (holdMs) res.once("finish", () => hold(req.socket, holdMs));
      return;
    }
    void serveControl(req, res, admitted, n => (name = n)).catch(e =>
      refuse(req, res, internalError(e, { method: req.method ?? "", path: req.url ?? "" })),
    );
  };

  /**
   * Answers a refused call, before or after its body was read: a body not yet read is drained
   * (cut short or too large, the connection ends with the answer).
   */
  const refuse = (req: IncomingMessage, res: ServerResponse, refusal: Refusal) => {
    if (!req.complete) {
      if (refusal.code === 408 || refusal.code === 413) res.setHeader("Connection", "close");
      discardBody(req, config.bodyTimeoutMs);
    }
    if (res.headersSent) return;
    for (const [h, v] of Object.entries(refusal.headers ?? {})) res.setHeader(h, v);
    sendJson(res, refusal.code, { code: refusal.code, message: refusal.message });
  };

  /**
   * Whether a control call may go on, decided from its headers alone and without an exception
   * (whose stack trace would cost a flood's every refusal): its route, its tenant by API key,
   * its tenant's rate. A tenant over its rate costs no more than its headers.
   */
  const admit = (
    req: IncomingMessage,
  ): Admitted | { refusal: Refusal; name?: string; holdMs?: number } => {
    const url = new URL(req.url ?? "/", "http://gateway");
    const method = req.method ?? "GET";
    const found = findRoute(method, url.pathname);
    if (!found)
      return { refusal: { code: 404, message: `no such API path: ${method} ${url.pathname}` } };
    const key = req.headers["x-api-key"];
    const ns = typeof key === "string" ? keys.namespaceOf(key) : undefined;
    if (!ns) {
      const message = key ? "invalid API key" : "missing API key (header X-API-Key)";
      return { refusal: { code: 401, message } };
    }
    const wait = rateLimit?.take(ns) ?? 0;
    if (wait > 0) {
      const seconds = retryAfterSeconds(wait);
      const message =
        `rate limit exceeded: at most ${rateLimit!.perSecond} API calls per second per ` +
        `namespace (bursts of ${rateLimit!.burst}); retry in ${seconds} s`;
      return {
        name: found.name,
        refusal: { code: 429, message, headers: { "Retry-After": String(seconds) } },
        holdMs: seconds * 1000,
      };
    }
    return { url, method, found, ns };
  };

  const options = {
    headersTimeout: config.headersTimeoutMs,
    connectionsCheckingInterval: TIMEOUT_CHECK_MS,
  };
  const server = tls
    ? createTlsServer({ ...options, cert: tls.cert, key: tls.key }, handle)
    : createServer(options, handle);
  // Past the cap a new connection is closed at once, before it costs more than its socket.
  server.maxConnections = config.maxConnections;
  server.on("drop", () => droppedConnections.inc());
  server.on("upgrade", (req, socket, head) => {
    const route = routeOf(req.headers, config.domain);
    if (!route || "status" in route) return void socket.destroy();
    proxy.upgrade(req, socket as import("node:net").Socket, head, route);
  });
  // Proxied streams may be quiet for minutes (E2B's keep-alive events come every 50 s).
  server.requestTimeout = 0;
  server.keepAliveTimeout = 620_000;

  /** One admitted control API call; `named` tells the metrics which route it is. */
  async function serveControl(
    req: IncomingMessage,
    res: ServerResponse,
    { url, method, found, ns }: Admitted,
    named: (route: string) => void,
  ): Promise<void> {
    const body = await readJson(req, config.maxBodyBytes, config.bodyTimeoutMs);
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
 * The request body as JSON (undefined when empty); 413 beyond `max` bytes, 408 when it has not
 * all come within `timeoutMs`, 400 when not JSON. The body is read with events, not an async
 * iterator, whose early exit would destroy the socket before the answer is written.
 */
function readJson(req: IncomingMessage, max: number, timeoutMs: number): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const stop = (error: ApiError) => {
      req.off("data", onData).off("end", onEnd);
      clearTimeout(timer);
      reject(error);
    };
    const timer = setTimeout(
      () => stop(new ApiError(408, `request body not received within ${timeoutMs / 1000} s`)),
      timeoutMs,
    );
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= max) return void chunks.push(chunk);
      stop(new ApiError(413, `request body larger than ${max} bytes`));
    };
    const onEnd = () => {
      clearTimeout(timer);
      const text = Buffer.concat(chunks).toString("utf8").trim();
      if (!text) return resolve(undefined);
      try {
        resolve(JSON.parse(text));
      } catch {
        reject(new ApiError(400, "request body is not valid JSON"));
      }
    };
    req
      .on("data", onData)
      .on("end", onEnd)
      // The client went away: nothing to log, and no one to answer.
      .on("error", () => stop(new ApiError(400, "request body broke off")));
  });
}

/**
 * Reads nothing more from a connection for `ms`: one whose call was refused for its tenant's rate
 * is read again when its `Retry-After` has passed. A client that waits as told meets no delay;
 * one that sends at once, as a flood does, waits on its own connection, where its next call costs
 * the gateway nothing until then, so that a flood's rate is bounded by its connections (at most
 * the port's cap) and no longer by the gateway's CPU.
 */
function hold(socket: Socket, ms: number): void {
  socket.pause();
  const timer = setTimeout(() => socket.resume(), ms);
  socket.once("close", () => clearTimeout(timer));
}

/**
 * Reads and drops what is left of a refused call's body, so that the client reads the answer;
 * past `DRAIN_LIMIT` bytes, or `timeoutMs`, the connection is cut.
 */
function discardBody(req: IncomingMessage, timeoutMs: number): void {
  const socket = req.socket;
  let dropped = 0;
  const timer = setTimeout(() => socket.destroy(), timeoutMs);
  const done = () => clearTimeout(timer);
  req.once("end", done).once("close", done);
  req.on("data", (c: Buffer) => {
    dropped += c.length;
    if (dropped > DRAIN_LIMIT) socket.destroy();
  });
  req.resume();
}
