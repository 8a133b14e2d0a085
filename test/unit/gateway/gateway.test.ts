import { execFileSync } from "node:child_process";
import { createServer, request as httpRequest, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { GATEWAY_SETTINGS, loadGatewayConfig } from "../../../gateway/config";
import {
  accessToken,
  trafficAccessToken,
  ended,
  envVarsOf,
  listedSandbox,
  matchesMetadata,
  metadataFilter,
  newSandboxId,
  newSandboxSchema,
  resourcesOf,
  sameToken,
  sandboxIdOf,
  stateOf,
} from "../../../gateway/e2b";
import { KeyIndex } from "../../../gateway/keys";
import {
  forwardedRequestHeaders,
  routeOf,
  SandboxProxy,
  withMaskedHost,
} from "../../../gateway/proxy";
import { PoddControl, publicKeyOf, signGrant } from "../../../gateway/podd-control";
import type { ApiClient } from "../../../capabilities/client/api-client";
import { SandboxIndex } from "../../../gateway/sandboxes";
import type { CubePodTemplate, PodBox } from "../../../capabilities/api/kinds";
import { box } from "./control/fixtures";

const KEY = "k".repeat(32);

describe("gateway configuration", () => {
  it("takes the defaults, and needs a token key", () => {
    expect(loadGatewayConfig({ CUBEPOD_GATEWAY_TOKEN_KEY: KEY })).toMatchObject({
      host: "127.0.0.1",
      port: 8080,
      domain: "cubepod.localhost",
      startTimeoutMs: 30_000,
    });
  });

  it("refuses bad settings, naming every variable", () => {
    expect(() =>
      loadGatewayConfig({ CUBEPOD_GATEWAY_PORT: "80x", CUBEPOD_GATEWAY_DOMAIN: "Bad Domain" }),
    ).toThrow(/CUBEPOD_GATEWAY_DOMAIN[\s\S]*CUBEPOD_GATEWAY_TOKEN_KEY[\s\S]*/);
    expect(() =>
      loadGatewayConfig({ CUBEPOD_GATEWAY_PORT: "80x", CUBEPOD_GATEWAY_TOKEN_KEY: KEY }),
    ).toThrow(/CUBEPOD_GATEWAY_PORT: expected an integer from 1 to 65535, got "80x"/);
  });

  describe("HTTPS", () => {
    const dir = mkdtempSync(join(tmpdir(), "gateway-tls-"));
    /** A self-signed certificate for `san`, by openssl as an operator would make one. */
    const certFor = (name: string, san: string) => {
      execFileSync(
        "openssl",
        [
          ...["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"],
          ...["-keyout", join(dir, `${name}.key`), "-out", join(dir, `${name}.crt`)],
          ...["-subj", `/CN=${name}`, "-addext", `subjectAltName=${san}`],
        ],
        { stdio: "ignore" },
      );
      return { cert: join(dir, `${name}.crt`), key: join(dir, `${name}.key`) };
    };
    const good = certFor("good", "DNS:*.cubepod.localhost,DNS:cubepod.localhost");
    const other = certFor("other", "DNS:*.example.test");
    const tls = (cert?: string, key?: string) =>
      loadGatewayConfig({
        CUBEPOD_GATEWAY_TOKEN_KEY: KEY,
        CUBEPOD_GATEWAY_TLS_CERT_FILE: cert,
        CUBEPOD_GATEWAY_TLS_KEY_FILE: key,
      });
    afterAll(() => rmSync(dir, { recursive: true, force: true }));

    it("serves HTTPS on its port with a certificate that names every sandbox's host", () => {
      expect(tls(good.cert, good.key).tls).toMatchObject({ port: 8443 });
      expect(tls().tls).toBeUndefined();
    });

    it.each([
      ["a key without its certificate", undefined, "key", /go together: one is missing/],
      ["a file that is not there", "missing", "key", /cannot read .*missing/],
      ["a key of another certificate", "good", "otherKey", /are no PEM pair/],
      ["a certificate for another domain", "other", "otherKey", /does not name sandboxes' hosts/],
    ])("refuses %s", (_, cert, key, message) => {
      const file = (f?: string) =>
        f === "good"
          ? good.cert
          : f === "other"
            ? other.cert
            : f === "key"
              ? good.key
              : f === "otherKey"
                ? other.key
                : f && join(dir, f);
      expect(() => tls(file(cert), file(key))).toThrow(message);
    });
  });
});

describe("API keys", () => {
  const apiKey = (ns: string, name: string, key: string) => ({
    metadata: { namespace: ns, name },
    spec: { sha256: createHash("sha256").update(key).digest("hex") },
  });

  it("maps a key to its namespace by its hash, and forgets a deleted PodAPIKey", () => {
    const keys = new KeyIndex();
    keys.observe(apiKey("a", "k", "key-a"), false);
    expect(keys.namespaceOf("key-a")).toBe("a");
    expect(keys.namespaceOf("key-b")).toBeUndefined();
    keys.observe(apiKey("a", "k", "key-a"), true);
    expect(keys.namespaceOf("key-a")).toBeUndefined();
  });

  it("ignores a hash not in the CRD's form, and a key claimed by two namespaces acts in neither", () => {
    const keys = new KeyIndex();
    keys.observe({ metadata: { namespace: "a", name: "k" }, spec: { sha256: "ABC" } }, false);
    expect(keys.namespaceOf("ABC")).toBeUndefined();
    keys.observe(apiKey("a", "k", "key"), false);
    keys.observe(apiKey("b", "k", "key"), false);
    expect(keys.namespaceOf("key")).toBeUndefined();
    keys.observe(apiKey("b", "k", "key"), true);
    expect(keys.namespaceOf("key")).toBe("a");
  });
});

describe("routing", () => {
  const D = "cubepod.localhost";
  it("reads the sandbox headers, else the Host; nothing for the control API", () => {
    expect(routeOf({ "e2b-sandbox-id": "abc1", "e2b-sandbox-port": "49983" }, D)).toEqual({
      id: "abc1",
      port: 49983,
    });
    expect(routeOf({ host: `8000-abc1.${D}:8080` }, D)).toEqual({ id: "abc1", port: 8000 });
    // Only the domain given, the SDKs call the control API at api.<domain>.
    expect(routeOf({ host: `api.${D}` }, D)).toBeUndefined();
    expect(routeOf({ host: `API.${D}:443` }, D)).toBeUndefined();
    expect(routeOf({ "e2b-sandbox-id": "abc1-6532622b", "e2b-sandbox-port": "1" }, D)).toEqual({
      id: "abc1",
      port: 1,
    });
    expect(routeOf({ host: "127.0.0.1:8080" }, D)).toBeUndefined();
  });

  it.each([
    [{ "e2b-sandbox-id": "abc1" }],
    [{ "e2b-sandbox-port": "1" }],
    [{ "e2b-sandbox-id": "ABC", "e2b-sandbox-port": "1" }],
    [{ "e2b-sandbox-id": "abc", "e2b-sandbox-port": "70000" }],
    [{ host: `abc.${"cubepod.localhost"}` }],
  ])("refuses %j with 400", headers => {
    expect(routeOf(headers, D)).toMatchObject({ status: 400 });
  });
});

describe("the proxy's choice of box", () => {
  const running = (name: string, ip: string, extra: Partial<PodBox> = {}) =>
    box(name, {
      status: {
        phase: "Running",
        podIP: ip,
        podUID: `pod-of-${ip}`,
        poddURL: `http://${ip}:49983`,
      } as PodBox["status"],
      ...extra,
    });
  const setUp = () => {
    const boxes = new SandboxIndex();
    const config = loadGatewayConfig({ CUBEPOD_GATEWAY_TOKEN_KEY: KEY });
    const proxy = new SandboxProxy(boxes, {} as ApiClient, config, async () => undefined);
    return { boxes, proxy };
  };
  const envd = { id: "sbx", port: 49983 };

  it("sends a user port to the box's address, with no token asked", () => {
    const { boxes, proxy } = setUp();
    boxes.observe(running("sbx", "127.0.0.9"), false);
    expect(proxy.resolve({ id: "sbx", port: 8000 }, "GET", "/", {})).toMatchObject({
      ip: "127.0.0.9",
    });
  });

  it("serves a private sandbox's own ports only with its traffic token, its daemon's as before", () => {
    const { boxes, proxy } = setUp();
    const b = running("sbx", "127.0.0.9", {
      spec: { network: { allowPublicTraffic: false } } as PodBox["spec"],
    });
    boxes.observe(b, false);
    const traffic = trafficAccessToken(KEY, b);
    const user = { id: "sbx", port: 8000 };
    expect(proxy.resolve(user, "GET", "/", { "e2b-traffic-access-token": traffic })).toMatchObject({
      ip: "127.0.0.9",
    });
    expect(proxy.resolve(user, "GET", "/", {})).toEqual({
      status: 403,
      message:
        "Sandbox is secured with traffic access token. Token header 'e2b-traffic-access-token' is missing",
    });
    for (const given of ["", traffic.slice(1), accessToken(KEY, b)]) {
      expect(proxy.resolve(user, "GET", "/", { "e2b-traffic-access-token": given })).toMatchObject({
        status: 403,
        message: expect.stringContaining("is invalid"),
      });
    }
    // The daemon's port takes the access token, not the traffic one, as E2B's.
    expect(proxy.resolve(envd, "GET", "/health", {})).toMatchObject({ ip: "127.0.0.9" });
    expect(
      proxy.resolve(envd, "POST", "/files", { "x-access-token": accessToken(KEY, b) }),
    ).toMatchObject({ ip: "127.0.0.9" });
  });

  it("masks the Host a sandbox's own port sees, keeping the original as X-Forwarded-Host", () => {
    const raw = ["Host", "8000-sbx.d", "X-Forwarded-Host", "forged", "Accept", "*/*"];
    expect(withMaskedHost(raw, "app.local:8000")).toEqual([
      "Host",
      "app.local:8000",
      "X-Forwarded-Host",
      "8000-sbx.d",
      "Accept",
      "*/*",
    ]);
    expect(withMaskedHost(raw, undefined)).toBe(raw);
  });

  it("asks the daemon's port for the box's own token, and refuses its control paths", () => {
    const { boxes, proxy } = setUp();
    const b = running("sbx", "127.0.0.9");
    boxes.observe(b, false);
    const token = accessToken(KEY, b);
    expect(proxy.resolve(envd, "POST", "/files", { "x-access-token": token })).toMatchObject({
      ip: "127.0.0.9",
    });
    for (const given of [undefined, "", token.slice(1), `${token}x`, token.toUpperCase()]) {
      expect(proxy.resolve(envd, "POST", "/files", { "x-access-token": given })).toMatchObject({
        status: 401,
      });
    }
    expect(proxy.resolve(envd, "GET", "/health", {})).toMatchObject({ ip: "127.0.0.9" });
    expect(proxy.resolve(envd, "POST", "/init?x=1", { "x-access-token": token })).toMatchObject({
      status: 404,
    });
    // A signed file URL goes on without a token, for the daemon to check its signature; only
    // `/files` takes one, and a wrong token is not overridden by a signature.
    const signedUrl = "/files?path=a&signature=v1_x&signature_expiration=1";
    expect(proxy.resolve(envd, "GET", signedUrl, {})).toMatchObject({ ip: "127.0.0.9" });
    expect(proxy.resolve(envd, "GET", "/files?path=a", {})).toMatchObject({ status: 401 });
    expect(proxy.resolve(envd, "GET", "/envs?signature=v1_x", {})).toMatchObject({ status: 401 });
    expect(proxy.resolve(envd, "GET", signedUrl, { "x-access-token": `${token}x` })).toMatchObject({
      status: 401,
    });
  });

  it("stops routing to a box at its expiry, before the operator has acted", () => {
    jest.useFakeTimers({ now: Date.parse("2026-12-01T10:00:00Z") });
    try {
      const { boxes, proxy } = setUp();
      const ends = (extra: object) =>
        running("sbx", "127.0.0.9", {
          spec: { expiresAt: "2026-12-01T10:00:05Z", ...extra },
        } as Partial<PodBox>);
      boxes.observe(ends({}), false);
      expect(proxy.resolve(envd, "GET", "/health", {})).toMatchObject({ ip: "127.0.0.9" });
      jest.setSystemTime(Date.parse("2026-12-01T10:00:05Z"));
      expect(proxy.resolve(envd, "GET", "/health", {})).toMatchObject({ status: 502 });
      expect(ended(ends({}))).toBe(true);
      expect([ended(ends({ onExpiry: "Pause" })), stateOf(ends({ onExpiry: "Pause" }))]).toEqual([
        false,
        "paused",
      ]);
      // A paused box keeps; a later expiresAt runs again.
      expect(ended(ends({ desiredState: "Paused" }))).toBe(false);
      expect(stateOf(ends({ expiresAt: "2026-12-01T10:01:00Z" }))).toBe("running");
    } finally {
      jest.useRealTimers();
    }
  });

  it("gives each request to the daemon the gateway's credential for the box and its Pod", () => {
    const { boxes, proxy } = setUp();
    const b = running("sbx", "127.0.0.9");
    boxes.observe(b, false);
    const control = new PoddControl(KEY);
    const headers = { "x-access-token": accessToken(KEY, b) };
    expect(proxy.resolve(envd, "POST", "/files", headers)).toMatchObject({
      control: control.credential(b),
    });
    // A Pod the status does not name yet gets no requests: its daemon would refuse them.
    const unnamed = running("sbx", "127.0.0.10");
    delete unnamed.status!.podUID;
    boxes.observe(unnamed, false);
    expect(proxy.resolve(envd, "POST", "/files", headers)).toMatchObject({ status: 502 });
  });

  it("forwards a client's credential header never, and its own only to the daemon's port", () => {
    const raw = ["Host", "x", "X-CubePod-Control", "forged", "x-cubepod-control", "again"];
    expect(forwardedRequestHeaders(raw, undefined)).toEqual(["Host", "x"]);
    expect(forwardedRequestHeaders(raw, "real")).toEqual([
      "X-CubePod-Control",
      "real",
      "Host",
      "x",
    ]);
  });

  it("follows each new version of a box: a new address, a pause, a box made again", () => {
    const { boxes, proxy } = setUp();
    const first = running("sbx", "127.0.0.9");
    boxes.observe(first, false);
    expect(proxy.resolve({ id: "sbx", port: 8000 }, "GET", "/", {})).toMatchObject({
      ip: "127.0.0.9",
    });
    boxes.observe(running("sbx", "127.0.0.10"), false);
    expect(proxy.resolve({ id: "sbx", port: 8000 }, "GET", "/", {})).toMatchObject({
      ip: "127.0.0.10",
    });
    boxes.observe(box("sbx", { spec: { desiredState: "Paused" } as PodBox["spec"] }), false);
    expect(proxy.resolve({ id: "sbx", port: 8000 }, "GET", "/", {})).toMatchObject({
      status: 502,
    });
    const again = running("sbx", "127.0.0.11", {
      metadata: { ...first.metadata, uid: "uid-again" },
    });
    boxes.observe(again, false);
    const headers = { "x-access-token": accessToken(KEY, first) };
    expect(proxy.resolve(envd, "POST", "/files", headers)).toMatchObject({ status: 401 });
    headers["x-access-token"] = accessToken(KEY, again);
    expect(proxy.resolve(envd, "POST", "/files", headers)).toMatchObject({ ip: "127.0.0.11" });
  });
});

describe("the proxy's open streams", () => {
  const servers: Server[] = [];
  const listen = (server: Server) =>
    new Promise<number>(resolve => {
      servers.push(server);
      server.listen(0, "127.0.0.1", () => resolve((server.address() as AddressInfo).port));
    });
  afterAll(() => servers.forEach(s => s.close()));

  it("ends a box's streams when it is killed or paused, not on an update that keeps its Pod", async () => {
    // The sandbox's program: a stream that never ends on its own.
    const pod = await listen(
      createServer((_req, res) => {
        res.writeHead(200, { "Content-Type": "text/plain" });
        res.write("first\n");
      }),
    );
    const boxes = new SandboxIndex();
    const config = loadGatewayConfig({ CUBEPOD_GATEWAY_TOKEN_KEY: KEY });
    // Activity is recorded with the API server, which this test has none of.
    const client = { mergePatch: async () => undefined } as unknown as ApiClient;
    const proxy = new SandboxProxy(boxes, client, config, async () => undefined);
    const gateway = await listen(
      createServer((req, res) => proxy.handle(req, res, { id: "sbx", port: pod })),
    );
    const running = (extra: Partial<PodBox["metadata"]> = {}, spec: Partial<PodBox["spec"]> = {}) =>
      box("sbx", {
        metadata: { ...box("sbx").metadata, ...extra },
        spec: spec as PodBox["spec"],
        status: {
          phase: "Running",
          podIP: "127.0.0.1",
          podUID: "pod-1",
          poddURL: "http://127.0.0.1:49983",
        } as PodBox["status"],
      });
    // A stream once it has its first line, and how it ends.
    const stream = () =>
      new Promise<{ ended: Promise<string> }>((started, failed) => {
        const req = httpRequest({ port: gateway, host: "127.0.0.1", path: "/" }, res => {
          res.once("data", () =>
            started({
              ended: new Promise(ended => {
                res.on("end", () => ended("end"));
                res.on("error", () => ended("cut"));
                res.on("close", () => ended("cut"));
              }),
            }),
          );
        });
        req.on("error", failed);
        req.end();
      });

    boxes.observe(running(), false);
    const killed = await stream();
    boxes.observe(running({ annotations: { seen: "now" } }), false);
    expect(proxy.openTo("uid-sbx")).toBe(1);
    boxes.observe(running({ deletionTimestamp: new Date("2026-12-01T10:00:00Z") }), false);
    expect(await killed.ended).toBe("cut");
    expect(proxy.openTo("uid-sbx")).toBe(0);

    boxes.observe(running(), false);
    const paused = await stream();
    boxes.observe(running({}, { desiredState: "Paused" }), false);
    expect(await paused.ended).toBe("cut");

    boxes.observe(running(), false);
    const gone = await stream();
    boxes.observe(running(), true);
    expect(await gone.ended).toBe("cut");
    expect(proxy.openTo("uid-sbx")).toBe(0);
    proxy.close();
  });
});

describe("the daemon's credential", () => {
  // podd/control/control_test.go checks the same vector: both sides sign alike.
  const seed = Buffer.from("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=", "base64");
  const vector =
    "MGI2ZjFjMmUtYm94LzlkMmE3ZTQ0LXBvZA." +
    "B9KunYPFix25GJiK_GCz3vNpulDhRE8aNhjD7P1m7j_9T9pvvzsweVFjBZahf80stY_M38hR-kGc7amR2tciBg";

  it("is the Ed25519 signature podd checks", () => {
    const key = PoddControl.keyOf(seed);
    expect(publicKeyOf(key)).toBe("A6EHv/POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMbg=");
    expect(signGrant(key, "0b6f1c2e-box", "9d2a7e44-pod")).toBe(vector);
  });

  it("names the box and its Pod: another Pod (a resume) or another box (a claim), another one", () => {
    const control = new PoddControl(KEY);
    const of = (uid: string, podUID?: string) =>
      control.credential(box("x", { metadata: { name: "x", uid }, status: { podUID } }));
    expect(of("b1", "p1")).toBe(of("b1", "p1"));
    expect(of("b1", "p2")).not.toBe(of("b1", "p1"));
    expect(of("b2", "p1")).not.toBe(of("b1", "p1"));
    expect(of("b1")).toBeUndefined();
    expect(new PoddControl("j".repeat(32)).publicKey).not.toBe(control.publicKey);
  });
});

describe("E2B's wire format", () => {
  it("makes IDs of [a-z0-9] starting with a letter, and reads E2B's <id>-<client> form", () => {
    for (let i = 0; i < 50; i++) expect(newSandboxId()).toMatch(/^[a-z][a-z0-9]{19}$/);
    expect(sandboxIdOf("abc-6532622b")).toBe("abc");
    expect(sandboxIdOf("a_b")).toBeUndefined();
  });

  it("derives a token per box identity: another UID, another token", () => {
    const a = accessToken(KEY, box("x"));
    expect(accessToken(KEY, box("x"))).toBe(a);
    expect(
      accessToken(KEY, { ...box("x"), metadata: { ...box("x").metadata, uid: "other" } }),
    ).not.toBe(a);
  });

  it("compares tokens whole, whatever is sent", () => {
    const t = accessToken(KEY, box("x"));
    expect(sameToken(t, t)).toBe(true);
    for (const given of [undefined, ["a"], "", t.slice(0, -1), `${t}0`, `${t.slice(0, -1)}é`]) {
      expect(sameToken(given, t)).toBe(false);
    }
  });

  it("reads create bodies as the SDKs send them, extra fields included", () => {
    expect(
      newSandboxSchema.safeParse({ templateID: "base", secure: true, timeout: 60 }).success,
    ).toBe(true);
    expect(newSandboxSchema.safeParse({ templateID: "Base!" }).success).toBe(false);
    expect(newSandboxSchema.safeParse({ templateID: "base", envVars: { A: 1 } }).success).toBe(
      false,
    );
  });

  it("reports paused boxes (or boxes meant to be) as paused, and metadata for filters", () => {
    expect(stateOf(box("x", { status: { phase: "Paused" } }))).toBe("paused");
    expect(stateOf(box("x", { spec: { desiredState: "Paused" } as PodBox["spec"] }))).toBe(
      "paused",
    );
    expect(stateOf(box("x", { status: { phase: "Running" } }))).toBe("running");
    const b = box("x", {
      metadata: {
        ...box("x").metadata,
        annotations: { "pod.cubeplex.ai/sandbox-metadata": '{"a":"1","b":"2"}' },
      },
    });
    expect(matchesMetadata(b, metadataFilter("a=1"))).toBe(true);
    expect(matchesMetadata(b, metadataFilter("a=1&b=3"))).toBe(false);
    expect(listedSandbox(b)).toMatchObject({
      sandboxID: "x",
      metadata: { a: "1", b: "2" },
      endAt: "2026-12-01T10:05:00.000Z",
    });
  });
});

describe("a sandbox's size and kept envVars", () => {
  const template = (spec: object) => ({ spec }) as CubePodTemplate;

  it("reports CPUs and memory from the limits, else the requests, rounded up, and both volumes", () => {
    expect(
      resourcesOf(
        template({
          resources: { limits: { cpu: "1500m" }, requests: { cpu: "1", memory: "512Mi" } },
          rootfs: { size: "10Gi" },
          workspace: { size: "500M" },
        }),
      ),
    ).toEqual({ cpuCount: 2, memoryMB: 512, diskSizeMB: 10240 + 477 });
    expect(resourcesOf(undefined)).toEqual({ cpuCount: 0, memoryMB: 0, diskSizeMB: 0 });
  });

  it("reads kept envVars back only as a map of strings", () => {
    expect(envVarsOf('{"A":"1"}')).toEqual({ A: "1" });
    for (const bad of ["", "[]", '{"A":1}', "{"]) expect(envVarsOf(bad)).toEqual({});
  });
});

describe("SandboxIndex", () => {
  it("wakes a waiter on the event that satisfies it, and times out otherwise", async () => {
    const index = new SandboxIndex();
    const waiting = index.waitFor("a", "x", b => b?.status?.phase === "Running", 1000);
    index.observe(box("x", { status: { phase: "Pending" } }), false);
    index.observe(box("x", { status: { phase: "Running" } }), false);
    await expect(waiting).resolves.toMatchObject({ status: { phase: "Running" } });
    await expect(index.waitFor("a", "y", b => b !== undefined, 10)).rejects.toThrow(/timed out/);
    expect(index.named("x")).toHaveLength(1);
    index.observe(box("x"), true);
    expect(index.get("a", "x")).toBeUndefined();
  });

  it("finds a name's boxes in every namespace, and forgets deleted ones", () => {
    const index = new SandboxIndex();
    index.observe(box("x", {}, "a"), false);
    index.observe(box("x", {}, "b"), false);
    index.observe(box("y", {}, "a"), false);
    expect(index.named("x").map(b => b.metadata?.namespace)).toEqual(["a", "b"]);
    index.observe(box("x", {}, "a"), true);
    expect(index.named("x").map(b => b.metadata?.namespace)).toEqual(["b"]);
    index.observe(box("x", {}, "b"), true);
    expect(index.named("x")).toEqual([]);
    expect(index.named("y")).toHaveLength(1);
  });
});

describe("docs/gateway.md", () => {
  it("lists every setting with its default", () => {
    const doc = readFileSync(join(__dirname, "..", "..", "..", "docs", "gateway.md"), "utf8");
    for (const [variable, def] of GATEWAY_SETTINGS) {
      expect(doc).toMatch(
        new RegExp(`\\| \`${variable}\` +\\| \`?${def.replace(/[()]/g, "\\$&")}\`? +\\|`),
      );
    }
  });
  it("lists every test the conformance tier leaves out, once, with a reason it explains", () => {
    const doc = readFileSync(join(__dirname, "..", "..", "..", "docs", "gateway.md"), "utf8");
    const skips = JSON.parse(
      readFileSync(join(__dirname, "..", "..", "e2b", "skips.json"), "utf8"),
    ) as Record<string, Record<string, string>>;
    const rows = doc.split("\n").filter(l => /^\| (js|py) +\|/.test(l));
    const listed = rows.map(l => l.split("|").map(c => c.trim()));
    const expected = Object.entries(skips).flatMap(([suite, tests]) =>
      Object.entries(tests).map(([name, reason]) => ["", suite, name, `\`${reason}\``, ""]),
    );
    expect(listed).toEqual(expected);
    for (const reason of new Set(Object.values(skips).flatMap(t => Object.values(t)))) {
      expect(doc).toMatch(new RegExp(`^\\| \`${reason}\` +\\| \\S`, "m"));
    }
  });
});
