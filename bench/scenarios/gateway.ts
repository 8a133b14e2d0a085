import { randomBytes } from "node:crypto";
import { Agent, request } from "node:http";
import { connect, Socket } from "node:net";
import { join } from "node:path";
import { Sandbox } from "e2b";
import { ECHO_PORT } from "../lib/envd-stand-in";
import { Kube, paths, ROOT } from "../../testkit/kube";
import { podAPIKey, podTemplate, TEMPLATE } from "../../testkit/objects";
import { inGroups, openLoop, poissonArrivals } from "../lib/arrivals";
import { ownProcess } from "../lib/own-process";
import { claimTimer, deletePool, startPool } from "../lib/pools";
import { results } from "../lib/results";
import { writeMiB } from "../lib/upload";
import { GATEWAY, sdkOptions } from "../lib/sdk";
import { now, sleep, stats, tenths } from "../lib/stats";

const GATEWAY_PORT = Number(new URL(GATEWAY).port);
const METRICS = `http://127.0.0.1:${process.env.CUBEPOD_GATEWAY_METRICS_PORT ?? 8082}/metrics`;
const ROUNDS = 40;
const PROXIED = 1000;
const BURST = 20;
const RATE_PER_S = 1000;
const IDLE = 1000;
const UPLOAD_MIB = 1024;
const FLOOR_PROXY_PORT = 18099;
const FLOOR_E2B_PORT = 18098;
const FLOOR_GATEWAY_PORT = 18097;

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

/** A plain HTTP POST of a create's body to the least E2B server, timed to the end of its answer. */
function postCreate(): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = now();
    const req = request(
      {
        host: "127.0.0.1",
        port: FLOOR_E2B_PORT,
        method: "POST",
        path: "/v2/sandboxes",
        headers: { "Content-Type": "application/json", "X-API-Key": "e2b_floor" },
        agent: keepAlive,
      },
      res => {
        const chunks: Buffer[] = [];
        res.on("data", c => chunks.push(c));
        res.on("end", () => (JSON.parse(Buffer.concat(chunks).toString()), resolve(now() - t0)));
      },
    );
    req.on("error", reject);
    req.end(JSON.stringify({ templateID: "python" }));
  });
}

/**
 * The gateway against its floors, in the same run: the E2B SDK's `Sandbox.create` from a warm
 * pool (to the resolved promise) against a PodBox warm claim made directly, one at a time and 20
 * at once. The SDK's own cost is measured beside them, as the SDK's create against the least E2B
 * server (floor-e2b.ts) over a plain HTTP POST to it: what the gateway adds is the rest, counted
 * whole and outside the claim (each create less its claim as a watch saw it). The same SDK create
 * through the least gateway (floor-gateway.ts) is what any gateway must add here: its write, the
 * hops to the daemon's `/init` and back to the SDK, on the same loaded CPUs. Then a
 * request proxied to a sandbox's port against the same request sent to the Pod IP and
 * through the least proxy Node can be (floor-proxy.ts): in turn, at 1,000/s from independent
 * clients, and at 1,000/s in groups of ten; a 1 GiB upload; the gateway's memory for 1,000 idle
 * proxied connections.
 */
export async function benchGateway(kube: Kube) {
  // A namespace of its own: the stand-in follows its Pods, and the earlier scenarios' hundreds
  // of boxes would load the machine it measures on.
  const ns = await kube.namespace("bench-gateway");
  await kube.mustCreate(paths.podtemplates(ns), podTemplate("python", TEMPLATE));
  const key = `e2b_${randomBytes(20).toString("hex")}`;
  await kube.mustCreate(paths.podapikeys(ns), podAPIKey("bench-agents", key));
  // The daemons in a process of their own, as each sandbox's podd is: not in the measuring one.
  const standIn = await ownProcess(
    [join(ROOT, "bench", "scenarios", "floor-envd.ts"), ns],
    "podd stand-in serving",
  );
  const opts = sdkOptions(key);
  const floorE2b = await ownProcess(
    [join(ROOT, "bench", "scenarios", "floor-e2b.ts"), String(FLOOR_E2B_PORT)],
    "ready",
  );
  const floorUrl = `http://127.0.0.1:${FLOOR_E2B_PORT}`;
  const floorOpts = { ...opts, apiUrl: floorUrl, sandboxUrl: floorUrl };
  /** One SDK create against the server `options` name, timed to its resolved promise. */
  const timedCreate = async (options: typeof opts) => {
    const t0 = now();
    const sbx = await Sandbox.create("python", options);
    return { sbx, ms: now() - t0 };
  };
  const sdkFloorCreate = async () => (await timedCreate(floorOpts)).ms;
  const pool = "gw-pool";
  const standbys = await startPool(kube, ns, pool, 25);
  const { claim, claimSpan, stop } = claimTimer(kube, ns, pool, standbys);
  const floorGateway = await ownProcess(
    [join(ROOT, "bench", "scenarios", "floor-gateway.ts"), String(FLOOR_GATEWAY_PORT), ns, pool],
    "ready",
  );
  const floorGatewayUrl = `http://127.0.0.1:${FLOOR_GATEWAY_PORT}`;
  const floorGatewayOpts = { ...opts, apiUrl: floorGatewayUrl, sandboxUrl: floorGatewayUrl };
  // Each create less its claim as the watch saw it: what either way adds around the claim, free of
  // the module's queue, which a burst of claims makes long and uneven.
  const outside = { direct: [] as number[], sdk: [] as number[], floorGateway: [] as number[] };
  const burstOutside = {
    direct: [] as number[],
    sdk: [] as number[],
    floorGateway: [] as number[],
  };
  const direct: number[] = [];
  const viaSdk: number[] = [];
  const viaFloorGateway: number[] = [];
  const sdkFloor: number[] = [];
  const httpFloor: number[] = [];
  const made: Sandbox[] = [];
  const stepsAtStart = await startSteps();
  // Alternating, so that all meet the same machine, each after the same idle moment.
  for (let i = 0; i < ROUNDS; i++) {
    await standbys.atLeast(2);
    await sleep(500);
    const d = await claim(`gw-direct-${i}`);
    direct.push(d);
    outside.direct.push(d - (await claimSpan(`gw-direct-${i}`)));
    await sleep(500);
    const { sbx, ms } = await timedCreate(opts);
    made.push(sbx);
    viaSdk.push(ms);
    outside.sdk.push(ms - (await claimSpan(sbx.sandboxId)));
    await sleep(500);
    const least = await timedCreate(floorGatewayOpts);
    viaFloorGateway.push(least.ms);
    outside.floorGateway.push(least.ms - (await claimSpan(least.sbx.sandboxId)));
    await sleep(500);
    sdkFloor.push(await sdkFloorCreate());
    await sleep(500);
    httpFloor.push(await postCreate());
  }
  const stepsOneAtATime = await startSteps();
  // 20 at once, both ways in turn (the first of a round alternating), each from a pool with 20
  // standbys ready and the replenishing after the previous burst settled.
  const directBurst: number[] = [];
  const sdkBurst: number[] = [];
  const floorGatewayBurst: number[] = [];
  const sdkFloorBurst: number[] = [];
  const httpFloorBurst: number[] = [];
  const floorBursts = async () => {
    await sleep(5000);
    sdkFloorBurst.push(...(await Promise.all(Array.from({ length: BURST }, sdkFloorCreate))));
    await sleep(5000);
    httpFloorBurst.push(...(await Promise.all(Array.from({ length: BURST }, postCreate))));
  };
  /** 20 SDK creates at once against `options`: each whole and outside its claim; the sandboxes. */
  const createBurst = async (options: typeof opts, whole: number[], outsideClaim: number[]) => {
    const timed = await Promise.all(Array.from({ length: BURST }, () => timedCreate(options)));
    whole.push(...timed.map(t => t.ms));
    for (const t of timed) outsideClaim.push(t.ms - (await claimSpan(t.sbx.sandboxId)));
    return timed.map(t => t.sbx);
  };
  const sdkCreates = async () => {
    made.push(...(await createBurst(opts, sdkBurst, burstOutside.sdk)));
  };
  const floorGatewayCreates = async () => {
    await createBurst(floorGatewayOpts, floorGatewayBurst, burstOutside.floorGateway);
  };
  const directClaims = async (round: number) => {
    const names = Array.from({ length: BURST }, (_, i) => `gw-burst-${round}-${i}`);
    const timed = await Promise.all(names.map(n => claim(n)));
    directBurst.push(...timed);
    for (const [i, n] of names.entries()) burstOutside.direct.push(timed[i] - (await claimSpan(n)));
  };
  const ways = [directClaims, sdkCreates, floorGatewayCreates];
  for (let round = 0; round < 4; round++) {
    // Each way first in turn, and after each of the others.
    const order = [...ways.slice(round % 3), ...ways.slice(0, round % 3)];
    for (const burst of round === 3 ? order.reverse() : order) {
      await standbys.atLeast(BURST);
      await sleep(5000);
      await burst(round);
    }
    await floorBursts();
  }
  const stepsInBursts = await startSteps();
  process.kill(-floorE2b.pid!, "SIGTERM");
  process.kill(-floorGateway.pid!, "SIGTERM");
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
  const atRate = { direct: [] as number[], floor: [] as number[], proxied: [] as number[] };
  const inBursts = { direct: [] as number[], floor: [] as number[], proxied: [] as number[] };
  const rates: number[] = [];
  const timedAt = async (arrivals: number[], send: () => Promise<number>) =>
    (await openLoop(arrivals, send)).results;
  for (let round = 0; round < 3; round++) {
    const arrivals = poissonArrivals(RATE_PER_S, round + 1);
    atRate.direct.push(...(await timedAt(arrivals, toPod)));
    atRate.floor.push(...(await timedAt(arrivals, viaFloor)));
    const p = await openLoop(arrivals, viaGateway);
    atRate.proxied.push(...p.results);
    rates.push(p.rate);
    const groups = inGroups(RATE_PER_S, 10);
    inBursts.direct.push(...(await timedAt(groups, toPod)));
    inBursts.floor.push(...(await timedAt(groups, viaFloor)));
    inBursts.proxied.push(...(await timedAt(groups, viaGateway)));
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
  const sdkOwn = stats(sdkFloor).p50 - stats(httpFloor).p50;
  const burstSdkOwn = stats(sdkFloorBurst).p50 - stats(httpFloorBurst).p50;
  const burstOverDirect = stats(sdkBurst).p50 - stats(directBurst).p50;
  const p = stats(proxied);
  const q = stats(plain);
  results.gateway = {
    what: "SDK Sandbox.create (warm) vs a direct PodBox warm claim, less the SDK's own cost (the SDK against the least E2B server, over a plain POST to it), and vs the same SDK create through the least gateway, whole and outside the claim as a watch saw it; a GET proxied by the gateway vs direct and vs the least Node proxy, in turn, at 1,000/s from independent clients (Poisson) and in groups of ten (ms); the gateway's mean time in each step of a start (write, run, init), from its metrics; upload MiB/s; memory for idle connections",
    sdkCreate: c,
    directClaim: d,
    sdkOverDirectP50: tenths(c.p50 - d.p50),
    sdkFloorCreate: stats(sdkFloor),
    httpFloorCreate: stats(httpFloor),
    sdkOwnCostP50: tenths(sdkOwn),
    addedByGatewayP50: tenths(c.p50 - d.p50 - sdkOwn),
    sdkOutsideClaim: stats(outside.sdk),
    directOutsideClaim: stats(outside.direct),
    addedOutsideClaimP50: tenths(stats(outside.sdk).p50 - stats(outside.direct).p50 - sdkOwn),
    floorGatewayCreate: stats(viaFloorGateway),
    floorGatewayOutsideClaim: stats(outside.floorGateway),
    addedOverFloorGatewayP50: tenths(c.p50 - stats(viaFloorGateway).p50),
    addedOverFloorGatewayOutsideClaimP50: tenths(
      stats(outside.sdk).p50 - stats(outside.floorGateway).p50,
    ),
    gatewayStepsMean: stepMeans(stepsAtStart, stepsOneAtATime),
    proxiedGet: p,
    directGet: q,
    floorProxyGet: stats(bare),
    addedByProxyP50: tenths(p.p50 - q.p50),
    addedOverFloorProxyP50: tenths(p.p50 - stats(bare).p50),
    burstSdkCreate: stats(sdkBurst),
    burstDirectClaim: stats(directBurst),
    burstSdkOverDirectP50: tenths(burstOverDirect),
    burstSdkFloorCreate: stats(sdkFloorBurst),
    burstHttpFloorCreate: stats(httpFloorBurst),
    burstSdkOwnCostP50: tenths(burstSdkOwn),
    burstAddedByGatewayP50: tenths(burstOverDirect - burstSdkOwn),
    burstSdkOutsideClaim: stats(burstOutside.sdk),
    burstDirectOutsideClaim: stats(burstOutside.direct),
    burstAddedOutsideClaimP50: tenths(
      stats(burstOutside.sdk).p50 - stats(burstOutside.direct).p50 - burstSdkOwn,
    ),
    burstFloorGatewayCreate: stats(floorGatewayBurst),
    burstFloorGatewayOutsideClaim: stats(burstOutside.floorGateway),
    burstAddedOverFloorGatewayP50: tenths(stats(sdkBurst).p50 - stats(floorGatewayBurst).p50),
    burstAddedOverFloorGatewayOutsideClaimP50: tenths(
      stats(burstOutside.sdk).p50 - stats(burstOutside.floorGateway).p50,
    ),
    burstGatewayStepsMean: stepMeans(stepsOneAtATime, stepsInBursts),
    proxiedGetAt1000PerS: stats(atRate.proxied),
    directGetAt1000PerS: stats(atRate.direct),
    floorProxyGetAt1000PerS: stats(atRate.floor),
    addedByProxyAt1000PerSP50: tenths(stats(atRate.proxied).p50 - stats(atRate.direct).p50),
    addedOverFloorProxyAt1000PerSP50: tenths(stats(atRate.proxied).p50 - stats(atRate.floor).p50),
    proxiedRatePerS: Math.round(Math.min(...rates)),
    proxiedGetIn10sEvery10Ms: stats(inBursts.proxied),
    directGetIn10sEvery10Ms: stats(inBursts.direct),
    floorProxyGetIn10sEvery10Ms: stats(inBursts.floor),
    addedByProxyIn10sEvery10MsP50: tenths(stats(inBursts.proxied).p50 - stats(inBursts.direct).p50),
    uploadMiBPerS: { proxied: upload.proxied, direct: upload.direct },
    idleConnections: idle,
  };
}

/** The floor proxy (floor-proxy.ts) to the sandbox's echo port. */
function floorProxy(ip: string) {
  const script = join(ROOT, "bench", "scenarios", "floor-proxy.ts");
  return ownProcess([script, String(FLOOR_PROXY_PORT), ip, String(ECHO_PORT)], "ready");
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
    writeMiB(req, UPLOAD_MIB, chunk);
  });
}

type Steps = Record<string, { sum: number; count: number }>;

/** The gateway's own metrics, as Prometheus text. */
async function gatewayMetrics(): Promise<string> {
  return (await fetch(METRICS)).text();
}

/** The gateway's time so far in each step of its sandboxes' starts, from its own metrics. */
async function startSteps(): Promise<Steps> {
  const text = await gatewayMetrics();
  const steps: Steps = {};
  const line = /^cubepod_gateway_sandbox_start_seconds_(sum|count)\{step="(\w+)"\} (\S+)$/gm;
  for (const [, part, step, value] of text.matchAll(line)) {
    steps[step] ??= { sum: 0, count: 0 };
    steps[step][part as "sum" | "count"] = Number(value);
  }
  return steps;
}

/** Each step's mean, in ms, over the starts between two readings. */
function stepMeans(before: Steps, after: Steps): Record<string, number> {
  return Object.fromEntries(
    Object.entries(after).map(([step, a]) => {
      const b = before[step] ?? { sum: 0, count: 0 };
      return [step, tenths(((a.sum - b.sum) / (a.count - b.count)) * 1000)];
    }),
  );
}

/** The gateway's resident memory, from its own metrics, in bytes. */
async function gatewayRss(): Promise<number> {
  const text = await gatewayMetrics();
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
