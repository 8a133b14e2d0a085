import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ALL_TRAFFIC, CommandExitError, Sandbox } from "e2b";
import { CLUSTER_DIR, Kube, Obj, paths, ROOT } from "../../testkit/kube";
import { podAPIKey, podTemplate, realTemplate } from "../../testkit/objects";

/*
 * E2B's egress rules (`allowOut`, `denyOut`, `updateNetwork`) on the real node, under gVisor and
 * runc, enforced by the node egress agent (real-node.sh) outside the sandbox: its code (as root
 * where it says so) reaches the local internet's hosts (real-node.sh, `public_network`:
 * a.<domain> and every name under it at PUBLIC_IP, b.<domain> and every name under it at
 * PUBLIC_IP_B, each answering with what reached it) only as the rules say. Everything goes
 * through the local gateway, as an agent's SDK does.
 */

const GATEWAY = `http://127.0.0.1:${process.env.CUBEPOD_GATEWAY_PORT ?? 8080}`;
const PUBLIC_IP = process.env.CUBEPOD_PUBLIC_IP ?? "198.19.0.10";
const PUBLIC_IP_B = process.env.CUBEPOD_PUBLIC_IP_B ?? "198.19.0.11";
const DOMAIN = process.env.CUBEPOD_INTERNET_DOMAIN ?? "internet.test";
const NODE_IP = process.env.CUBEPOD_REAL_GATEWAY_IP ?? "198.18.0.1";
const AGENT_METRICS = `http://127.0.0.1:${process.env.CUBEPOD_EGRESS_AGENT_HEALTH_PORT ?? 10270}/metrics`;
const A = `a.${DOMAIN}`;
const B = `b.${DOMAIN}`;
const SIZE = "1Gi";
const kube = new Kube();
const key = `e2b_${randomBytes(20).toString("hex")}`;
const opts = { apiKey: key, apiUrl: GATEWAY, sandboxUrl: GATEWAY };
let ns: string;

const gvisor = { ...realTemplate("Filesystem", SIZE), runtimeClassName: "gvisor" };
const TEMPLATES = {
  gvisor: { ...gvisor, rootfs: { size: SIZE, seed: true } },
  runc: realTemplate("Filesystem", SIZE),
  // A platform's deny-list on the template, which its pool's standbys carry already.
  "no-b": { ...realTemplate("Filesystem", SIZE), network: { denyOut: [`${PUBLIC_IP_B}/32`] } },
};

beforeAll(async () => {
  ns = await kube.namespace("it-egress");
  for (const [name, spec] of Object.entries(TEMPLATES)) {
    await kube.mustCreate(paths.podtemplates(ns), podTemplate(name, spec));
  }
  await kube.mustCreate(paths.podapikeys(ns), podAPIKey("agents", key));
  await kube.mustCreate(paths.podwarmpools(ns), {
    apiVersion: "pod.cubeplex.ai/v1alpha1",
    kind: "PodWarmPool",
    metadata: { name: "no-b" },
    spec: { templateRef: "no-b", replicas: 1 },
  });
});
afterAll(async () => {
  await kube.delete(`/api/v1/namespaces/${ns}`);
  kube.close();
});

/**
 * What a host of the local internet saw of a request the sandbox made with curl (`-k`: the
 * internet's CA is not the sandbox's), or "refused" when it got no answer.
 */
async function fetchOut(sbx: Sandbox, url: string, curlArgs = "", user?: "root") {
  try {
    const r = await sbx.commands.run(`curl -sk --max-time 5 ${curlArgs} ${url}`, {
      ...(user ? { user } : {}),
      timeoutMs: 20_000,
    });
    return JSON.parse(r.stdout) as { address: string; serverName: string | null; host: string };
  } catch (e) {
    if (e instanceof CommandExitError) return "refused" as const;
    throw e;
  }
}

const seenAt = (seen: Awaited<ReturnType<typeof fetchOut>>) =>
  seen === "refused" ? seen : seen.address;

/**
 * Waits until the sandbox reaches a URL it may reach: a new Pod's egress waits for the network
 * plugin to admit it to its template's policy, as any Pod's does.
 */
async function reaches(sbx: Sandbox, url: string) {
  for (let i = 0; i < 30; i++) {
    if ((await fetchOut(sbx, url, "--max-time 1")) !== "refused") return;
    await new Promise(r => setTimeout(r, 500));
  }
  throw new Error(`${sbx.sandboxId} never reached ${url}`);
}

describe.each(["gvisor", "runc"])("an allow-list of domains, under %s", template => {
  let sbx: Sandbox;
  beforeAll(async () => {
    sbx = await Sandbox.create(template, {
      ...opts,
      network: { allowOut: [A, `*.${B}`], denyOut: [ALL_TRAFFIC] },
    });
    await reaches(sbx, `http://${A}/`);
  }, 120_000);
  afterAll(() => sbx?.kill());

  it("reaches the names it lists, by TLS server name and by HTTP Host", async () => {
    const tls = await fetchOut(sbx, `https://${A}/`);
    expect(tls).toMatchObject({ address: PUBLIC_IP, serverName: A });
    expect(await fetchOut(sbx, `http://${A}/`)).toMatchObject({ address: PUBLIC_IP, host: A });
    // A wildcard takes the names under it, not the name itself.
    expect(await fetchOut(sbx, `http://x.${B}/`)).toMatchObject({ address: PUBLIC_IP_B });
    expect(await fetchOut(sbx, `http://${B}/`)).toBe("refused");
  });

  it("grants nothing by the address a name resolves to, nor to a name sent to another address", async () => {
    expect(await fetchOut(sbx, `http://${PUBLIC_IP}/`)).toBe("refused");
    expect(await fetchOut(sbx, `https://${PUBLIC_IP}/`)).toBe("refused");
    // A refused name at an allowed name's address: refused.
    expect(await fetchOut(sbx, `https://${B}/`, `--resolve ${B}:443:${PUBLIC_IP}`)).toBe("refused");
    // An allowed name pointed elsewhere (the sandbox's own /etc/hosts): the name is dialed as
    // the node resolves it, so the request reaches that name's host, not the address given.
    expect(seenAt(await fetchOut(sbx, `http://${A}/`, `--resolve ${A}:80:${PUBLIC_IP_B}`))).toBe(
      PUBLIC_IP,
    );
    // The agent counts what it refused.
    const metrics = await (await fetch(AGENT_METRICS)).text();
    const refused =
      /^cubepod_egress_connections_total\{match="cidr",port="tls",verdict="refused"\} (\d+)/m;
    expect(Number(refused.exec(metrics)?.[1])).toBeGreaterThanOrEqual(2);
  });

  it("cannot get round the agent as root, and resolves names", async () => {
    expect(await fetchOut(sbx, `http://${NODE_IP}:15080/`, `-H 'Host: ${A}'`, "root")).toBe(
      "refused",
    );
    // Its resolver is open to it, as E2B opens its nameserver to a sandbox with domains.
    const looked = await sbx.commands.run(`getent hosts x.${B}`);
    expect(looked.stdout).toContain(PUBLIC_IP_B);
  });
});

describe("a sandbox's rules changed while it runs (PUT /network)", () => {
  let sbx: Sandbox;
  beforeAll(async () => {
    sbx = await Sandbox.create("gvisor", opts);
    await reaches(sbx, `http://${B}/`);
  }, 120_000);
  afterAll(() => sbx?.kill());

  it("holds once updateNetwork returns, and lifts once the next one does", async () => {
    expect(seenAt(await fetchOut(sbx, `http://${B}/`))).toBe(PUBLIC_IP_B);
    await sbx.updateNetwork({ denyOut: [`${PUBLIC_IP_B}/32`] });
    expect(await fetchOut(sbx, `http://${B}/`)).toBe("refused");
    expect(seenAt(await fetchOut(sbx, `http://${A}/`))).toBe(PUBLIC_IP);
    const info = await Sandbox.getInfo(sbx.sandboxId, opts);
    expect(info).toMatchObject({ allowInternetAccess: true });
    await sbx.updateNetwork({ allowInternetAccess: false });
    expect(await fetchOut(sbx, `http://${A}/`)).toBe("refused");
    await sbx.updateNetwork({});
    expect(seenAt(await fetchOut(sbx, `http://${B}/`))).toBe(PUBLIC_IP_B);
  });
});

describe("the node egress agent killed", () => {
  it("leaves its node's rules holding, failing closed, and converges when it is back", async () => {
    const byName = await Sandbox.create("runc", {
      ...opts,
      network: { allowOut: [A], denyOut: [ALL_TRAFFIC] },
    });
    const byAddress = await Sandbox.create("runc", {
      ...opts,
      network: { denyOut: [`${PUBLIC_IP_B}/32`] },
    });
    try {
      await reaches(byName, `http://${A}/`);
      await reaches(byAddress, `http://${A}/`);
      const pid = Number(readFileSync(join(CLUSTER_DIR, "pids", "egress-agent.pid"), "utf8"));
      process.kill(-pid, "SIGKILL");
      // Its table stays: addresses are still decided, and what needs its proxy finds none.
      expect(await fetchOut(byAddress, `http://${B}/`)).toBe("refused");
      expect(seenAt(await fetchOut(byAddress, `http://${A}/`))).toBe(PUBLIC_IP);
      expect(await fetchOut(byName, `http://${A}/`)).toBe("refused");
      execFileSync("bash", [join(ROOT, "local-cluster", "real-node.sh"), "egress-agent", "on"], {
        stdio: "ignore",
      });
      await reaches(byName, `http://${A}/`);
      expect(await fetchOut(byName, `http://${B}/`)).toBe("refused");
      expect(await fetchOut(byAddress, `http://${B}/`)).toBe("refused");
      // And it serves a change again.
      await byAddress.updateNetwork({});
      expect(seenAt(await fetchOut(byAddress, `http://${B}/`))).toBe(PUBLIC_IP_B);
    } finally {
      execFileSync("bash", [join(ROOT, "local-cluster", "real-node.sh"), "egress-agent", "on"], {
        stdio: "ignore",
      });
      await Promise.all([byName.kill(), byAddress.kill()]);
    }
  }, 240_000);
});

describe("a paused sandbox's rules", () => {
  it("change for its resume", async () => {
    const sbx = await Sandbox.create("runc", opts);
    try {
      await reaches(sbx, `http://${B}/`);
      await sbx.pause();
      await Sandbox.updateNetwork(sbx.sandboxId, { denyOut: [`${PUBLIC_IP_B}/32`] }, opts);
      const resumed = await Sandbox.connect(sbx.sandboxId, opts);
      await reaches(resumed, `http://${A}/`);
      expect(await fetchOut(resumed, `http://${B}/`)).toBe("refused");
    } finally {
      await sbx.kill();
    }
  }, 180_000);
});

describe("a template's rules", () => {
  it("hold for a warm claim, and a sandbox's own replace them", async () => {
    await kube.waitFor(
      paths.podwarmpools(ns, "no-b"),
      o => o?.status?.readyReplicas === 1,
      180_000,
    );
    const claimed = await Sandbox.create("no-b", opts);
    try {
      const box: Obj = (await kube.get(paths.podboxes(ns, claimed.sandboxId))).body;
      expect(box.status.reason).toBe("WarmPoolClaimed");
      await reaches(claimed, `http://${A}/`);
      expect(await fetchOut(claimed, `http://${B}/`)).toBe("refused");
      expect(seenAt(await fetchOut(claimed, `http://${A}/`))).toBe(PUBLIC_IP);
    } finally {
      await claimed.kill();
    }
    const own = await Sandbox.create("no-b", {
      ...opts,
      network: { denyOut: [`${PUBLIC_IP}/32`] },
    });
    try {
      await reaches(own, `http://${B}/`);
      expect(await fetchOut(own, `http://${A}/`)).toBe("refused");
      expect(seenAt(await fetchOut(own, `http://${B}/`))).toBe(PUBLIC_IP_B);
    } finally {
      await own.kill();
    }
  }, 300_000);
});
