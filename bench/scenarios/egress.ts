import { ALL_TRAFFIC, Sandbox, type SandboxOpts } from "e2b";
import type { Kube } from "../../testkit/kube";
import { results } from "../lib/results";
import { sdkTenant } from "../lib/sdk";
import { now, stats, tenths } from "../lib/stats";

const PUBLIC_IP_B = process.env.CUBEPOD_PUBLIC_IP_B ?? "198.19.0.11";
const DOMAIN = process.env.CUBEPOD_INTERNET_DOMAIN ?? "internet.test";
const HOST = `a.${DOMAIN}`;
/** Requests per round, each on a new connection; rounds per arm, the arms taking turns. */
const REQUESTS = 50;
const ROUNDS = 4;
const DOWNLOAD_MIB = 100;
const DOWNLOADS = 3;
const UPDATES = 10;

/**
 * Inside the sandbox: `requests HOST N` times N requests, each on a new connection (what the node
 * egress agent's proxy adds is per connection), in ms; `download HOST MIB` times one download.
 */
const SCRIPT = `
import http.client, json, sys, time
def get(host, path):
    c = http.client.HTTPConnection(host, 80, timeout=30)
    c.request("GET", path)
    r = c.getresponse()
    n = 0
    while True:
        b = r.read(1 << 20)
        if not b:
            break
        n += len(b)
    c.close()
    return n
if sys.argv[1] == "requests":
    out = []
    for _ in range(int(sys.argv[3])):
        t = time.perf_counter()
        get(sys.argv[2], "/")
        out.append((time.perf_counter() - t) * 1000)
    print(json.dumps(out))
else:
    t = time.perf_counter()
    n = get(sys.argv[2], "/bytes/%d" % (int(sys.argv[3]) << 20))
    print(json.dumps({"bytes": n, "seconds": time.perf_counter() - t}))
`;

/**
 * What the node egress agent costs a sandbox's traffic to the local internet, against the same
 * traffic from a sandbox it does not police (the floor: straight through the node): HTTP
 * requests on new connections and a 100 MiB download, from three runc sandboxes on the real node
 * that differ only in their rules (none; a deny-list of addresses, decided in the node's table;
 * an allow-list of the host's name, through the agent's proxy), in turns. And `updateNetwork`'s round trip: the gateway's write,
 * the operator's, the agent's table, its answer, the operator's condition.
 */
export async function benchEgress(kube: Kube) {
  const { ns, opts, standbys } = await sdkTenant(kube, "bench-egress", 1);
  const arms: Record<"open" | "denyList" | "allowList", Pick<SandboxOpts, "network">> = {
    open: {},
    denyList: { network: { denyOut: [`${PUBLIC_IP_B}/32`] } },
    allowList: { network: { allowOut: [HOST], denyOut: [ALL_TRAFFIC] } },
  };
  const sandboxes: Partial<Record<keyof typeof arms, Sandbox>> = {};
  const requests: Record<string, number[]> = { open: [], denyList: [], allowList: [] };
  const mibPerSecond: Record<string, number[]> = { open: [], denyList: [], allowList: [] };
  const updates: number[] = [];
  try {
    for (const [arm, extra] of Object.entries(arms)) {
      const sbx = await Sandbox.create("real", { ...opts, ...extra, timeoutMs: 1_800_000 });
      await sbx.files.write("/tmp/egress-bench.py", SCRIPT);
      sandboxes[arm as keyof typeof arms] = sbx;
    }
    standbys.stop();
    const run = async (arm: keyof typeof arms, args: string) =>
      JSON.parse(
        (
          await sandboxes[arm]!.commands.run(`python3 /tmp/egress-bench.py ${args}`, {
            timeoutMs: 300_000,
          })
        ).stdout,
      );
    for (let round = 0; round < ROUNDS; round++) {
      for (const arm of Object.keys(arms) as (keyof typeof arms)[]) {
        requests[arm].push(...(await run(arm, `requests ${HOST} ${REQUESTS}`)));
      }
    }
    for (let i = 0; i < DOWNLOADS; i++) {
      for (const arm of Object.keys(arms) as (keyof typeof arms)[]) {
        const d = await run(arm, `download ${HOST} ${DOWNLOAD_MIB}`);
        mibPerSecond[arm].push(d.bytes / 2 ** 20 / d.seconds);
      }
    }
    const sbx = sandboxes.denyList!;
    for (let i = 0; i < UPDATES; i++) {
      const t0 = now();
      await sbx.updateNetwork({ denyOut: [i % 2 === 0 ? `${PUBLIC_IP_B}/32` : "198.19.0.12/32"] });
      updates.push(now() - t0);
    }
  } finally {
    standbys.stop();
    await Promise.all(Object.values(sandboxes).map(s => s?.kill()));
    await kube.delete(`/api/v1/namespaces/${ns}`);
  }
  const r = Object.fromEntries(Object.entries(requests).map(([k, v]) => [k, stats(v)]));
  const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];
  const mib = Object.fromEntries(
    Object.entries(mibPerSecond).map(([k, v]) => [k, Math.round(median(v))]),
  );
  results.egress = {
    what:
      "runc sandboxes on the real node, their HTTP to the local internet (a new connection per " +
      "request, ms; a 100 MiB download, MiB/s, median of 3) without rules (floor) and through " +
      "the node egress agent with a deny-list (addresses) and an allow-list (by name); " +
      "updateNetwork's round trip until the node enforces it (ms)",
    requests: r,
    requestP50OverFloor: {
      denyList: tenths(r.denyList.p50 / r.open.p50),
      allowList: tenths(r.allowList.p50 / r.open.p50),
    },
    downloadMiBPerSecond: mib,
    updateNetwork: stats(updates),
  };
}
