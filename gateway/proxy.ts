import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from "node:http";
import { connect, Socket } from "node:net";
import { Agent, type Dispatcher } from "undici";
import type { PodBox } from "../capabilities/api/kinds";
import type { ApiClient } from "../capabilities/client/api-client";
import { paths } from "../capabilities/client/paths";
import { kubeTime } from "../capabilities/kit/conditions";
import { ANNOTATION_LAST_ACTIVITY } from "../capabilities/reaper/activity";
import type { GatewayConfig } from "./config";
import { autoResumes, proxiedConnections, requestDuration } from "./metrics";
import { DEFAULT_ENVD_PORT } from "../capabilities/api/common";
import {
  ended,
  endpointOf,
  expired,
  resumesOnTraffic,
  sameToken,
  sandboxIdOf,
  TRAFFIC_TOKEN_HEADER,
} from "./e2b";
import { internalError } from "./internal-errors";
import { CONTROL_HEADER } from "./podd-control";
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
/** How many boxes' last activity writes are remembered before the old ones are forgotten. */
const PRUNE_FROM = 4096;
/**
 * Headers of one connection, never forwarded (RFC 9110, 7.6.1); and the request's framing and
 * `Expect`, which the gateway's own server has answered and its client sets anew.
 */
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "te",
  "trailer",
  "upgrade",
  "transfer-encoding",
]);
/**
 * Never forwarded either: the daemon's credential, which only the gateway sets, and only on the
 * daemon's port (a user's port is the sandbox's own code, which must never see it).
 */
const NOT_FORWARDED = new Set([...HOP_BY_HOP, "expect", CONTROL_HEADER.toLowerCase()]);

/** Where a request goes: a sandbox and a port of it. */
export type Route = { id: string; port: number };
/**
 * A running box as a request needs it: where it listens, its access token, and the gateway's
 * credential for its daemon.
 */
type Live = {
  box: PodBox;
  ip: string;
  envdPort: number;
  token: string;
  /** The token its own ports take, when it serves no public traffic. */
  traffic: string | null;
  control: string;
};
/** A client's answer or socket, which the proxy may end. */
type Closable = { destroy(): void; once(event: "close", listener: () => void): unknown };
/** An open request or WebSocket, and the Pod it goes to. */
type OpenStream = { pod: string; stream: Closable };
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
  // E2B's SDKs call the control API at `api.<domain>` when given only the domain.
  if (label === "api") return undefined;
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

/** True when the request's query has a `signature`, as the SDKs' signed file URLs do. */
const signed = (path: string) =>
  new URLSearchParams(path.split("?")[1] ?? "").get("signature") !== null;

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
  // Kept-alive connections to each Pod; no timeouts: a stream may be quiet for minutes, and an
  // answer's first byte may wait as long as the sandbox's program takes.
  readonly #agent = new Agent({ connections: 256, headersTimeout: 0, bodyTimeout: 0 });
  /** When each box's activity was last written, by UID. */
  readonly #lastActivity = new Map<string, number>();
  #pruneAt = PRUNE_FROM;
  /**
   * Each box's address and token, worked out once per version of it that the watch delivers
   * (a new version is a new object): a request then derives nothing.
   */
  readonly #live = new WeakMap<PodBox, Live | null>();
  /**
   * The open requests and WebSockets of each box (by UID), with the Pod each goes to: a sandbox
   * killed or paused ends its streams at once, as E2B's do, not whenever its Pod's teardown gets
   * to close them.
   */
  readonly #open = new Map<string, Set<OpenStream>>();

  /**
   * @param resume resumes a paused sandbox and resolves once it serves (SandboxStarter.resume)
   */
  constructor(
    private readonly boxes: SandboxIndex,
    private readonly client: ApiClient,
    private readonly config: GatewayConfig,
    private readonly resume: (namespace: string, id: string) => Promise<unknown>,
  ) {
    boxes.subscribe((box, deleted) => this.#cutStale(box, deleted));
  }

  /** How many requests and WebSockets are open to the box with that UID. */
  openTo(uid: string): number {
    return this.#open.get(uid)?.size ?? 0;
  }

  /** Ends the streams to any Pod of the box that no longer serves it. */
  #cutStale(box: PodBox, deleted: boolean): void {
    const open = this.#open.get(box.metadata?.uid ?? "");
    if (!open) return;
    const serving = !deleted && endpointOf(box) ? box.status?.podUID : undefined;
    // Each stream leaves the set as it closes.
    for (const o of open) if (o.pod !== serving) o.stream.destroy();
  }

  /** Keeps the stream, as one to the box's current Pod, until it closes. */
  #track(target: Live, stream: Closable): void {
    const uid = target.box.metadata?.uid ?? "";
    const open = this.#open.get(uid) ?? new Set<OpenStream>();
    this.#open.set(uid, open);
    const entry = { pod: target.box.status?.podUID ?? "", stream };
    open.add(entry);
    stream.once("close", () => {
      open.delete(entry);
      if (open.size === 0 && this.#open.get(uid) === open) this.#open.delete(uid);
    });
  }

  /**
   * The box and address a request goes to, or the error to answer: 429 when the box has
   * `maxSandboxConnections` streams open already (E2B's proxy too answers 429 to too many
   * connections), so that one sandbox's traffic cannot take every connection the gateway holds.
   */
  resolve(
    route: Route,
    method: string,
    path: string,
    headers: IncomingHttpHeaders,
  ): Live | { sleeping: PodBox } | RouteError {
    const chosen = this.#choose(route, method, path, headers);
    if (!("ip" in chosen)) return chosen;
    const max = this.config.maxSandboxConnections;
    if (this.openTo(chosen.box.metadata?.uid ?? "") < max) return chosen;
    return { status: 429, message: `too many connections to this sandbox: at most ${max} at once` };
  }

  #choose(
    route: Route,
    method: string,
    path: string,
    headers: IncomingHttpHeaders,
  ): Live | { sleeping: PodBox } | RouteError {
    const notFound = {
      status: 502,
      message: "The sandbox was not found",
    };
    const live: Live[] = [];
    for (const box of this.boxes.named(route.id)) {
      const l = this.#liveOf(box);
      // Worked out per version of the box, which its expiry does not change.
      if (l && !expired(box)) live.push(l);
    }
    if (live.length === 0) return this.#sleeping(route, headers) ?? notFound;
    if (live.length > 1) {
      live.sort((a, b) =>
        String(a.box.metadata?.creationTimestamp).localeCompare(
          String(b.box.metadata?.creationTimestamp),
        ),
      );
    }
    if (live[0].envdPort !== route.port) return this.#userPort(live[0], headers);
    const pathname = path.split("?")[0];
    if (CONTROL_PATHS.includes(pathname)) {
      return { status: 404, message: `${pathname} is reserved for the CubePod control plane` };
    }
    if (method === "GET" && pathname === "/health") return live[0];
    const token = headers["x-access-token"];
    // A signed URL (`downloadUrl`, `uploadUrl`) carries no token: the daemon checks its signature.
    if (token === undefined && pathname === "/files" && signed(path)) return live[0];
    const match = live.find(l => sameToken(token, l.token));
    if (!match)
      return { status: 401, message: "missing or invalid X-Access-Token for this sandbox" };
    return match;
  }

  /**
   * A sandbox's own port: open to anyone who knows its address, as E2B's, unless the sandbox
   * serves no public traffic; then only to requests with its traffic token (403 otherwise, with
   * E2B's message).
   */
  #userPort(live: Live, headers: IncomingHttpHeaders): Live | RouteError {
    if (live.traffic === null) return live;
    const given = headers[TRAFFIC_TOKEN_HEADER];
    if (sameToken(given, live.traffic)) return live;
    const message =
      given === undefined
        ? `Sandbox is secured with traffic access token. Token header '${TRAFFIC_TOKEN_HEADER}' is missing`
        : `Sandbox is secured with traffic access token. Provided token in header '${TRAFFIC_TOKEN_HEADER}' is invalid`;
    return { status: 403, message };
  }

  #liveOf(box: PodBox): Live | undefined {
    let live = this.#live.get(box);
    if (live === undefined) {
      const at = endpointOf(box);
      live = at
        ? {
            box,
            ...at,
            token: this.config.tokenKeys.accessToken(box),
            traffic: this.config.tokenKeys.tokens(box).traffic,
            control: this.config.tokenKeys.credential(box)!,
          }
        : null;
      this.#live.set(box, live);
    }
    return live ?? undefined;
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
          ? sameToken(token, this.config.tokenKeys.accessToken(b))
          : true,
      )
      // One serving no public traffic is woken only by a request it would serve.
      .filter(b => {
        const traffic = this.config.tokenKeys.tokens(b).traffic;
        return route.port === DEFAULT_ENVD_PORT || traffic === null
          ? true
          : sameToken(headers[TRAFFIC_TOKEN_HEADER], traffic);
      });
    return candidates.length > 0 ? { sleeping: candidates[0] } : undefined;
  }

  /** Resumes the sandbox, then serves the request as if it had been running. */
  #wake(box: PodBox, fail: (message: string) => void, then: () => void): void {
    autoResumes.inc();
    const { namespace, name } = box.metadata!;
    this.resume(namespace!, name!).then(then, e => {
      const error = internalError(e, {
        call: "auto-resume",
        namespace: namespace!,
        sandbox: name!,
      });
      fail(`The sandbox could not be resumed: ${error.message}`);
    });
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
    proxiedConnections.inc();
    const forward = new Forward(req, res, route);
    res.once("close", () => {
      proxiedConnections.dec();
      if (!res.writableFinished) forward.abort();
    });
    this.#track(target, res);
    const host = target.ip.includes(":") ? `[${target.ip}]` : target.ip;
    this.#agent.dispatch(
      {
        origin: `http://${host}:${route.port}`,
        path: req.url ?? "/",
        method: (req.method ?? "GET") as Dispatcher.HttpMethod,
        headers: forwardedRequestHeaders(
          withMaskedHost(req.rawHeaders, maskFor(target, route)),
          controlFor(target, route),
        ),
        body: hasBody(req.headers) ? req : null,
      },
      forward,
    );
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
    this.#track(target, socket);
    const upstream = connect(route.port, target.ip, () => {
      const lines = [`${req.method} ${req.url} HTTP/1.1`];
      const control = controlFor(target, route);
      if (control) lines.push(`${CONTROL_HEADER}: ${control}`);
      const raw = withMaskedHost(req.rawHeaders, maskFor(target, route));
      for (let i = 0; i < raw.length; i += 2) {
        if (raw[i].toLowerCase() === CONTROL_HEADER.toLowerCase()) continue;
        lines.push(`${raw[i]}: ${raw[i + 1]}`);
      }
      upstream.write(`${lines.join("\r\n")}\r\n\r\n`);
      if (head.length > 0) upstream.write(head);
      upstream.pipe(socket);
      socket.pipe(upstream);
    });
    upstream.on("error", () => socket.destroy());
    socket.on("error", () => upstream.destroy());
    socket.once("close", () => upstream.destroy());
  }

  #recordActivity(box: PodBox): void {
    const key = box.metadata!.uid!;
    const now = Date.now();
    if (now - (this.#lastActivity.get(key) ?? 0) < ACTIVITY_EVERY_MS) return;
    this.#lastActivity.set(key, now);
    // Boxes come and go: what is past the interval is forgotten, each time the map has doubled.
    if (this.#lastActivity.size > this.#pruneAt) {
      for (const [k, at] of this.#lastActivity) {
        if (now - at >= ACTIVITY_EVERY_MS) this.#lastActivity.delete(k);
      }
      this.#pruneAt = Math.max(PRUNE_FROM, 2 * this.#lastActivity.size);
    }
    void this.client
      .mergePatch(paths.podBoxes(box.metadata!.namespace!, box.metadata!.name!), {
        metadata: { annotations: { [ANNOTATION_LAST_ACTIVITY]: kubeTime(new Date(now)) } },
      })
      .catch(() => this.#lastActivity.delete(key));
  }

  close(): void {
    void this.#agent.destroy();
  }
}

/**
 * One proxied request's answer, streamed to the client as it comes: headers, then each chunk
 * (the Pod waits while the client is slow to read), then the end.
 */
class Forward implements Dispatcher.DispatchHandler {
  readonly #started = performance.now();
  #controller?: Dispatcher.DispatchController;
  #aborted = false;

  constructor(
    private readonly req: IncomingMessage,
    private readonly res: ServerResponse,
    private readonly route: Route,
  ) {}

  /** The client went away: the request to the Pod ends too. */
  abort(): void {
    this.#aborted = true;
    this.#controller?.abort(new Error("the client closed the connection"));
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.#controller = controller;
    if (this.#aborted) controller.abort(new Error("the client closed the connection"));
  }

  onResponseStart(
    controller: Dispatcher.DispatchController,
    status: number,
    headers: IncomingHttpHeaders,
  ): void {
    requestDuration.observe({ route: "proxy" }, (performance.now() - this.#started) / 1000);
    for (const h of HOP_BY_HOP) if (headers[h] !== undefined) delete headers[h];
    this.res.writeHead(status, headers);
    // An answer whose body is already here goes out with its headers in one write; a stream that
    // is quiet at first still gets its headers now.
    queueMicrotask(() => {
      if (!this.res.headersSent && !this.res.destroyed) this.res.flushHeaders();
    });
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.res.write(chunk)) return;
    controller.pause();
    this.res.once("drain", () => controller.resume());
  }

  onResponseEnd(): void {
    this.res.end();
  }

  onResponseError(): void {
    if (this.res.headersSent || this.#aborted) return void this.res.destroy();
    this.req.resume();
    sendJson(this.res, 502, {
      sandboxId: this.route.id,
      message: "The sandbox is running but port is not open",
      port: this.route.port,
      code: 502,
    });
  }
}

/** A request carries a body when it says so by its framing. */
function hasBody(headers: IncomingHttpHeaders): boolean {
  const length = headers["content-length"];
  return headers["transfer-encoding"] !== undefined || (length !== undefined && length !== "0");
}

/**
 * The Host a sandbox's own port is to see (its `maskRequestHost`, `${PORT}` replaced by the port);
 * undefined when it sees the request's own, and always on the daemon's port.
 */
function maskFor(target: Live, route: Route): string | undefined {
  const mask = target.box.spec?.network?.maskRequestHost;
  if (!mask || route.port === target.envdPort) return undefined;
  return mask.replaceAll("${PORT}", String(route.port));
}

/**
 * Raw headers (name, value, ...) with the Host replaced by `mask`, and the original sent as
 * X-Forwarded-Host, as E2B's proxy does; unchanged without a mask.
 */
export function withMaskedHost(raw: string[], mask: string | undefined): string[] {
  if (mask === undefined) return raw;
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i].toLowerCase();
    if (name === "x-forwarded-host") continue;
    if (name === "host") out.push("Host", mask, "X-Forwarded-Host", raw[i + 1]);
    else out.push(raw[i], raw[i + 1]);
  }
  return out;
}

/** The daemon's credential for a request to its port; undefined for a user's port. */
function controlFor(target: Live, route: Route): string | undefined {
  return route.port === target.envdPort ? target.control : undefined;
}

/**
 * The request's headers as received (name, value, ...), less those of the connection and any
 * credential the client sent; with the gateway's own credential when it is for the daemon.
 */
export function forwardedRequestHeaders(raw: string[], control: string | undefined): string[] {
  const out: string[] = control ? [CONTROL_HEADER, control] : [];
  for (let i = 0; i < raw.length; i += 2) {
    if (!NOT_FORWARDED.has(raw[i].toLowerCase())) out.push(raw[i], raw[i + 1]);
  }
  return out;
}
