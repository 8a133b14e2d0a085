import { execFile, execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { createHash, randomBytes } from "node:crypto";
import { request as httpRequest } from "node:http";
import { join } from "node:path";
import { promisify } from "node:util";
import { AuthenticationError, Sandbox, SandboxNotFoundError } from "e2b";
import { WebSocket } from "undici";
import { accessToken } from "../../gateway/e2b";
import { CONTROL_HEADER } from "../../gateway/podd-control";
import type { PodBox } from "../../capabilities/api/kinds";
import { cluster, CLUSTER_DIR, Kube, Obj, paths, ROOT } from "../../testkit/kube";
import { podAPIKey, podTemplate, realTemplate } from "../../testkit/objects";
import { localTokenKey } from "../../testkit/podd-client";
import { TENANT_DEFAULTS, useTenantDefault } from "../../testkit/tenant";
import { startDeployedGateway, untilServing } from "./deployed-gateway";

/*
 * The gateway (started by `npm run up` on 127.0.0.1:8080) driven by the real E2B JS SDK, as an
 * agent would: two tenants with their own API keys, sandboxes on a warm pool and cold, each a real
 * sandbox on the real node whose podd answers what the gateway routes to it (runc here: the
 * gVisor files run the same SDK on gVisor).
 */

const execFileAsync = promisify(execFile);
const GATEWAY = `http://127.0.0.1:${process.env.CUBEPOD_GATEWAY_PORT ?? 8080}`;
const DOMAIN = "cubepod.localhost";
/** The port a user's server listens on in a sandbox (port_server.py). */
const PORT = 8000;
/** The real node's sandboxes, with a seed so that a cold start clones its rootfs. */
const SANDBOX = { ...realTemplate("Filesystem", "1Gi"), rootfs: { size: "1Gi", seed: true } };
/**
 * A larger size, as E2B reports it from the limits; small requests, so that several such
 * sandboxes fit on the real node's two CPUs at once.
 */
const COLD = {
  ...SANDBOX,
  resources: { requests: { cpu: "50m", memory: "64Mi" }, limits: { cpu: "1500m", memory: "1Gi" } },
};
const kube = new Kube();
let nsA: string;
let nsB: string;
let nsC: string;
/** Puts back the platform's default template this file replaced. */
let restoreDefault: () => Promise<void>;
const keyA = `e2b_${randomBytes(20).toString("hex")}`;
const keyB = `e2b_${randomBytes(20).toString("hex")}`;
const keyC = `e2b_${randomBytes(20).toString("hex")}`;
const as = (apiKey: string) => ({ apiKey, apiUrl: GATEWAY, sandboxUrl: GATEWAY, domain: DOMAIN });

async function apiKey(ns: string, key: string) {
  await kube.mustCreate(paths.podapikeys(ns), podAPIKey("agents", key));
}

/**
 * One raw HTTP request to the gateway, so that tests control every header (Host included): its
 * body as text, and parsed when it is JSON.
 */
function raw(
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: string | Buffer,
): Promise<{ status: number; body: Obj; text: string; headers: Obj }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${GATEWAY}${path}`, { method, headers }, res => {
      const chunks: Buffer[] = [];
      res.on("data", c => chunks.push(c as Buffer));
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString();
        const json = String(res.headers["content-type"]).includes("json") && text;
        resolve({
          status: res.statusCode ?? 0,
          body: json ? JSON.parse(text) : {},
          text,
          headers: res.headers,
        });
      });
    });
    req.on("error", reject);
    req.end(body);
  });
}

/** The gateway's Host for a sandbox's user port. */
const portHost = (sbx: Sandbox) => ({ Host: `${PORT}-${sbx.sandboxId}.${DOMAIN}` });

/**
 * Starts port_server.py in a sandbox, detached from the command that starts it (so that no SDK
 * stream stays open), and waits until the gateway reaches it.
 */
async function servePort(sbx: Sandbox) {
  await sbx.files.write(
    "/tmp/port_server.py",
    readFileSync(join(__dirname, "port_server.py"), "utf8"),
  );
  await sbx.commands.run(
    `(python3 /tmp/port_server.py ${PORT} > /tmp/port_server.log 2>&1 < /dev/null &)`,
  );
  for (let i = 0; (await raw("GET", "/ready", portHost(sbx))).status !== 200; i++) {
    if (i > 150) {
      throw new Error(
        `port ${PORT}: ${(await sbx.commands.run("cat /tmp/port_server.log")).stdout}`,
      );
    }
    await new Promise(r => setTimeout(r, 200));
  }
}

/** What a command prints in a sandbox. */
const shell = async (sbx: Sandbox, command: string) => (await sbx.commands.run(command)).stdout;

beforeAll(async () => {
  nsA = await kube.namespace("it-gw-a");
  nsB = await kube.namespace("it-gw-b");
  await kube.mustCreate(paths.podtemplates(nsA), podTemplate("base", SANDBOX));
  for (const ns of [nsA, nsB])
    await kube.mustCreate(paths.podtemplates(ns), podTemplate("cold", COLD));
  await kube.mustCreate(paths.podwarmpools(nsA), {
    apiVersion: "pod.cubeplex.ai/v1alpha1",
    kind: "PodWarmPool",
    metadata: { name: "base" },
    spec: { templateRef: "base", replicas: 2 },
  });
  await apiKey(nsA, keyA);
  await apiKey(nsB, keyB);
  // A tenant with a key and no template: E2B's default template comes from the platform's.
  nsC = await kube.namespace("it-gw-c");
  await apiKey(nsC, keyC);
  restoreDefault = await useTenantDefault(kube, SANDBOX);
  await kube.waitFor(paths.podwarmpools(nsA, "base"), o => o?.status?.readyReplicas === 2, 300_000);
}, 600_000);
afterAll(async () => {
  for (const ns of [nsA, nsB, nsC]) await kube.delete(`/api/v1/namespaces/${ns}`);
  await restoreDefault?.();
  kube.close();
});

describe("the E2B SDK against the gateway", () => {
  it("creates a sandbox from a warm pool, runs a command in it, and kills it", async () => {
    const sbx = await Sandbox.create("base", {
      ...as(keyA),
      envs: { GREETING: "hello" },
      metadata: { agent: "a1" },
    });
    expect(sbx.sandboxId).toMatch(/^[a-z][a-z0-9]{19}$/);
    const box = (await kube.get(paths.podboxes(nsA, sbx.sandboxId))).body;
    expect(box.spec).toEqual(expect.objectContaining({ warmPoolRef: "base" }));
    expect(box.status).toMatchObject({ phase: "Running", reason: "WarmPoolClaimed" });
    // The standby's podd, running before the claim, took the envVars and the access token the
    // SDK holds (podd refuses a call without it).
    expect(await shell(sbx, "printenv GREETING")).toBe("hello\n");
    expect(await shell(sbx, "echo routed")).toBe("routed\n");
    const info = await sbx.getInfo();
    expect(info).toMatchObject({ sandboxId: sbx.sandboxId, templateId: "base", state: "running" });
    expect(info.metadata).toEqual({ agent: "a1" });
    expect(await sbx.kill()).toBe(true);
    await kube.waitFor(paths.podboxes(nsA, sbx.sandboxId), o => o === undefined);
    expect(await Sandbox.kill(sbx.sandboxId, as(keyA))).toBe(false);
  });

  it("starts cold from a template with no pool, and streams output after a quiet gap", async () => {
    const sbx = await Sandbox.create("cold", as(keyA));
    const box = (await kube.get(paths.podboxes(nsA, sbx.sandboxId))).body;
    expect(box.spec).toEqual(expect.objectContaining({ templateRef: "cold" }));
    // Its size, from the template: CPUs and memory from the limits, both volumes' sizes.
    const volumes = (await kube.get(paths.podtemplates(nsA, "cold"))).body.spec;
    const info = await raw("GET", `/sandboxes/${sbx.sandboxId}`, { "X-API-Key": keyA });
    expect(info.body).toMatchObject({
      cpuCount: 2,
      memoryMB: 1024,
      diskSizeMB: (parseInt(volumes.rootfs.size) + parseInt(volumes.workspace.size)) * 1024,
    });
    expect(await shell(sbx, "sleep 3; echo late")).toBe("late\n");
    await sbx.kill();
  });

  it("pauses (409 the second time), resumes on connect with its envVars, and sets the timeout", async () => {
    const sbx = await Sandbox.create("cold", { ...as(keyA), envs: { TOKEN: "kept" } });
    await sbx.files.write("note", "written before the pause");
    const podBefore = (await kube.get(paths.podboxes(nsA, sbx.sandboxId))).body.status.podUID;
    expect(await sbx.pause()).toBe(true);
    expect((await kube.get(paths.podboxes(nsA, sbx.sandboxId))).body.status.phase).toBe("Paused");
    expect((await Sandbox.getInfo(sbx.sandboxId, as(keyA))).state).toBe("paused");
    expect(await Sandbox.pause(sbx.sandboxId, as(keyA))).toBe(false);
    const resumed = await Sandbox.connect(sbx.sandboxId, as(keyA));
    expect(await shell(resumed, "echo back")).toBe("back\n");
    expect(await resumed.files.read("note")).toBe("written before the pause");
    // A new Pod, whose podd starts anew: it gets the create's envVars again, kept sealed in the
    // box (its tenant reads ciphertext), and no Secret.
    const box = (await kube.get(paths.podboxes(nsA, sbx.sandboxId))).body;
    expect(box.status.podUID).not.toBe(podBefore);
    expect(await shell(resumed, "printenv TOKEN")).toBe("kept\n");
    expect(box.metadata.annotations["pod.cubeplex.ai/sandbox-env-vars"]).toMatch(/^v1\./);
    expect(JSON.stringify(box)).not.toContain("kept");
    expect((await kube.get(`/api/v1/namespaces/${nsA}/secrets/${sbx.sandboxId}-envs`)).status).toBe(
      404,
    );
    expect((await resumed.getInfo()).state).toBe("running");
    await resumed.setTimeout(3_600_000);
    const endAt = (await resumed.getInfo()).endAt.getTime();
    expect(endAt).toBeGreaterThan(Date.now() + 3_500_000);
    await resumed.kill();
  });

  it("resumes a paused sandbox created with autoResume on its own traffic, and no other", async () => {
    const lifecycle = { onTimeout: "pause" as const, autoResume: true };
    const sleeper = await Sandbox.create("cold", { ...as(keyA), lifecycle });
    expect((await sleeper.getInfo()).lifecycle).toEqual(lifecycle);
    const plain = await Sandbox.create("cold", as(keyA));
    for (const s of [sleeper, plain]) expect(await s.pause()).toBe(true);
    expect((await sleeper.commands.run("echo woken")).stdout).toBe("woken\n");
    const box = (await kube.get(paths.podboxes(nsA, sleeper.sandboxId))).body;
    expect(box.status).toMatchObject({ phase: "Running", reason: "Resumed" });
    await expect(plain.commands.run("echo no")).rejects.toThrow();
    expect((await kube.get(paths.podboxes(nsA, plain.sandboxId))).body.status.phase).toBe("Paused");
    const metrics = await (await fetch("http://127.0.0.1:8082/metrics")).text();
    expect(metrics).toMatch(/cubepod_gateway_auto_resumes_total [1-9]/);
    for (const s of [sleeper, plain]) await Sandbox.kill(s.sandboxId, as(keyA));
  });

  it("ends sandboxes at their timeout with no gateway running: killed, or paused", async () => {
    const [killed, paused] = await Promise.all([
      Sandbox.create("cold", { ...as(keyA), timeoutMs: 15_000 }),
      Sandbox.create("cold", { ...as(keyA), timeoutMs: 15_000, lifecycle: { onTimeout: "pause" } }),
    ]);
    expect((await paused.getInfo()).lifecycle?.onTimeout).toBe("pause");
    cluster("gateway", "stop");
    try {
      // Both outlived the gateway: what ends them is not the gateway.
      for (const s of [killed, paused]) {
        const box = (await kube.get(paths.podboxes(nsA, s.sandboxId))).body;
        expect(box.status.phase).toBe("Running");
      }
      // The operator's reaper ends them, from the PodBox spec alone.
      const gone = await kube.waitFor(
        paths.podboxes(nsA, killed.sandboxId),
        o => o?.status?.phase === "Terminated",
      );
      expect(gone!.status.reason).toBe("Expired");
      const kept = await kube.waitFor(
        paths.podboxes(nsA, paused.sandboxId),
        o => o?.status?.phase === "Paused",
      );
      expect(kept!.status.reason).toBe("Expired");
    } finally {
      cluster("gateway", "start");
    }
    await expect(Sandbox.getInfo(killed.sandboxId, as(keyA))).rejects.toThrow(SandboxNotFoundError);
    expect((await Sandbox.getInfo(paused.sandboxId, as(keyA))).state).toBe("paused");
    const back = await Sandbox.connect(paused.sandboxId, { ...as(keyA), timeoutMs: 600_000 });
    expect((await back.commands.run("echo again")).stdout).toBe("again\n");
    await back.kill();
    await kube.delete(paths.podboxes(nsA, killed.sandboxId));
  });

  it("forks a sandbox's two volumes into new sandboxes (count), each answered on its own", async () => {
    const parent = await Sandbox.create("cold", { ...as(keyA), metadata: { role: "parent" } });
    await parent.files.write("note", "the parent's");
    const forks = await parent.fork({ ...as(keyA), count: 2 });
    expect(forks).toHaveLength(2);
    for (const f of forks) {
      if (f instanceof Error) throw f;
      const box = (await kube.get(paths.podboxes(nsA, f.sandboxId))).body;
      expect(box.spec).toMatchObject({ forkFrom: parent.sandboxId, templateRef: "cold" });
      expect(box.status).toMatchObject({ phase: "Running", reason: "ForkCloned" });
      const workspace = (await kube.get(paths.pvcs(nsA, box.status.workspacePVCName))).body;
      expect(workspace.spec.dataSource).toMatchObject({ name: `${parent.sandboxId}-workspace` });
      expect(await f.files.read("note")).toBe("the parent's");
      expect((await f.getInfo()).metadata).toEqual({ role: "parent" });
      await f.kill();
    }
    const tooMany = await raw(
      "POST",
      `/sandboxes/${parent.sandboxId}/fork`,
      { "X-API-Key": keyA },
      JSON.stringify({ count: 21 }),
    );
    expect(tooMany).toMatchObject({ status: 400, body: { code: 400 } });
    await parent.kill();
  });

  it("lists a tenant's sandboxes only, filtered by metadata, page by page", async () => {
    const [other, ...made] = await Promise.all([
      Sandbox.create("cold", { ...as(keyB), metadata: { run: "list" } }),
      ...[1, 2, 3].map(i =>
        Sandbox.create("cold", { ...as(keyA), metadata: { run: "list", i: String(i) } }),
      ),
    ]);
    const pager = Sandbox.list({ ...as(keyA), query: { metadata: { run: "list" } }, limit: 2 });
    const first = await pager.nextItems();
    expect(first).toHaveLength(2);
    expect(pager.hasNext).toBe(true);
    const second = await pager.nextItems();
    expect(pager.hasNext).toBe(false);
    expect([...first, ...second].map(s => s.sandboxId).sort()).toEqual(
      made.map(s => s.sandboxId).sort(),
    );
    // Tenant B sees nothing of A's, and cannot act on it.
    const seenByB = await Sandbox.list({
      ...as(keyB),
      query: { metadata: { run: "list" } },
    }).nextItems();
    expect(seenByB.map(s => s.sandboxId)).toEqual([other.sandboxId]);
    await expect(Sandbox.getInfo(made[0].sandboxId, as(keyB))).rejects.toThrow(
      SandboxNotFoundError,
    );
    expect(await Sandbox.kill(made[0].sandboxId, as(keyB))).toBe(false);
    expect((await kube.get(paths.podboxes(nsA, made[0].sandboxId))).status).toBe(200);
    for (const s of [...made, other]) await s.kill();
  });

  it("creates a sandbox with no template named from the platform's `base`, copied to the tenant", async () => {
    const sbx = await Sandbox.create(as(keyC));
    expect((await sbx.commands.run("echo defaulted")).stdout).toBe("defaulted\n");
    const copy = (await kube.get(paths.podtemplates(nsC, "base"))).body;
    const source = (await kube.get(paths.podtemplates(TENANT_DEFAULTS, "base"))).body;
    expect(copy.metadata.annotations["pod.cubeplex.ai/tenant-default"]).toBe(
      `${TENANT_DEFAULTS}/base`,
    );
    expect(copy.spec).toEqual(source.spec);
    const box = (await kube.get(paths.podboxes(nsC, sbx.sandboxId))).body;
    expect(box.spec.templateRef).toBe("base");
    // A tenant's own `base` wins: tenant A's (with its pool) was never replaced.
    const own = (await kube.get(paths.podtemplates(nsA, "base"))).body;
    expect(own.metadata.annotations?.["pod.cubeplex.ai/tenant-default"]).toBeUndefined();
    expect(await sbx.kill()).toBe(true);
  });

  it("refuses an unknown key (401) and an unknown template (400, nothing created)", async () => {
    await expect(Sandbox.create("base", as("e2b_0000"))).rejects.toThrow(AuthenticationError);
    await expect(Sandbox.create("missing", as(keyA))).rejects.toThrow(
      /template "missing": no PodTemplate of that name in your namespace, nor a tenant default/,
    );
    const boxes = (await kube.get(paths.podboxes(nsA))).body.items as Obj[];
    expect(
      boxes.filter(b => b.metadata.annotations?.["pod.cubeplex.ai/sandbox-template"] === "missing"),
    ).toEqual([]);
  });
});

describe("replicas, metrics", () => {
  it("a second replica, as the module manifest ships it, serves the sandboxes the first made", async () => {
    // The bundle from the manifest's code Secret, with its ServiceAccount's RBAC only.
    const port = 18090;
    const second = startDeployedGateway(
      port,
      readFileSync(join(CLUSTER_DIR, "gateway-token-key"), "utf8").trim(),
    );
    try {
      await untilServing(port);
      const other = `http://127.0.0.1:${port}`;
      const deployed = { ...as(keyA), apiUrl: other, sandboxUrl: other };
      const sbx = await Sandbox.create("base", { ...deployed, envs: { REPLICA: "b" } });
      // Both replicas derive the same credential and token from one key: podd, which checks
      // them, answers either.
      const there = await Sandbox.connect(sbx.sandboxId, as(keyA));
      expect(await shell(there, "printenv REPLICA")).toBe("b\n");
      expect(await Sandbox.pause(sbx.sandboxId, deployed)).toBe(true);
      const back = await Sandbox.connect(sbx.sandboxId, deployed);
      expect(await shell(back, "printenv REPLICA")).toBe("b\n");
      expect(await back.kill()).toBe(true);
    } finally {
      process.kill(-second.pid!, "SIGTERM");
    }
  });

  it("counts requests by route and code, times each step of a start, and reports healthy", async () => {
    const metrics = await (await fetch("http://127.0.0.1:8082/metrics")).text();
    expect(metrics).toMatch(/cubepod_gateway_requests_total\{route="create",code="201"\} [1-9]/);
    for (const step of ["write", "run", "init"]) {
      expect(metrics).toMatch(
        new RegExp(`cubepod_gateway_sandbox_start_seconds_count\\{step="${step}"\\} [1-9]`),
      );
    }
    expect(metrics).toMatch(/cubepod_gateway_requests_total\{route="proxy",code="200"\} [1-9]/);
    expect(metrics).toContain("cubepod_gateway_proxied_connections 0");
    expect(metrics).toContain(
      'cubepod_gateway_request_duration_seconds_bucket{le="0.001",route="proxy"}',
    );
    expect((await fetch("http://127.0.0.1:8082/healthz")).status).toBe(200);
  });
});

describe("the E2B Python SDK against the gateway", () => {
  it("creates, runs, lists, pauses, resumes and kills, as a Python agent does", async () => {
    const python = execFileSync("bash", [join(ROOT, "testkit", "python-e2b.sh")], {
      encoding: "utf8",
    }).trim();
    const { stdout: out } = await execFileAsync(python, [join(__dirname, "e2b_agent.py")], {
      encoding: "utf8",
      env: {
        ...process.env,
        E2B_API_URL: GATEWAY,
        E2B_SANDBOX_URL: GATEWAY,
        E2B_DOMAIN: DOMAIN,
        E2B_API_KEY: keyA,
      },
    });
    const seen = JSON.parse(out.trim().split("\n").pop()!);
    expect(seen).toEqual({
      id: expect.stringMatching(/^[a-z][a-z0-9]{19}$/),
      stdout: "from python\n",
      env: "python\n",
      state: "running",
      listed: [seen.id],
      paused: true,
      state_after_pause: "paused",
      stdout_after_resume: "resumed\n",
      env_after_resume: "python\n",
      killed: true,
      killed_again: false,
    });
  });
});

describe("the gateway's own answers to bad or hostile requests", () => {
  let sbx: Sandbox;
  let box: Obj;
  beforeAll(async () => {
    sbx = await Sandbox.create("cold", { ...as(keyA), envs: { SET: "at create" } });
    box = (await kube.get(paths.podboxes(nsA, sbx.sandboxId))).body;
    await servePort(sbx);
  });
  afterAll(async () => {
    await sbx.kill();
  });
  const envd = (path: string, extra: Record<string, string> = {}) =>
    raw(
      "POST",
      path,
      { "E2b-Sandbox-Id": sbx.sandboxId, "E2b-Sandbox-Port": "49983", ...extra },
      "{}",
    );

  it("checks the access token on the daemon's port, and keeps its control paths in", async () => {
    expect((await envd("/process.Process/Start")).status).toBe(401);
    expect((await envd("/process.Process/Start", { "X-Access-Token": "x" })).status).toBe(401);
    const token = accessToken(localTokenKey(), box as PodBox);
    const init = await envd("/init", { "X-Access-Token": token });
    expect(init.status).toBe(404);
    expect(init.body).toMatchObject({ code: 404, sandboxId: sbx.sandboxId });
    // Had it reached podd, its empty envVars would have replaced the create's.
    expect(await shell(sbx, "printenv SET")).toBe("at create\n");
    const health = await raw("GET", "/health", {
      "E2b-Sandbox-Id": sbx.sandboxId,
      "E2b-Sandbox-Port": "49983",
    });
    expect(health.status).toBe(204);
  });

  it("routes a user port by Host <port>-<id>.<domain>, to the box's own address", async () => {
    const r = await raw("POST", "/hello?x=1", portHost(sbx), "payload");
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      ip: box.status.podIP,
      method: "POST",
      url: "/hello?x=1",
      body: "payload",
    });
    // The credential for podd goes to podd's port only.
    expect(r.body.headers[CONTROL_HEADER.toLowerCase()]).toBeUndefined();
  });

  it("answers JSON errors for unknown sandboxes, bad IDs and headers, bad bodies", async () => {
    const unknown = await raw("GET", "/health", {
      "E2b-Sandbox-Id": "nosuchbox",
      "E2b-Sandbox-Port": "49983",
    });
    expect(unknown).toMatchObject({
      status: 502,
      body: { code: 502, sandboxId: "nosuchbox", message: "The sandbox was not found" },
    });
    expect((await raw("GET", "/", { "E2b-Sandbox-Id": sbx.sandboxId })).body.code).toBe(400);
    expect(
      (await raw("GET", "/", { "E2b-Sandbox-Id": "Bad_ID", "E2b-Sandbox-Port": "1" })).status,
    ).toBe(400);
    expect((await raw("GET", "/", { Host: `99999-${sbx.sandboxId}.${DOMAIN}` })).status).toBe(400);
    const auth = { "X-API-Key": keyA, "Content-Type": "application/json" };
    const before = ((await kube.get(paths.podboxes(nsA))).body.items as Obj[]).length;
    expect(await raw("POST", "/v2/sandboxes", auth, "{not json")).toMatchObject({
      status: 400,
      body: { code: 400 },
    });
    const huge = Buffer.alloc(2 * 1024 * 1024, "a");
    expect((await raw("POST", "/v2/sandboxes", auth, huge)).status).toBe(413);
    const bad = await raw(
      "POST",
      "/v2/sandboxes",
      auth,
      JSON.stringify({ templateID: "base", timeout: -1 }),
    );
    expect(bad).toMatchObject({ status: 400, body: { code: 400 } });
    expect(bad.body.message).toContain("timeout");
    expect((await raw("GET", "/sandboxes/Bad_ID", auth)).status).toBe(400);
    expect((await raw("GET", "/nowhere", auth)).body).toMatchObject({ code: 404 });
    expect((await raw("GET", "/sandboxes", {})).body).toMatchObject({ code: 401 });
    expect(((await kube.get(paths.podboxes(nsA))).body.items as Obj[]).length).toBe(before);
  });
});

describe("streams through the proxy", () => {
  let sbx: Sandbox;
  let quietForAMinute: Promise<{ status: number; text: string }>;
  const toPort = (id: string) => ({ "E2b-Sandbox-Id": id, "E2b-Sandbox-Port": String(PORT) });

  beforeAll(async () => {
    sbx = await Sandbox.create("cold", { ...as(keyA), timeoutMs: 600_000 });
    await servePort(sbx);
    // An answer whose headers come at once and its body after a quiet minute, while the tests
    // below run; awaited by the last one.
    quietForAMinute = raw("GET", "/quiet?seconds=65", portHost(sbx));
  });
  afterAll(async () => {
    await sbx.kill();
  });

  it("uploads a gibibyte to a sandbox's port, streamed, not held by the gateway", async () => {
    const rss = async () =>
      Number(
        /^process_resident_memory_bytes (\d+)/m.exec(
          await (await fetch("http://127.0.0.1:8082/metrics")).text(),
        )![1],
      );
    const before = await rss();
    let peak = before;
    const sampler = setInterval(() => void rss().then(r => (peak = Math.max(peak, r))), 100);
    const chunk = randomBytes(1024 * 1024);
    const expected = createHash("sha256");
    try {
      const answer = await new Promise<Obj>((resolve, reject) => {
        const req = httpRequest(
          `${GATEWAY}/sink`,
          { method: "POST", headers: { ...toPort(sbx.sandboxId), "Content-Type": "x/bytes" } },
          res => {
            const parts: Buffer[] = [];
            res.on("data", c => parts.push(c as Buffer));
            res.on("end", () => resolve(JSON.parse(Buffer.concat(parts).toString())));
          },
        );
        req.on("error", reject);
        let sent = 0;
        const more = () => {
          while (sent < 1024) {
            sent++;
            expected.update(chunk);
            if (!req.write(chunk)) return void req.once("drain", more);
          }
          req.end();
        };
        more();
      });
      expect(answer).toEqual({ bytes: 2 ** 30, sha256: expected.digest("hex") });
    } finally {
      clearInterval(sampler);
    }
    // Buffered, the body alone would add a GiB.
    expect(peak - before).toBeLessThan(256 * 1024 * 1024);
  });

  it("carries a WebSocket both ways", async () => {
    const ws = new WebSocket(GATEWAY.replace("http:", "ws:"), {
      headers: toPort(sbx.sandboxId),
    } as ConstructorParameters<typeof WebSocket>[1]);
    const echoes: string[] = [];
    await new Promise<void>((resolve, reject) => {
      ws.onopen = () => ws.send("one");
      ws.onerror = e =>
        reject(new Error(`WebSocket: ${String((e as { message?: string }).message)}`));
      ws.onmessage = m => {
        echoes.push(String(m.data));
        if (echoes.length === 1) ws.send("two");
        else resolve();
      };
    });
    ws.close();
    expect(echoes).toEqual(["one", "two"]);
  });

  it("a gateway restarted mid-traffic: its stream is cut, nothing is lost, it serves again", async () => {
    const key = readFileSync(join(CLUSTER_DIR, "gateway-token-key"), "utf8").trim();
    const port = 18095;
    const via = {
      ...as(keyA),
      apiUrl: `http://127.0.0.1:${port}`,
      sandboxUrl: `http://127.0.0.1:${port}`,
    };
    const boxes = async () =>
      ((await kube.get(paths.podboxes(nsA))).body.items as Obj[]).map(b => b.metadata.uid).sort();
    let gateway = startDeployedGateway(port, key);
    try {
      await untilServing(port);
      const before = await boxes();
      const cut = (await Sandbox.connect(sbx.sandboxId, via)).commands.run("sleep 10; echo never", {
        timeoutMs: 0,
      });
      await new Promise(r => setTimeout(r, 1000));
      process.kill(-gateway.pid!, "SIGKILL");
      await expect(cut).rejects.toThrow();
      gateway = startDeployedGateway(port, key);
      await untilServing(port);
      const again = await Sandbox.connect(sbx.sandboxId, via);
      expect((await again.commands.run("echo again")).stdout).toBe("again\n");
      expect((await again.getInfo()).state).toBe("running");
      expect(await boxes()).toEqual(before);
    } finally {
      process.kill(-gateway.pid!, "SIGTERM");
    }
  });

  it("keeps a stream quiet for over a minute open, through the other gateway's restart", async () => {
    expect(await quietForAMinute).toMatchObject({ status: 200, text: "after 65 seconds" });
  });
});
