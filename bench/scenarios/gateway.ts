import { createHash, randomBytes } from "node:crypto";
import { Agent, request } from "node:http";
import { connect, Socket } from "node:net";
import { spawn } from "node:child_process";
import { join } from "node:path";
import { Sandbox } from "e2b";
import { ECHO_PORT } from "../../hack/lib/envd-stand-in";
import { Kube, paths, ROOT } from "../../hack/lib/kube";
import { podTemplate, TEMPLATE } from "../../hack/lib/objects";
import { claimTimer, deletePool, startPool } from "../lib/pools";
import { results } from "../lib/results";
import { now, sleep, stats, tenths } from "../lib/stats";

const GATEWAY = `http://127.0.0.1:${process.env.CUBEPOD_GATEWAY_PORT ?? 8080}`;
const GATEWAY_PORT = Number(new URL(GATEWAY).port);
const METRICS = `http://127.0.0.1:${process.env.CUBEPOD_GATEWAY_METRICS_PORT ?? 8082}/metrics`;
const ROUNDS = 40;
const PROXIED = 1000;
const BURST = 20;
const RATE_PER_S = 1000;
const IDLE = 1000;
const UPLOAD_MIB = 1024;
const FLOOR_PROXY_PORT = 18099;

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
 * pool (to the resolved promise) against a PodBox warm claim made directly, one at a time and 20
 * at once; a request proxied to a sandbox's port against the same request sent to the Pod IP and
 * through the least proxy Node can be (floor-proxy.ts), in turn and at 1,000/s; a 1 GiB upload;
 * the gateway's memory for 1,000 idle proxied connections.
 */
export async function benchGateway(kube: Kube) {
  // A namespace of its own: the stand-in follows its Pods, and the earlier scenarios' hundreds
  // of boxes would load the machine it measures on.
  const ns = await kube.namespace("bench-gateway");
  await kube.mustCreate(paths.podtemplates(ns), podTemplate("python", TEMPLATE));
  const key = `e2b_${randomBytes(20).toString("hex")}`;
  await kube.mustCreate(`/api/v1/namespaces/${ns}/secrets`, {
    metadata: { name: "bench-agents" },
    type: "pod.cubeplex.ai/api-key",
    stringData: { sha256: createHash("sha256").update(key).digest("hex") },
  });
  // The daemons in a process of their own, as each sandbox's podd is: not in the measuring one.
  const standIn = await ownProcess(
    [join(ROOT, "hack", "cluster", "envd-stand-in.ts"), ns],
    "podd stand-in serving",
  );
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
  // 20 at once, both ways in turn (the first of a round alternating), each from a pool with 20
  // standbys ready and the replenishing after the previous burst settled.
  const directBurst: number[] = [];
  const sdkBurst: number[] = [];
  const sdkCreates = async () => {
    const timed = await Promise.all(
      Array.from({ length: BURST }, async () => {
        const t0 = now();
        const sbx = await Sandbox.create("python", opts);
        return { sbx, ms: now() - t0 };
      }),
    );
    made.push(...timed.map(t => t.sbx));
    sdkBurst.push(...timed.map(t => t.ms));
  };
  const directClaims = async (round: number) => {
    const names = Array.from({ length: BURST }, (_, i) => `gw-burst-${round}-${i}`);
    directBurst.push(...(await Promise.all(names.map(n => claim(n)))));
  };
  for (let round = 0; round < 4; round++) {
    for (const burst of round % 2 === 0 ? [directClaims, sdkCreates] : [sdkCreates, directClaims]) {
      await standbys.atLeast(BURST);
      await sleep(5000);
      await burst(round);
    }
  }
  stop();
  standbys.stop();
  const box = (await kube.get(paths.podboxes(ns, made[0].sandboxId))).body;
  const ip = box.status.podIP as string;
  const host = { Host: `${ECHO_PORT}-${made[0].sandboxId}.cubepod.localhost` };
  const floor = await floorProxy(ip);
  const proxied: number[] = [];
  const plain: number[] = [];
  const bare: number[] = [];
  const viaGateway = () => get("127.0.0.1", GATEWAY_PORT, host);
  const viaFloor = () => get("127.0.0.1", FLOOR_PROXY_PORT, {});
  const toPod = () => get(ip, ECHO_PORT, {});
  for (let i = 0; i < PROXIED; i++) {
    plain.push(await toPod());
    bare.push(await viaFloor());
    proxied.push(await viaGateway());
  }
  const atRate = {
    direct: [] as number[],
    floor: [] as number[],
    proxied: [] as number[],
    rates: [] as number[],
  };
  for (let round = 0; round < 3; round++) {
    atRate.direct.push(...(await openLoop(toPod)).ms);
    atRate.floor.push(...(await openLoop(viaFloor)).ms);
    const p = await openLoop(viaGateway);
    atRate.proxied.push(...p.ms);
    atRate.rates.push(p.rate);
  }
  process.kill(-floor.pid!, "SIGTERM");
  const upload = {
    direct: await uploadMiBps(ip, ECHO_PORT, {}),
    proxied: await uploadMiBps("127.0.0.1", GATEWAY_PORT, host),
  };
  const idle = await idleConnections(host.Host);
  for (const s of made) await s.kill();
  process.kill(-standIn.pid!, "SIGTERM");
  await deletePool(kube, ns, pool);
  await kube.delete(`/api/v1/namespaces/${ns}`);
  const c = stats(viaSdk);
  const d = stats(direct);
  const p = stats(proxied);
  const q = stats(plain);
  results.gateway = {
    what: "SDK Sandbox.create (warm) vs a direct PodBox warm claim; a GET proxied by the gateway vs direct and vs a bare Node proxy (ms); upload MiB/s; memory for idle connections",
    sdkCreate: c,
    directClaim: d,
    addedByGatewayP50: tenths(c.p50 - d.p50),
    proxiedGet: p,
    directGet: q,
    floorProxyGet: stats(bare),
    addedByProxyP50: tenths(p.p50 - q.p50),
    addedOverFloorProxyP50: tenths(p.p50 - stats(bare).p50),
    burstSdkCreate: stats(sdkBurst),
    burstDirectClaim: stats(directBurst),
    burstAddedByGatewayP50: tenths(stats(sdkBurst).p50 - stats(directBurst).p50),
    proxiedGetAt1000PerS: stats(atRate.proxied),
    directGetAt1000PerS: stats(atRate.direct),
    floorProxyGetAt1000PerS: stats(atRate.floor),
    addedByProxyAt1000PerSP50: tenths(stats(atRate.proxied).p50 - stats(atRate.direct).p50),
    addedOverFloorProxyAt1000PerSP50: tenths(stats(atRate.proxied).p50 - stats(atRate.floor).p50),
    proxiedRatePerS: Math.round(Math.min(...atRate.rates)),
    uploadMiBPerS: { proxied: upload.proxied, direct: upload.direct },
    idleConnections: idle,
  };
}

/** The floor proxy (floor-proxy.ts) to the sandbox's echo port. */
function floorProxy(ip: string) {
  const script = join(ROOT, "bench", "scenarios", "floor-proxy.ts");
  return ownProcess([script, String(FLOOR_PROXY_PORT), ip, String(ECHO_PORT)], "ready");
}

/** `tsx <args>` in a process group of its own, once it prints `ready`; kill the group to end it. */
async function ownProcess(args: string[], ready: string) {
  const proc = spawn("npx", ["tsx", ...args], {
    stdio: ["ignore", "pipe", "inherit"],
    detached: true,
  });
  await new Promise<void>((resolve, reject) => {
    proc.stdout.on("data", d => String(d).includes(ready) && resolve());
    proc.on("exit", code => reject(new Error(`${args[0]} exited (${code})`)));
  });
  return proc;
}

/**
 * Requests sent on a clock, `RATE_PER_S` a second for one second, whatever the answers do (an
 * open loop, as independent clients send them): each timed to the end of its answer.
 */
async function openLoop(send: () => Promise<number>): Promise<{ ms: number[]; rate: number }> {
  const pending: Promise<number>[] = [];
  const t0 = now();
  const tickMs = 10;
  for (let tick = 0; tick < 1000 / tickMs; tick++) {
    for (let i = 0; i < (RATE_PER_S * tickMs) / 1000; i++) pending.push(send());
    const next = t0 + (tick + 1) * tickMs;
    await sleep(Math.max(0, next - now()));
  }
  const ms = await Promise.all(pending);
  return { ms, rate: pending.length / ((now() - t0) / 1000) };
}

/** A 1 GiB POST to the echo port's sink, in MiB/s to the end of its answer. */
function uploadMiBps(host: string, port: number, headers: Record<string, string>): Promise<number> {
  const chunk = randomBytes(1024 * 1024);
  return new Promise((resolve, reject) => {
    const t0 = now();
    const req = request({ host, port, path: "/sink", method: "POST", headers }, res => {
      res.resume();
      res.on("end", () => resolve(tenths(UPLOAD_MIB / ((now() - t0) / 1000))));
    });
    req.on("error", reject);
    let sent = 0;
    const more = () => {
      while (sent < UPLOAD_MIB) {
        sent++;
        if (!req.write(chunk)) return void req.once("drain", more);
      }
      req.end();
    };
    more();
  });
}

/** The gateway's resident memory, from its own metrics, in bytes. */
async function gatewayRss(): Promise<number> {
  const text = await (await fetch(METRICS)).text();
  return Number(/^process_resident_memory_bytes (\d+)/m.exec(text)![1]);
}

/**
 * The gateway's memory for `IDLE` proxied connections held open and quiet (WebSockets to a
 * sandbox's port, each two sockets in the gateway): its RSS before and after they open.
 */
async function idleConnections(host: string) {
  await sleep(2000);
  const before = await gatewayRss();
  const sockets: Socket[] = [];
  for (let i = 0; i < IDLE; i += 50) {
    const batch = Array.from(
      { length: 50 },
      () =>
        new Promise<Socket>((resolve, reject) => {
          const s = connect(GATEWAY_PORT, "127.0.0.1", () =>
            s.write(
              `GET / HTTP/1.1\r\nHost: ${host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
                `Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${randomBytes(16).toString("base64")}\r\n\r\n`,
            ),
          );
          s.once("data", d =>
            String(d).startsWith("HTTP/1.1 101") ? resolve(s) : reject(new Error(String(d))),
          );
          s.once("error", reject);
        }),
    );
    sockets.push(...(await Promise.all(batch)));
  }
  await sleep(2000);
  const after = await gatewayRss();
  for (const s of sockets) s.destroy();
  const mib = (b: number) => tenths(b / 2 ** 20);
  return {
    connections: sockets.length,
    rssBeforeMiB: mib(before),
    rssAfterMiB: mib(after),
    kibPerConnection: tenths((after - before) / 1024 / sockets.length),
  };
}
