import { createHash, randomBytes } from "node:crypto";
import { Agent, request } from "node:http";
import { Sandbox } from "e2b";
import { ECHO_PORT, EnvdStandIn } from "../../hack/lib/envd-stand-in";
import { Kube, paths } from "../../hack/lib/kube";
import { claimTimer, deletePool, startPool } from "../lib/pools";
import { results } from "../lib/results";
import { now, sleep, stats, tenths } from "../lib/stats";

const GATEWAY = `http://127.0.0.1:${process.env.CUBEPOD_GATEWAY_PORT ?? 8080}`;
const ROUNDS = 40;
const PROXIED = 1000;

/** One GET, timed from the request to the end of the answer. */
function get(host: string, port: number, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = now();
    const req = request({ host, port, path: "/", headers, agent: keepAlive }, res => {
      res.resume();
      res.on("end", () => resolve(now() - t0));
    });
    req.on("error", reject);
    req.end();
  });
}
const keepAlive = new Agent({ keepAlive: true });

/**
 * The gateway against its floors, in the same run: the E2B SDK's `Sandbox.create` from a warm
 * pool (to the resolved promise) against a PodBox warm claim made directly; a request proxied to
 * a sandbox's port against the same request sent to the Pod IP.
 */
export async function benchGateway(kube: Kube, ns: string) {
  const key = `e2b_${randomBytes(20).toString("hex")}`;
  await kube.mustCreate(`/api/v1/namespaces/${ns}/secrets`, {
    metadata: { name: "bench-agents" },
    type: "pod.cubeplex.ai/api-key",
    stringData: { sha256: createHash("sha256").update(key).digest("hex") },
  });
  const standIn = new EnvdStandIn(kube, [ns]);
  standIn.start();
  const opts = { apiKey: key, apiUrl: GATEWAY, sandboxUrl: GATEWAY, domain: "cubepod.localhost" };
  const pool = "gw-pool";
  const standbys = await startPool(kube, ns, pool, 25);
  const { claim, stop } = claimTimer(kube, ns, pool, standbys);
  const direct: number[] = [];
  const viaSdk: number[] = [];
  const made: Sandbox[] = [];
  // Alternating, so that both meet the same machine.
  for (let i = 0; i < ROUNDS; i++) {
    await standbys.atLeast(2);
    await sleep(500);
    direct.push(await claim(`gw-direct-${i}`));
    await sleep(500);
    const t0 = now();
    made.push(await Sandbox.create("python", opts));
    viaSdk.push(now() - t0);
  }
  stop();
  standbys.stop();
  const box = (await kube.get(paths.podboxes(ns, made[0].sandboxId))).body;
  const ip = box.status.podIP as string;
  const host = { Host: `${ECHO_PORT}-${made[0].sandboxId}.cubepod.localhost` };
  const proxied: number[] = [];
  const plain: number[] = [];
  for (let i = 0; i < PROXIED; i++) {
    plain.push(await get(ip, ECHO_PORT, {}));
    proxied.push(await get("127.0.0.1", Number(new URL(GATEWAY).port), host));
  }
  for (const s of made) await s.kill();
  standIn.stop();
  await deletePool(kube, ns, pool);
  const c = stats(viaSdk);
  const d = stats(direct);
  const p = stats(proxied);
  const q = stats(plain);
  results.gateway = {
    what: "SDK Sandbox.create (warm) vs a direct PodBox warm claim; a proxied GET vs a direct one (ms)",
    sdkCreate: c,
    directClaim: d,
    addedByGatewayP50: tenths(c.p50 - d.p50),
    proxiedGet: p,
    directGet: q,
    addedByProxyP50: tenths(p.p50 - q.p50),
  };
}
