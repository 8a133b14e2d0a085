import { createHash } from "node:crypto";
import { createServer, IncomingMessage, Server, ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { Kube, Obj, paths } from "../../testkit/kube";

/** What one sandbox's stand-in was told by the gateway's `/init`. */
export type Init = { envVars: Record<string, string>; accessToken: string };

/** A user port of every stand-in: answers with what it received, as JSON. */
export const ECHO_PORT = 8000;

/**
 * A floor for the gateway benchmark, and no test's: the least daemon the gateway can route to, so
 * that what the benchmark measures is the gateway's own cost, on kwok's Pods, which run no
 * containers. It answers for each sandbox's daemon (E2B's envd) on its Pod's loopback IP:
 * `GET /health`, `POST /init`, and Connect's `process.Process/Start` (server streaming, JSON)
 * enough for the SDK's `commands.run`, running nothing, checking the access token from its `/init`
 * but not the control credential; plus, on {@link ECHO_PORT}, an echo of each request, a sink
 * (`POST /sink`: the size and SHA-256 of what it read, streamed) and a WebSocket echo of text
 * messages. It follows the Pods of the namespaces it is given. The tests run against real podd.
 */
export class EnvdStandIn {
  readonly inits = new Map<string, Init>();
  readonly #servers = new Map<string, Server[]>();
  readonly #watches = new Set<() => void>();
  #stopped = false;

  constructor(
    private readonly kube: Kube,
    private readonly namespaces: string[],
  ) {}

  /** Serves each kwok Pod of the namespaces as it gets its IP: a list, then a watch. */
  start(): void {
    for (const ns of this.namespaces) this.#follow(ns);
  }

  stop(): void {
    this.#stopped = true;
    for (const stop of this.#watches) stop();
    for (const servers of this.#servers.values()) for (const s of servers) s.close();
  }

  #follow(ns: string): void {
    if (this.#stopped) return;
    const again = (ms: number) => setTimeout(() => this.#follow(ns), ms).unref();
    const see = (pod: Obj) => {
      const ip: string | undefined = pod.status?.podIP;
      // kwok's Pods only (loopback IPs): the real node's run their own podd.
      if (ip?.startsWith("127.") && !this.#servers.has(ip)) this.#serve(ip);
    };
    this.kube.get(paths.pods(ns)).then(
      r => {
        if (this.#stopped) return;
        for (const pod of r.body.items ?? []) see(pod);
        // A watch ends (its timeout, or the API server restarting): list and watch again.
        const stop = this.kube.watchCollection(
          paths.pods(ns),
          (type, pod) => type !== "DELETED" && see(pod),
          r.body.metadata?.resourceVersion,
          () => (this.#watches.delete(stop), again(100)),
        );
        this.#watches.add(stop);
      },
      () => again(500),
    );
  }

  #serve(ip: string): void {
    const envd = createServer((req, res) => void this.#envd(ip, req, res));
    const echo = createServer(async (req, res) => {
      if (req.method === "POST" && req.url === "/sink") return sink(req, res);
      const body = (await bytes(req)).toString();
      res.writeHead(200, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ ip, method: req.method, url: req.url, body, headers: req.headers }));
    });
    echo.on("upgrade", (req: IncomingMessage, socket: Duplex) => webSocketEcho(req, socket));
    envd.listen(49983, ip);
    echo.listen(ECHO_PORT, ip);
    this.#servers.set(ip, [envd, echo]);
  }

  async #envd(ip: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await bytes(req);
    const path = (req.url ?? "/").split("?")[0];
    if (req.method === "GET" && path === "/health") return void res.writeHead(204).end();
    if (req.method === "POST" && path === "/init") {
      this.inits.set(ip, JSON.parse(body.toString()) as Init);
      return void res.writeHead(204).end();
    }
    if (req.headers["x-access-token"] !== this.inits.get(ip)?.accessToken) {
      res.writeHead(401, { "Content-Type": "application/json" });
      return void res.end(JSON.stringify({ code: 16, message: "unauthenticated" }));
    }
    if (req.method === "POST" && path === "/process.Process/Start") {
      const request = JSON.parse(unframe(body)) as {
        process: { args?: string[] };
      };
      const cmd = request.process.args?.at(-1) ?? "";
      res.writeHead(200, { "Content-Type": "application/connect+json" });
      res.write(frame({ event: { start: { pid: 7 } } }));
      // `pause N; echo X`: a quiet gap of N ms before the output, as a long command has.
      const gap = /^pause (\d+); /.exec(cmd);
      if (gap) await new Promise(r => setTimeout(r, Number(gap[1])));
      const out = cmd.replace(/^pause \d+; /, "").replace(/^echo /, "");
      res.write(frame({ event: { data: { stdout: Buffer.from(`${out}\n`).toString("base64") } } }));
      res.write(frame({ event: { end: { exitCode: 0, exited: true, status: "exit status 0" } } }));
      return void res.end(frame({}, 0x02));
    }
    res.writeHead(404, { "Content-Type": "application/json" });
    res.end(JSON.stringify({ code: 404, message: `stand-in has no ${path}` }));
  }
}

function sink(req: IncomingMessage, res: ServerResponse): void {
  const hash = createHash("sha256");
  let size = 0;
  req.on("data", (c: Buffer) => {
    size += c.length;
    hash.update(c);
  });
  req.on("end", () => {
    res.writeHead(200, { "Content-Type": "application/json" });
    res.end(JSON.stringify({ bytes: size, sha256: hash.digest("hex") }));
  });
}

/** RFC 6455's handshake, then each short masked text frame sent back unmasked. */
function webSocketEcho(req: IncomingMessage, socket: Duplex): void {
  const accept = createHash("sha1")
    .update(`${req.headers["sec-websocket-key"]}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`)
    .digest("base64");
  socket.write(
    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
      `Sec-WebSocket-Accept: ${accept}\r\n\r\n`,
  );
  socket.on("data", (frame: Buffer) => {
    const opcode = frame[0] & 0x0f;
    const length = frame[1] & 0x7f;
    if (opcode === 0x8) return void socket.end(Buffer.from([0x88, 0]));
    if (opcode !== 0x1 || length > 125) return void socket.destroy();
    const mask = frame.subarray(2, 6);
    const payload = frame.subarray(6, 6 + length).map((b, i) => b ^ mask[i % 4]);
    socket.write(Buffer.concat([Buffer.from([0x81, length]), payload]));
  });
  socket.on("error", () => socket.destroy());
}

function bytes(req: IncomingMessage): Promise<Buffer> {
  return new Promise(resolve => {
    const chunks: Buffer[] = [];
    req.on("data", c => chunks.push(c as Buffer));
    req.on("end", () => resolve(Buffer.concat(chunks)));
  });
}

/** A Connect envelope: flags, big-endian length, JSON. */
function frame(message: unknown, flags = 0): Buffer {
  const json = Buffer.from(JSON.stringify(message));
  const head = Buffer.alloc(5);
  head.writeUInt8(flags, 0);
  head.writeUInt32BE(json.length, 1);
  return Buffer.concat([head, json]);
}

function unframe(buf: Buffer): string {
  return buf.subarray(5, 5 + buf.readUInt32BE(1)).toString("utf8");
}
