import { generateKeyPairSync, randomBytes } from "node:crypto";
import { CommandExitError, Sandbox } from "e2b";
import { Kube, Obj, paths } from "../../testkit/kube";
import { podAPIKey, podTemplate, REAL_NODE_PLACEMENT, realTemplate } from "../../testkit/objects";
import { localTokenKey } from "../../testkit/podd-client";
import { CONTROL_HEADER, PoddControl, signGrant } from "../../gateway/podd-control";
import type { PodBox } from "../../capabilities/api/kinds";

/*
 * Sandboxes on the real node as hostile tenants try them: the code of tenant A's sandbox (as
 * root, through its own `commands.run`) and a plain Pod of another namespace go for tenant B's
 * sandbox, B's warm standby, the node and the API server; the sandboxes' daemons are called
 * with guessed and forged credentials. The NetworkPolicies CubePod writes are enforced by
 * kube-router on the node (real-node.sh); the internet is the local cluster's own, a network
 * namespace of this machine whose hosts answer with what they were sent (PUBLIC_IP). Everything goes through the local gateway (127.0.0.1:8080), as an
 * agent's SDK does.
 */

const GATEWAY = `http://127.0.0.1:${process.env.CUBEPOD_GATEWAY_PORT ?? 8080}`;
const PUBLIC_IP = process.env.CUBEPOD_PUBLIC_IP ?? "198.19.0.10";
const NODE_IP = process.env.CUBEPOD_REAL_GATEWAY_IP ?? "198.18.0.1";
const API_SERVICE_IP = process.env.CUBEPOD_KUBERNETES_SERVICE_IP ?? "198.18.1.1";
const KUBELET_PORT = process.env.CUBEPOD_KUBELET_PORT ?? "10260";
const APISERVER_PORT = process.env.CUBEPOD_APISERVER_PORT ?? "16443";
const GATEWAY_METRICS_PORT = "8082";
const SIZE = "1Gi";
const kube = new Kube();
const keyA = `e2b_${randomBytes(20).toString("hex")}`;
const keyB = `e2b_${randomBytes(20).toString("hex")}`;
const as = (apiKey: string) => ({ apiKey, apiUrl: GATEWAY, sandboxUrl: GATEWAY });
let nsA: string;
let nsB: string;
let nsPlain: string;
/** Tenant B's sandbox, its box, and the standby of B's pool. */
let sbxB: Sandbox;
let boxB: Obj;
let standby: Obj;

async function apiKey(ns: string, key: string) {
  await kube.mustCreate(paths.podapikeys(ns), podAPIKey("agents", key));
}

const template = (name: string, extra: object = {}) =>
  podTemplate(name, { ...realTemplate("Filesystem", SIZE), ...extra });

/** The template's `NetworkIsolated` condition, once its policies have been applied. */
const isolated = (ns: string, name: string) =>
  kube.waitFor(
    paths.podtemplates(ns, name),
    o => o?.status?.conditions?.some((c: Obj) => c.type === "NetworkIsolated"),
    60_000,
  );

beforeAll(async () => {
  nsA = await kube.namespace("it-net-a");
  nsB = await kube.namespace("it-net-b");
  nsPlain = await kube.namespace("it-net-plain");
  await kube.mustCreate(paths.secrets(nsA), {
    metadata: { name: "egress-creds" },
    stringData: { token: "sidecar-secret-77" },
  });
  for (const t of [
    template("real"),
    template("offline", { network: { egress: "None" } }),
    template("listed", { network: { egress: "None", egressCIDRs: [`${PUBLIC_IP}/32`] } }),
    template("proxied", {
      egress: { enabled: true, allowHosts: [PUBLIC_IP], secretName: "egress-creds" },
    }),
  ]) {
    await kube.mustCreate(paths.podtemplates(nsA), t);
  }
  await kube.mustCreate(paths.podtemplates(nsB), template("real"));
  await kube.mustCreate(paths.podwarmpools(nsB), {
    apiVersion: "pod.cubeplex.ai/v1alpha1",
    kind: "PodWarmPool",
    metadata: { name: "standby" },
    spec: { templateRef: "real", replicas: 1 },
  });
  await apiKey(nsA, keyA);
  await apiKey(nsB, keyB);
  await kube.waitFor(paths.podwarmpools(nsB, "standby"), o => o?.status?.readyReplicas === 1);
  sbxB = await Sandbox.create("real", { ...as(keyB), envs: { SECRET: "b-env-1" } });
  await sbxB.files.write("/workspace/secret.txt", "b-secret-42");
  await sbxB.commands.run(
    "mkdir -p /tmp/www && echo b-port > /tmp/www/index.html && " +
      "(python3 -m http.server 8000 --directory /tmp/www >/dev/null 2>&1 &)",
  );
  boxB = (await kube.get(paths.podboxes(nsB, sbxB.sandboxId))).body;
  // B's sandbox took the standby there was: the next one is the pool's replenishment.
  const ready = (p: Obj) =>
    p.status?.conditions?.some((c: Obj) => c.type === "Ready" && c.status === "True");
  for (let i = 0; i < 240 && !standby; i++) {
    const pods = await kube.get(`${paths.pods(nsB)}?labelSelector=pod.cubeplex.ai/pool=standby`);
    standby = pods.body.items.find(ready);
    if (!standby) await new Promise(r => setTimeout(r, 500));
  }
  if (!standby) throw new Error("B's pool made no new standby");
});
afterAll(async () => {
  for (const ns of [nsA, nsB, nsPlain]) await kube.delete(`/api/v1/namespaces/${ns}`);
  kube.close();
});

/** The outcome of each probe: "open" when a TCP connection was made, else "closed". */
/**
 * A shell condition: a TCP connection to host:port opens within 2 s. With busybox's `nc` (the
 * plain Pod's image), else with bash's /dev/tcp (the Debian sandbox image has no nc).
 */
const connects = (host: string, port: string) =>
  `{ if command -v nc >/dev/null; then nc -w 2 ${host} ${port} </dev/null >/dev/null 2>&1; ` +
  `else timeout 2 bash -c 'exec 3<>/dev/tcp/${host}/${port}' 2>/dev/null; fi; }`;

const probeScript = (targets: string[]) =>
  targets
    .map(t => {
      const [host, port] = t.split(":");
      return `if ${connects(host, port)}; then echo "${t} open"; else echo "${t} closed"; fi`;
    })
    .join("\n");

const outcomes = (stdout: string) =>
  Object.fromEntries(
    stdout
      .trim()
      .split("\n")
      .map(l => l.split(" ") as [string, string]),
  );

/**
 * A shell command that sends one HTTP/1.0 request with busybox's nc and prints the answer's
 * status line and its last line (the body of the short answers here). Its input stays open a
 * moment: a server may take the end of a request's stream for the client going away.
 */
const http = (host: string, port: number, request: string) => {
  // Nothing after a body: a server that closes with unread bytes resets the connection, and the
  // reset can overtake its answer.
  const raw = (request.includes("\n\n") ? request : `${request}\n\n`).replaceAll("\n", "\\r\\n");
  return `timeout 5 bash -c 'exec 3<>/dev/tcp/${host}/${port} && printf "${raw}" >&3 && cat <&3' | sed -n '1p;$p'`;
};

/**
 * A shell command that lists the files under `paths` holding `secret`, which its own command
 * line holds only reversed: no process shows it but those that had it before.
 */
const filesHolding = (secret: string, paths: string) =>
  `printf '${[...secret].map(c => "\\x" + c.charCodeAt(0).toString(16).padStart(2, "0")).join("")}' >/tmp/.pattern; grep -rlFf /tmp/.pattern ${paths} 2>/dev/null; rm -f /tmp/.pattern; true`;

/**
 * Runs a command in the sandbox (through the gateway), as root unless it names `user`; its
 * stdout, whatever its exit.
 */
async function run(sbx: Sandbox, command: string, user: "user" | "root" = "root"): Promise<string> {
  try {
    return (await sbx.commands.run(command, { user, timeoutMs: 60_000 })).stdout;
  } catch (e) {
    if (e instanceof CommandExitError) return `${e.stdout}${e.stderr}exit=${e.exitCode}`;
    throw e;
  }
}

/** Where a hostile tenant goes: tenant B's sandbox (its daemon, its own server), B's standby. */
const tenantB = () => [
  `${boxB.status.podIP}:49983`,
  `${boxB.status.podIP}:8000`,
  `${boxB.status.podIP}:22`,
  `${standby.status.podIP}:49983`,
];
/** The node and the cluster: the kubelet, the API server (address and Service IP), the gateway's metrics. */
const theNode = [
  `${NODE_IP}:${KUBELET_PORT}`,
  `${NODE_IP}:${APISERVER_PORT}`,
  `${API_SERVICE_IP}:443`,
  `${NODE_IP}:${GATEWAY_METRICS_PORT}`,
  "169.254.169.254:80",
];

describe("a sandbox's daemon obeys only the gateway", () => {
  /** A request to B's daemon straight from this machine, which NetworkPolicy lets through. */
  const toB = (path: string, headers: Record<string, string> = {}, body?: string) =>
    fetch(`http://${boxB.status.podIP}:49983${path}`, {
      method: body === undefined ? "GET" : "POST",
      headers: { "Content-Type": "application/json", ...headers },
      body,
    });

  it("refuses /init, files and processes without the gateway's credential for its Pod and box", async () => {
    const forger = generateKeyPairSync("ed25519").privateKey;
    const guessed = { "X-Access-Token": "guessed", [CONTROL_HEADER]: "guessed" };
    const forged = {
      [CONTROL_HEADER]: signGrant(forger, boxB.metadata.uid, boxB.status.podUID),
    };
    const initBody = JSON.stringify({ accessToken: "pwned-by-a" });
    expect((await toB("/init", {}, initBody)).status).toBe(401);
    expect((await toB("/init", guessed, initBody)).status).toBe(401);
    expect((await toB("/init", forged, initBody)).status).toBe(401);
    // The gateway's own key, for another box on B's Pod: the daemon serves B's box only.
    const control = new PoddControl(localTokenKey());
    const otherBox = control.credential({
      metadata: { uid: "another-box" },
      status: { podUID: boxB.status.podUID },
    } as PodBox)!;
    expect((await toB("/init", { [CONTROL_HEADER]: otherBox }, initBody)).status).toBe(403);
    for (const headers of [{}, guessed, forged, { [CONTROL_HEADER]: otherBox }]) {
      expect(
        (await toB("/files?path=/workspace/secret.txt", headers)).status,
      ).toBeGreaterThanOrEqual(401);
      const start = await toB("/process.Process/Start", headers, "{}");
      expect([401, 403]).toContain(start.status);
    }
    // B's sandbox is as it was: its token, environment and files, through the gateway.
    expect(await sbxB.files.read("/workspace/secret.txt")).toBe("b-secret-42");
    expect((await sbxB.commands.run("echo $SECRET")).stdout).toBe("b-env-1\n");
  });

  it("a standby refuses everything but /health and a valid /init", async () => {
    const at = (path: string, headers: Record<string, string> = {}, body?: string) =>
      fetch(`http://${standby.status.podIP}:49983${path}`, {
        method: body === undefined ? "GET" : "POST",
        headers,
        body,
      });
    expect((await at("/health")).status).toBe(204);
    expect((await at("/files?path=/etc/passwd", { "X-Access-Token": "any" })).status).toBe(403);
    expect((await at("/init", {}, "{}")).status).toBe(401);
    const forger = generateKeyPairSync("ed25519").privateKey;
    const forged = signGrant(forger, "some-box", standby.metadata.uid);
    expect((await at("/init", { [CONTROL_HEADER]: forged }, "{}")).status).toBe(401);
    expect((await at("/files?path=/etc/passwd", { [CONTROL_HEADER]: forged })).status).toBe(403);
  });

  it("its own code cannot read the credential as `user`, nor take control of its own daemon", async () => {
    const sbx = await Sandbox.create("real", as(keyA));
    const box = (await kube.get(paths.podboxes(nsA, sbx.sandboxId))).body as PodBox;
    const credential = new PoddControl(localTokenKey()).credential(box)!;
    expect(await run(sbx, "id -u", "user")).toBe("1000\n");
    expect(await run(sbx, "cat /proc/1/environ >/dev/null 2>&1 || echo denied", "user")).toBe(
      "denied\n",
    );
    expect(
      await run(
        sbx,
        filesHolding(credential, "/proc/[0-9]*/environ /proc/[0-9]*/cmdline /home /workspace"),
        "user",
      ),
    ).toBe("");
    const init = `POST /init HTTP/1.0\nContent-Type: application/json\nContent-Length: 2\n\n{}`;
    expect(await run(sbx, http("127.0.0.1", 49983, init))).toContain("401");
    // No API credentials in the sandbox either.
    expect(await run(sbx, "ls /var/run/secrets/kubernetes.io/serviceaccount 2>&1; true")).toContain(
      "No such file",
    );
    await sbx.kill();
  });
});

describe("sandboxes on the network", () => {
  it("tenant A's sandbox, as root, reaches the internet but not B's sandbox or standby, the node, the API server or the metadata address", async () => {
    const sbx = await Sandbox.create("real", as(keyA));
    const seen = outcomes(
      await run(sbx, probeScript([...tenantB(), ...theNode, `${PUBLIC_IP}:80`])),
    );
    expect(seen).toEqual({
      ...Object.fromEntries([...tenantB(), ...theNode].map(t => [t, "closed"])),
      [`${PUBLIC_IP}:80`]: "open",
    });
    expect(await run(sbx, http(PUBLIC_IP, 80, "GET /from-a HTTP/1.0"))).toContain(
      '"path":"/from-a"',
    );
    // By name, through the node's resolver (the local internet's DNS server), as agents reach it.
    const byName = JSON.parse(await run(sbx, "curl -s http://x.a.internet.test/by-name", "user"));
    expect(byName).toMatchObject({
      address: PUBLIC_IP,
      host: "x.a.internet.test",
      path: "/by-name",
    });
    await sbx.kill();
  });

  it("a plain Pod of another namespace reaches neither B's sandbox nor its standby", async () => {
    await kube.mustCreate(paths.pods(nsPlain), {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "intruder" },
      spec: {
        ...REAL_NODE_PLACEMENT,
        restartPolicy: "Never",
        terminationGracePeriodSeconds: 0,
        containers: [
          {
            name: "probe",
            image: "cubepod.local/busybox:1",
            imagePullPolicy: "IfNotPresent",
            command: ["/bin/sh", "-c", probeScript([...tenantB(), `${PUBLIC_IP}:80`])],
          },
        ],
      },
    });
    await kube.waitFor(
      paths.pods(nsPlain, "intruder"),
      o => o?.status?.phase === "Succeeded",
      120_000,
    );
    const logs = await kube.request("GET", `${paths.pods(nsPlain, "intruder")}/log`);
    expect(outcomes(logs.body.raw)).toEqual({
      ...Object.fromEntries(tenantB().map(t => [t, "closed"])),
      // The plain Pod is none of CubePod's: its own egress is its namespace's business.
      [`${PUBLIC_IP}:80`]: "open",
    });
    expect(await sbxB.files.read("/workspace/secret.txt")).toBe("b-secret-42");
  });

  it("with egress None, or allowInternetAccess false, a sandbox reaches nothing; with named CIDRs, only those", async () => {
    const everything = [`${PUBLIC_IP}:80`, ...tenantB(), ...theNode];
    const closed = Object.fromEntries(everything.map(t => [t, "closed"]));
    const offline = await Sandbox.create("offline", as(keyA));
    expect(outcomes(await run(offline, probeScript(everything)))).toEqual(closed);
    const noInternet = await Sandbox.create("real", { ...as(keyA), allowInternetAccess: false });
    expect(outcomes(await run(noInternet, probeScript(everything)))).toEqual(closed);
    expect((await noInternet.getInfo()).allowInternetAccess).toBe(false);
    const listed = await Sandbox.create("listed", as(keyA));
    expect(outcomes(await run(listed, probeScript(everything)))).toEqual({
      ...closed,
      [`${PUBLIC_IP}:80`]: "open",
    });
    await Promise.all([offline.kill(), noInternet.kill(), listed.kill()]);
  });

  it("with the egress sidecar, the sidecar is the only way out, and its credentials stay out of sight", async () => {
    const sbx = await Sandbox.create("proxied", as(keyA));
    expect(outcomes(await run(sbx, probeScript([`${PUBLIC_IP}:80`])))).toEqual({
      [`${PUBLIC_IP}:80`]: "closed",
    });
    // HTTP_PROXY points at the sidecar, which reaches the allowed host and nothing else.
    const viaProxy = (url: string) =>
      run(sbx, http("127.0.0.1", 15001, `GET ${url} HTTP/1.0\nHost: ${new URL(url).host}`));
    expect(await run(sbx, "echo $HTTP_PROXY")).toBe("http://127.0.0.1:15001\n");
    expect(await viaProxy(`http://${PUBLIC_IP}/via-proxy`)).toContain('"path":"/via-proxy"');
    const refused = await viaProxy(`http://${NODE_IP}:${KUBELET_PORT}/`);
    expect(refused).toContain("403");
    expect(refused).toContain(`cubepod-egress: ${NODE_IP} is not an allowed host`);
    expect(
      await run(
        sbx,
        "cat /etc/cubepod/egress/token 2>&1; ps -o comm | grep -c cubepod-egress; " +
          filesHolding("sidecar-secret-77", "/proc/[0-9]*/environ /etc /workspace"),
      ),
    ).toBe("cat: /etc/cubepod/egress/token: No such file or directory\n0\n");
    await sbx.kill();
  });
});

describe("the policies CubePod owns", () => {
  it("are reported on each template, and come back when someone deletes them", async () => {
    for (const name of ["real", "offline", "listed", "proxied"]) {
      const t = await isolated(nsA, name);
      expect(t?.status.conditions.find((c: Obj) => c.type === "NetworkIsolated")).toMatchObject({
        status: "True",
        reason: "PoliciesApplied",
      });
    }
    const policies = await kube.get(paths.networkpolicies(nsA));
    expect(policies.body.items.map((p: Obj) => p.metadata.name).sort()).toEqual([
      "cubepod-egress-listed",
      "cubepod-egress-proxied",
      "cubepod-egress-real",
      "cubepod-sandboxes",
    ]);
    await kube.delete(paths.networkpolicies(nsA, "cubepod-sandboxes"));
    await kube.waitFor(paths.networkpolicies(nsA, "cubepod-sandboxes"), o => Boolean(o), 30_000);
    // A template changed to reach nothing loses its egress policy.
    await kube.mergePatch(paths.podtemplates(nsA, "listed"), {
      spec: { network: { egressCIDRs: null } },
    });
    await kube.waitFor(paths.networkpolicies(nsA, "cubepod-egress-listed"), o => !o, 30_000);
  });
});
