import { createHash } from "node:crypto";
import { createServer, request as httpRequest, type Server } from "node:http";
import { connect, type AddressInfo } from "node:net";
import { request } from "undici";
import type { ApiClient } from "../../../capabilities/client/api-client";
import type { PodBox } from "../../../capabilities/api/kinds";
import { AnswerTooLarge, readBoundedText } from "../../../gateway/bounded-read";
import { loadGatewayConfig } from "../../../gateway/config";
import type { ControlApi } from "../../../gateway/control/routes";
import { SandboxMetricsApi } from "../../../gateway/control/sandbox-metrics";
import { ApiError } from "../../../gateway/e2b";
import { KeyIndex } from "../../../gateway/keys";
import { droppedConnections, requests } from "../../../gateway/metrics";
import { SandboxProxy } from "../../../gateway/proxy";
import { retryAfterSeconds, TokenBuckets } from "../../../gateway/rate-limit";
import { SandboxIndex } from "../../../gateway/sandboxes";
import { gatewayServer } from "../../../gateway/server";
import { controlContext } from "./control/fixtures";

const KEY = "k".repeat(32);

describe("the control API's token buckets", () => {
  const clock = () => {
    let ms = 0;
    return { now: () => ms, pass: (s: number) => (ms += s * 1000) };
  };

  it("lets a burst through, then one call per refilled token, each key on its own", () => {
    const t = clock();
    const buckets = new TokenBuckets(2, 3, t.now);
    expect([1, 2, 3].map(() => buckets.take("a"))).toEqual([0, 0, 0]);
    // Empty: a token comes in half a second at 2 per second.
    expect(buckets.take("a")).toBeCloseTo(0.5);
    expect(buckets.take("b")).toBe(0);
    t.pass(0.25);
    expect(buckets.take("a")).toBeCloseTo(0.25);
    t.pass(0.25);
    expect(buckets.take("a")).toBe(0);
    expect(buckets.take("a")).toBeCloseTo(0.5);
  });

  it("refills no further than the burst, however long a key is quiet", () => {
    const t = clock();
    const buckets = new TokenBuckets(10, 5, t.now);
    for (let i = 0; i < 5; i++) buckets.take("a");
    t.pass(3600);
    expect(Array.from({ length: 6 }, () => buckets.take("a") === 0)).toEqual([
      ...Array(5).fill(true),
      false,
    ]);
  });

  it("says when to retry in whole seconds, at least one", () => {
    expect([0.01, 1, 1.2, 7.9].map(retryAfterSeconds)).toEqual([1, 1, 2, 8]);
    expect(() => new TokenBuckets(0, 1)).toThrow();
  });
});

describe("the limits' settings", () => {
  it("defaults to limits an SDK test suite never meets", () => {
    expect(loadGatewayConfig({ CUBEPOD_GATEWAY_TOKEN_KEY: KEY })).toMatchObject({
      rateLimit: { perSecond: 50, burst: 500 },
      maxConnections: 10_000,
      maxSandboxConnections: 2000,
      headersTimeoutMs: 30_000,
      bodyTimeoutMs: 30_000,
    });
    const off = loadGatewayConfig({
      CUBEPOD_GATEWAY_TOKEN_KEY: KEY,
      CUBEPOD_GATEWAY_RATE_PER_SECOND: "0",
    });
    expect(off.rateLimit).toBeUndefined();
  });

  it.each([
    ["CUBEPOD_GATEWAY_RATE_PER_SECOND", "-1"],
    ["CUBEPOD_GATEWAY_RATE_BURST", "0"],
    ["CUBEPOD_GATEWAY_MAX_CONNECTIONS", "many"],
    ["CUBEPOD_GATEWAY_MAX_SANDBOX_CONNECTIONS", "0"],
    ["CUBEPOD_GATEWAY_HEADERS_TIMEOUT_SECONDS", "0"],
    ["CUBEPOD_GATEWAY_BODY_TIMEOUT_SECONDS", "1.5"],
  ])("refuses %s=%s, naming it", (variable, value) => {
    expect(() => loadGatewayConfig({ CUBEPOD_GATEWAY_TOKEN_KEY: KEY, [variable]: value })).toThrow(
      new RegExp(`${variable}: expected an integer from \\d+ to \\d+, got "${value}"`),
    );
  });
});

/** A running box whose Pod is this machine, with its daemon at `daemonPort`. */
const running = (name: string, daemonPort: number) =>
  ({
    metadata: { name, namespace: "a", uid: `uid-${name}` },
    spec: {},
    status: {
      phase: "Running",
      podIP: "127.0.0.1",
      podUID: "pod-1",
      poddURL: `http://127.0.0.1:${daemonPort}`,
    },
  }) as PodBox;

/** Servers the tests listen with, closed at the end. */
const servers: Server[] = [];
const listen = (server: Server) =>
  new Promise<number>(resolve => {
    servers.push(server);
    server.listen(0, "127.0.0.1", () => resolve((server.address() as AddressInfo).port));
  });
afterAll(() =>
  servers.forEach(s => {
    s.closeAllConnections();
    s.close();
  }),
);

/** A raw connection to the port, and everything it reads until it closes. */
function rawConnection(port: number) {
  const socket = connect(port, "127.0.0.1");
  let read = "";
  socket.on("data", d => (read += String(d)));
  socket.on("error", () => undefined);
  const closed = new Promise<string>(resolve => socket.once("close", () => resolve(read)));
  return { socket, closed };
}

describe("the gateway's server, in process", () => {
  const apiKey = (ns: string, key: string) => ({
    metadata: { namespace: ns, name: "key" },
    spec: { sha256: createHash("sha256").update(key).digest("hex") },
  });
  /** A control API whose info call fails as `failure` says; every other answers 200. */
  let failure: unknown;
  const control = {
    sandboxes: {
      list: () => ({ status: 200, body: [] }),
      info: () => {
        throw failure;
      },
      create: () => ({ status: 201, body: {} }),
    },
  } as unknown as ControlApi;
  const start = async (env: Record<string, string> = {}, boxes = new SandboxIndex()) => {
    const config = loadGatewayConfig({ CUBEPOD_GATEWAY_TOKEN_KEY: KEY, ...env });
    const keys = new KeyIndex();
    keys.observe(apiKey("a", "key-a"), false);
    keys.observe(apiKey("b", "key-b"), false);
    const client = { mergePatch: async () => undefined } as unknown as ApiClient;
    const proxy = new SandboxProxy(boxes, client, config, async () => 0);
    const limit = config.rateLimit;
    const buckets = limit && new TokenBuckets(limit.perSecond, limit.burst);
    const server = gatewayServer(config, keys, control, proxy, buckets) as Server;
    const port = await listen(server);
    const call = async (path: string, key = "key-a") => {
      const res = await request(`http://127.0.0.1:${port}${path}`, {
        headers: { "X-API-Key": key },
      });
      return { status: res.statusCode, headers: res.headers, body: await res.body.json() };
    };
    return { port, call, server };
  };
  const counted = async (route: string, code: string) =>
    (await requests.get()).values.find(v => v.labels.route === route && v.labels.code === code)
      ?.value ?? 0;

  it("answers a tenant over its rate 429 with Retry-After, as E2B does, and counts it", async () => {
    const { call } = await start({
      CUBEPOD_GATEWAY_RATE_PER_SECOND: "1",
      CUBEPOD_GATEWAY_RATE_BURST: "2",
    });
    const before = await counted("list", "429");
    expect((await call("/v2/sandboxes")).status).toBe(200);
    expect((await call("/v2/sandboxes")).status).toBe(200);
    const limited = await call("/v2/sandboxes");
    expect(limited).toMatchObject({
      status: 429,
      headers: { "retry-after": "1" },
      body: { code: 429, message: expect.stringMatching(/^rate limit exceeded: at most 1 /) },
    });
    // Another tenant's calls have their own bucket.
    expect((await call("/v2/sandboxes", "key-b")).status).toBe(200);
    // A call without a valid key is refused before it takes any tenant's token.
    expect((await call("/v2/sandboxes", "nobody")).status).toBe(401);
    expect(await counted("list", "429")).toBe(before + 1);
  });

  it("reads a connection refused for rate no further until its Retry-After has passed", async () => {
    const { port, call } = await start({
      CUBEPOD_GATEWAY_RATE_PER_SECOND: "1",
      CUBEPOD_GATEWAY_RATE_BURST: "1",
    });
    const statuses = (read: string) => [...read.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map(m => m[1]);
    const get = "GET /v2/sandboxes HTTP/1.1\r\nHost: gw\r\nX-API-Key: key-a\r\n\r\n";
    const flooder = connect(port, "127.0.0.1");
    let read = "";
    let waiting = () => undefined as void;
    flooder.on("data", (d: Buffer) => ((read += String(d)), waiting()));
    const answered = (n: number) =>
      new Promise<void>(
        resolve => (waiting = () => void (statuses(read).length >= n && resolve())),
      );
    flooder.write(get + get);
    await answered(2);
    expect(statuses(read)).toEqual(["200", "429"]);
    expect(read).toMatch(/^Retry-After: 1\r$/im);
    // A flood sends its next call at once: it waits, unread, while others are served.
    flooder.write(get);
    expect((await call("/v2/sandboxes", "key-b")).status).toBe(200);
    expect(statuses(read)).toHaveLength(2);
    // Read once the second has passed: by then the tenant's bucket has its token again.
    await answered(3);
    expect(statuses(read)).toEqual(["200", "429", "200"]);
    flooder.destroy();
  });

  it("answers an unexpected error with a generic 500 naming a request logged with its detail", async () => {
    const { call } = await start();
    const logged: string[] = [];
    const spy = jest.spyOn(console, "error").mockImplementation(l => void logged.push(String(l)));
    try {
      failure = new Error("connect ECONNREFUSED 127.0.0.1:16443");
      const answer = await call("/sandboxes/abc");
      expect(answer.status).toBe(500);
      const { message } = answer.body as { message: string };
      const id = /^internal error; see the gateway's log \(request ([0-9a-f]+)\)$/.exec(message);
      expect(id).not.toBeNull();
      expect(logged).toHaveLength(1);
      expect(JSON.parse(logged[0])).toMatchObject({
        level: "error",
        request: id![1],
        method: "GET",
        path: "/sandboxes/abc",
        error: expect.stringContaining("ECONNREFUSED 127.0.0.1:16443"),
      });
      // An error meant for the tenant goes to it as it is, and is not logged.
      failure = new ApiError(409, "sandbox is changing state");
      expect(await call("/sandboxes/abc")).toMatchObject({
        status: 409,
        body: { code: 409, message: "sandbox is changing state" },
      });
      expect(logged).toHaveLength(1);
    } finally {
      spy.mockRestore();
    }
  });

  it("answers 408 to a body that does not come in time, and ends the connection", async () => {
    const { port } = await start({ CUBEPOD_GATEWAY_BODY_TIMEOUT_SECONDS: "1" });
    const { socket, closed } = rawConnection(port);
    socket.write(
      "POST /v2/sandboxes HTTP/1.1\r\nHost: gw\r\nX-API-Key: key-a\r\n" +
        "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{",
    );
    const read = await closed;
    expect(read).toMatch(/^HTTP\/1\.1 408 /);
    expect(read).toMatch(/Connection: close/i);
    expect(read).toContain('{"code":408,"message":"request body not received within 1 s"}');
  });

  it("cuts a refused call whose body never ends, after the body timeout", async () => {
    const { port } = await start({ CUBEPOD_GATEWAY_BODY_TIMEOUT_SECONDS: "1" });
    const { socket, closed } = rawConnection(port);
    socket.write(
      "POST /v2/sandboxes HTTP/1.1\r\nHost: gw\r\nX-API-Key: wrong\r\n" +
        "Transfer-Encoding: chunked\r\n\r\n1\r\n{\r\n",
    );
    const since = Date.now();
    expect(await closed).toMatch(/^HTTP\/1\.1 401 /);
    expect(Date.now() - since).toBeGreaterThanOrEqual(900);
  });

  it("closes a connection whose headers do not come in time, with no time limit after them", async () => {
    const { port } = await start({ CUBEPOD_GATEWAY_HEADERS_TIMEOUT_SECONDS: "1" });
    const late = rawConnection(port);
    late.socket.write("GET /v2/sandboxes HTTP/1.1\r\nHost: gw\r\n");
    expect(await late.closed).toMatch(/^HTTP\/1\.1 408 /);
    // A keep-alive connection quiet between calls is the keep-alive timeout's, not this one's.
    const quiet = rawConnection(port);
    const get = "GET /v2/sandboxes HTTP/1.1\r\nHost: gw\r\nX-API-Key: key-a\r\n\r\n";
    quiet.socket.write(get);
    await new Promise(r => setTimeout(r, 2500));
    quiet.socket.end(get);
    expect((await quiet.closed).match(/HTTP\/1\.1 200 /g)).toHaveLength(2);
  });

  it("lets a proxied request's body and answer take their time, however short the limits", async () => {
    // The sandbox's program: it reads the whole upload, then answers.
    const pod = await listen(
      createServer((req, res) => {
        let size = 0;
        req.on("data", c => (size += c.length)).on("end", () => res.end(`got ${size}`));
      }),
    );
    const boxes = new SandboxIndex();
    boxes.observe(running("sbx", 49983), false);
    const { port } = await start(
      {
        CUBEPOD_GATEWAY_HEADERS_TIMEOUT_SECONDS: "1",
        CUBEPOD_GATEWAY_BODY_TIMEOUT_SECONDS: "1",
      },
      boxes,
    );
    const { socket, closed } = rawConnection(port);
    socket.write(
      `POST / HTTP/1.1\r\nHost: ${pod}-sbx.cubepod.localhost\r\nTransfer-Encoding: chunked\r\n\r\n`,
    );
    for (let i = 0; i < 5; i++) {
      await new Promise(r => setTimeout(r, 500));
      socket.write("1\r\nx\r\n");
    }
    socket.write("0\r\n\r\n");
    await new Promise(r => socket.once("data", r));
    await new Promise(r => setTimeout(r, 100));
    socket.destroy();
    expect(await closed).toMatch(/^HTTP\/1\.1 200 [\s\S]*got 5/);
  });

  it("closes connections past the cap at once, and counts them", async () => {
    const { port, call } = await start({ CUBEPOD_GATEWAY_MAX_CONNECTIONS: "1" });
    const dropped = (await droppedConnections.get()).values[0]?.value ?? 0;
    const held = rawConnection(port);
    await new Promise(r => held.socket.once("connect", r));
    await new Promise(r => setTimeout(r, 100));
    const refused = rawConnection(port);
    refused.socket.write("GET /v2/sandboxes HTTP/1.1\r\nHost: gw\r\nX-API-Key: key-a\r\n\r\n");
    expect(await refused.closed).toBe("");
    expect((await droppedConnections.get()).values[0]?.value).toBe(dropped + 1);
    held.socket.destroy();
    await held.closed;
    await new Promise(r => setTimeout(r, 100));
    expect((await call("/v2/sandboxes")).status).toBe(200);
  });
});

describe("the proxy's cap per sandbox", () => {
  it("answers 429 to a stream past the sandbox's cap, and lets one through once one ends", async () => {
    const open: import("node:http").ServerResponse[] = [];
    const pod = await listen(
      createServer((_req, res) => {
        res.writeHead(200);
        res.write("first\n");
        open.push(res);
      }),
    );
    const boxes = new SandboxIndex();
    const config = loadGatewayConfig({
      CUBEPOD_GATEWAY_TOKEN_KEY: KEY,
      CUBEPOD_GATEWAY_MAX_SANDBOX_CONNECTIONS: "1",
    });
    const client = { mergePatch: async () => undefined } as unknown as ApiClient;
    const proxy = new SandboxProxy(boxes, client, config, async () => undefined);
    const gateway = await listen(
      createServer((req, res) => proxy.handle(req, res, { id: "sbx", port: pod })),
    );
    boxes.observe(running("sbx", 49983), false);
    /** A GET's status, and its first chunk. */
    const get = () =>
      new Promise<{ status: number; first: string }>((resolve, reject) => {
        const req = httpRequest({ port: gateway, host: "127.0.0.1", agent: false }, res =>
          res.once("data", d => resolve({ status: res.statusCode!, first: String(d) })),
        );
        req.on("error", reject);
        req.end();
      });
    expect(await get()).toEqual({ status: 200, first: "first\n" });
    const refused = await get();
    expect(refused.status).toBe(429);
    expect(JSON.parse(refused.first)).toEqual({
      sandboxId: "sbx",
      code: 429,
      message: "too many connections to this sandbox: at most 1 at once",
    });
    open[0].end();
    await new Promise(r => setTimeout(r, 100));
    expect((await get()).status).toBe(200);
    open.forEach(r => r.end());
    proxy.close();
  });
});

describe("the control API's reads of daemon answers", () => {
  const answering = (size: number) =>
    listen(
      createServer((_req, res) => {
        res.writeHead(200, { "Content-Type": "application/json" });
        res.end(Buffer.alloc(size, "x"));
      }),
    );

  it("take an answer whole up to the bound, and stop past it", async () => {
    const port = await answering(1024);
    const small = await request(`http://127.0.0.1:${port}/`);
    expect(await readBoundedText(small.body, 1024)).toHaveLength(1024);
    const large = await request(`http://127.0.0.1:${port}/`);
    await expect(readBoundedText(large.body, 1023)).rejects.toThrow(
      new AnswerTooLarge(1023).message,
    );
  });

  it("answer a sandbox's metrics 502 when its daemon's answer is too large", async () => {
    const port = await answering(1024 * 1024);
    const api = new SandboxMetricsApi(controlContext(running("sbx", port)));
    await expect(api.ofSandbox("a", "sbx", new URLSearchParams())).rejects.toMatchObject({
      code: 502,
      message: `sandbox "sbx": its daemon's /metrics failed: its answer is larger than 65536 bytes`,
    });
  });
});
