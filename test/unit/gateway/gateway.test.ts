import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { GATEWAY_SETTINGS, loadGatewayConfig } from "../../../gateway/config";
import {
  accessToken,
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
import { routeOf, SandboxProxy } from "../../../gateway/proxy";
import type { ApiClient } from "../../../capabilities/client/api-client";
import { SandboxIndex } from "../../../gateway/sandboxes";
import type { CubePodTemplate, PodBox } from "../../../capabilities/api/kinds";

const KEY = "k".repeat(32);
const box = (name: string, extra: Partial<PodBox> = {}, ns = "a"): PodBox =>
  ({
    metadata: {
      name,
      namespace: ns,
      uid: `uid-${name}`,
      creationTimestamp: "2026-12-01T10:00:00Z",
    },
    spec: {},
    ...extra,
  }) as PodBox;

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
});

describe("API keys", () => {
  const secret = (ns: string, name: string, key: string, type = "pod.cubeplex.ai/api-key") => ({
    type,
    metadata: { namespace: ns, name },
    data: {
      sha256: Buffer.from(createHash("sha256").update(key).digest("hex")).toString("base64"),
    },
  });

  it("maps a key to its namespace by its hash, and forgets a deleted Secret", () => {
    const keys = new KeyIndex();
    keys.observe(secret("a", "k", "key-a"), false);
    expect(keys.namespaceOf("key-a")).toBe("a");
    expect(keys.namespaceOf("key-b")).toBeUndefined();
    keys.observe(secret("a", "k", "key-a"), true);
    expect(keys.namespaceOf("key-a")).toBeUndefined();
  });

  it("ignores other Secret types, and a key claimed by two namespaces acts in neither", () => {
    const keys = new KeyIndex();
    keys.observe(secret("a", "k", "key", "Opaque"), false);
    expect(keys.namespaceOf("key")).toBeUndefined();
    keys.observe(secret("a", "k", "key"), false);
    keys.observe(secret("b", "k", "key"), false);
    expect(keys.namespaceOf("key")).toBeUndefined();
    keys.observe(secret("b", "k", "key"), true);
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
});
