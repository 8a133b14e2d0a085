/**
 * CubePod benchmarks on the local control plane (kwok). `npm run bench` runs all of them;
 * `npm run bench -- warm floor stream cold admission scale` picks some. Prints a table and saves the figures
 * as JSON under bench/results/. Not part of `npm test`: tests never assert on time.
 */
import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { Agent as HttpAgent, createServer, get as httpGet } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { cluster, CLUSTER_DIR, Kube, Obj, paths, ROOT } from "../hack/lib/kube";
import { podBox, podTemplate, TEMPLATE, templateHashOf } from "../hack/lib/objects";

type Stats = { n: number; p50: number; p95: number; p99: number; max: number };
const results: Record<string, unknown> = {};
const pick = process.argv.slice(2);
const wanted = (name: string) => pick.length === 0 || pick.includes(name);

function stats(ms: number[]): Stats {
  const s = [...ms].sort((a, b) => a - b);
  const q = (p: number) => s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
  const [p50, p95, p99, max] = [q(50), q(95), q(99), s[s.length - 1]].map(tenths);
  return { n: s.length, p50, p95, p99, max };
}
const tenths = (x: number) => Math.round(x * 10) / 10;
const sleep = (ms: number) => new Promise(r => setTimeout(r, ms));
const now = () => performance.now();

/** Resolves per object name when `predicate` first holds for it, from one collection watch. */
function watcher(kube: Kube, collection: string, predicate: (o: Obj) => boolean) {
  const seen = new Map<string, number>();
  const waiting = new Map<string, (t: number) => void>();
  const stop = kube.watchCollection(collection, (type, o) => {
    const name = o.metadata?.name;
    if (type === "DELETED" || !name || seen.has(name) || !predicate(o)) return;
    const t = now();
    seen.set(name, t);
    waiting.get(name)?.(t);
  });
  return {
    when: (name: string) =>
      new Promise<number>((resolve, reject) => {
        if (seen.has(name)) return resolve(seen.get(name)!);
        waiting.set(name, resolve);
        setTimeout(() => reject(new Error(`timeout waiting for ${name}`)), 120_000);
      }),
    stop,
  };
}

/** The collection of a pool's Pods (its standbys), by their pool label. */
const poolPods = (ns: string, pool: string) =>
  `${paths.pods(ns)}?labelSelector=${encodeURIComponent(`pod.cubeplex.ai/pool=${pool}`)}`;

/** Deletes a pool; its standbys go with it, and the next benchmark starts once they are gone. */
async function deletePool(kube: Kube, ns: string, pool: string) {
  await kube.delete(paths.podwarmpools(ns, pool));
  await kube.waitForItems(poolPods(ns, pool), items => items.length === 0, 300_000);
}

type PoolReadiness = ReturnType<typeof poolReadiness>;

/**
 * Follows the ready standby Pods of a pool from one list and a watch (the pool's status lags), so
 * that waiting for standbys between claims adds no requests of the benchmark's own.
 */
function poolReadiness(kube: Kube, ns: string, pool: string) {
  const query = poolPods(ns, pool);
  const ready = new Set<string>();
  // Standbys a box was seen running on. The watch's event for a Pod leaving the pool can come
  // after the box's: counted as ready, such a Pod made the benchmark send a claim against an
  // empty pool (a cold start: 39 of 40 in the last run of experiments/2026-11-30-claim-yield).
  const claimed = new Set<string>();
  let waiters: { n: number; resolve: () => void }[] = [];
  const see = (type: string, p: Obj) => {
    const isReady =
      type !== "DELETED" &&
      !p.metadata.deletionTimestamp &&
      !claimed.has(p.metadata.name) &&
      (p.status?.conditions ?? []).some((c: Obj) => c.type === "Ready" && c.status === "True");
    if (isReady) ready.add(p.metadata.name);
    else ready.delete(p.metadata.name);
    waiters = waiters.filter(w => (ready.size >= w.n ? (w.resolve(), false) : true));
  };
  let stop = () => {};
  const started = kube.get(query).then(r => {
    for (const p of r.body.items as Obj[]) see("ADDED", p);
    stop = kube.watchCollection(query, see, r.body.metadata.resourceVersion);
  });
  return {
    /** Standbys ready now (as last seen by the watch). */
    ready: () => ready.size,
    /** A box runs on this Pod now: it is no standby, whatever the pool's watch still says. */
    claimed: (pod: string) => {
      claimed.add(pod);
      ready.delete(pod);
    },
    /** Resolves once at least `n` standbys are ready. */
    atLeast: async (n: number) => {
      await started;
      if (ready.size >= n) return;
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`pool ${pool} never had ${n} ready standbys`)),
          300_000,
        );
        waiters.push({ n, resolve: () => (clearTimeout(timer), resolve()) });
      });
    },
    stop: () => stop(),
  };
}

/**
 * The API server alone at the time of the run: sequential GETs and merge patches of one small
 * ConfigMap. This shared machine's speed drifts over a day (these figures moved by a third), and
 * every other figure moves with it; this one says how fast the machine was for the rest.
 *
 * Then the cost of waking the machine up: an HTTP round trip to a server in this very process,
 * back to back and after 1.5 s of idling (the gap before each one-at-a-time claim), and the same
 * patch after 1.5 s of idling. This machine is a microVM whose idle vCPUs halt at once
 * (`cpuidle_haltpoll`, `guest_halt_poll_ns=0`), and waking them is dear: a claim after idling
 * pays it at every hop between processes.
 */
async function benchBaseline(kube: Kube, ns: string) {
  const path = `/api/v1/namespaces/${ns}/configmaps`;
  await kube.mustCreate(path, { metadata: { name: "baseline" }, data: { n: "0" } });
  // `n` calls, each after `gapMs` of idling; the first `warmup` warm the connection up.
  const time = async (
    f: (i: number) => Promise<unknown>,
    { n = 100, gapMs = 0, warmup = 20 } = {},
  ) => {
    const ms: number[] = [];
    for (let i = 0; i < n; i++) {
      if (gapMs) await sleep(gapMs);
      const t0 = now();
      await f(i);
      ms.push(now() - t0);
    }
    return stats(ms.slice(warmup));
  };
  const patch = (i: number) => kube.mergePatch(`${path}/baseline`, { data: { n: String(i) } });
  const AFTER_IDLE = { n: 12, gapMs: 1500, warmup: 2 };
  const echo = await loopbackEcho();
  try {
    results.apiServerBaseline = {
      what: "the API server alone: GET and merge patch of a small ConfigMap, sequential (ms)",
      get: await time(() => kube.get(`${path}/baseline`)),
      patch: await time(patch),
    };
    results.wakeUp = {
      what: "waking the machine: back to back vs after 1.5 s idle (ms)",
      loopbackEcho: await time(echo.call),
      loopbackEchoAfterIdle: await time(echo.call, AFTER_IDLE),
      patchAfterIdle: await time(patch, AFTER_IDLE),
    };
  } finally {
    echo.close();
  }
}

/** An HTTP server on 127.0.0.1 in this process, and a keep-alive client of it. */
async function loopbackEcho() {
  const server = createServer((_req, res) => res.end("ok"));
  await new Promise<void>(resolve => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const agent = new HttpAgent({ keepAlive: true });
  return {
    call: () =>
      new Promise<void>((resolve, reject) => {
        httpGet({ host: "127.0.0.1", port, agent }, res => res.resume().on("end", resolve)).on(
          "error",
          reject,
        );
      }),
    close: () => {
      agent.destroy();
      server.close();
    },
  };
}

/** Creates a pool of the "python" template and follows its ready standbys. */
async function startPool(kube: Kube, ns: string, pool: string, replicas: number) {
  await kube.mustCreate(paths.podwarmpools(ns), {
    apiVersion: "pod.cubeplex.ai/v1alpha1",
    kind: "PodWarmPool",
    metadata: { name: pool },
    spec: { templateRef: "python", replicas },
  });
  return poolReadiness(kube, ns, pool);
}

/**
 * Times warm claims on `pool`: from the PodBox create request to the moment a watching client
 * sees the box's `status.podIP`. `stop` ends the watch.
 */
function claimTimer(kube: Kube, ns: string, pool: string, standbys: PoolReadiness) {
  const w = watcher(kube, paths.podboxes(ns), o => {
    if (!o.status?.podIP) return false;
    if (o.status.podName) standbys.claimed(o.status.podName);
    return true;
  });
  return {
    claim: async (name: string) => {
      const t0 = now();
      await kube.mustCreate(paths.podboxes(ns), podBox(name, { warmPoolRef: pool }));
      return (await w.when(name)) - t0;
    },
    stop: w.stop,
  };
}

/**
 * The back-to-back series runs in rounds of 40 claims on a pool of 25, the pool full again
 * before each: 200 claims, so that its p99 is a percentile (the third slowest) and not the one
 * slowest claim, as it is of 40. Likewise six rounds of 20 concurrent claims.
 */
const C1_ROUNDS = 5;
const C1_PER_ROUND = 40;
const C20_ROUNDS = 6;

async function benchWarm(kube: Kube, ns: string) {
  const pool = "bench-pool";
  const size = 25;
  const standbys = await startPool(kube, ns, pool, size);
  const { claim: one, stop } = claimTimer(kube, ns, pool, standbys);
  const boxes = new Map<string, Obj>();
  const claimed = (names: string[]) =>
    Promise.all(
      names.map(async n => {
        const box = (await kube.get(paths.podboxes(ns, n))).body;
        boxes.set(n, box);
        return box.status?.reason === "WarmPoolClaimed";
      }),
    );
  const c1: number[] = [];
  const c1Names: string[] = [];
  const quiet: number[] = [];
  const quietNames: string[] = [];
  const c20: number[] = [];
  const c20Names: string[] = [];
  const misses = await indexMissesDuring(async () => {
    for (let round = 0; round < C1_ROUNDS; round++) {
      // Each round starts 3 s after the pool is full: the objects just made are still being
      // digested (garbage collector graph, volume controller, caches); measured, the first dozen
      // claims right after took twice as long.
      await standbys.atLeast(size);
      await sleep(3000);
      for (let i = round * C1_PER_ROUND; i < (round + 1) * C1_PER_ROUND; i++) {
        await standbys.atLeast(1);
        c1Names.push(`warm-c1-${i}`);
        c1.push(await one(`warm-c1-${i}`));
      }
    }
    // The claim path alone: before each claim the pool is full again and its replenishment done.
    for (let i = 0; i < 20; i++) {
      await standbys.atLeast(size);
      await sleep(1500);
      quietNames.push(`warm-quiet-${i}`);
      quiet.push(await one(`warm-quiet-${i}`));
    }
    for (let round = 0; round < C20_ROUNDS; round++) {
      await standbys.atLeast(20);
      const names = Array.from({ length: 20 }, (_, i) => `warm-c20-${round}-${i}`);
      c20Names.push(...names);
      c20.push(...(await Promise.all(names.map(one))));
    }
  });
  stop();
  standbys.stop();
  const warm1 = (await claimed(c1Names)).filter(Boolean).length;
  const warm20 = (await claimed(c20Names)).filter(Boolean).length;
  const warmQuiet = (await claimed(quietNames)).filter(Boolean).length;
  const share = apiServerShare(ns, boxes);
  const split = (names: string[], ms: number[]) => share(names.map((n, i) => [n, ms[i]]));
  results.warmClaim = {
    what: "PodBox create request -> a watching client sees status.podIP (ms)",
    concurrency1: {
      ...stats(c1),
      claimed: warm1,
      ...split(c1Names, c1),
      // In each round the first `size` take the standbys the pool had; the others each wait for
      // a new standby to turn ready, and meet the refill's writes (the next standbys', kwok's,
      // the scheduler's).
      fromFullPool: stats(c1.filter((_, i) => i % C1_PER_ROUND < size)),
      duringRefill: stats(c1.filter((_, i) => i % C1_PER_ROUND >= size)),
      // Each claim in order, for reading a run's slow claims against the audit log.
      samples: c1.map(tenths),
    },
    concurrency1QuietPool: { ...stats(quiet), claimed: warmQuiet, ...split(quietNames, quiet) },
    concurrency20: { ...stats(c20), claimed: warm20, ...split(c20Names, c20) },
    indexMisses: misses,
  };
  await deletePool(kube, ns, pool);
}

/**
 * The floor under the warm claim on this machine, taken right after it: the same claims (back to
 * back, then one at a time on a full pool) served by bench/floor-operator.ts instead of the
 * module, which is stopped meanwhile. That operator makes the same two writes on the same
 * standby Pods (made by the module before it stopped) and does nothing else, so the difference
 * between the two figures is what CubePod adds. Last, the same rounds of 20 concurrent claims.
 */
async function benchFloor(kube: Kube) {
  const ns = await kube.namespace("bench-floor");
  await kube.mustCreate(paths.podtemplates(ns), podTemplate("python", TEMPLATE));
  const pool = "floor-pool";
  const backToBackClaims = C1_ROUNDS * C1_PER_ROUND;
  const size = backToBackClaims + 20 + C20_ROUNDS * 20;
  const standbys = await startPool(kube, ns, pool, size);
  await standbys.atLeast(size);
  standbys.stop();
  cluster("module", "stop");
  // Its own process group: npx and tsx start children of their own, and all of them must end.
  const operator = spawn("npx", ["tsx", join(ROOT, "bench", "floor-operator.ts"), ns, pool], {
    stdio: ["ignore", "pipe", "inherit"],
    detached: true,
  });
  try {
    await new Promise<void>((resolve, reject) => {
      operator.stdout.on("data", d => String(d).includes("ready") && resolve());
      operator.on("exit", code => reject(new Error(`floor operator exited (${code})`)));
    });
    const { claim: one, stop } = claimTimer(kube, ns, pool, standbys);
    const backToBack: number[] = [];
    for (let i = 0; i < backToBackClaims; i++) backToBack.push(await one(`floor-c1-${i}`));
    const quiet: number[] = [];
    for (let i = 0; i < 20; i++) {
      await sleep(1500);
      quiet.push(await one(`floor-quiet-${i}`));
    }
    const c20: number[] = [];
    for (let round = 0; round < C20_ROUNDS; round++) {
      await sleep(1500);
      const names = Array.from({ length: 20 }, (_, i) => `floor-c20-${round}-${i}`);
      c20.push(...(await Promise.all(names.map(one))));
    }
    stop();
    results.warmClaimFloor = {
      what: "the warm claims above, served by an operator that only makes the claim's two writes (ms)",
      concurrency1: { ...stats(backToBack), samples: backToBack.map(tenths) },
      concurrency1QuietPool: stats(quiet),
      concurrency20: stats(c20),
    };
  } finally {
    process.kill(-operator.pid!, "SIGTERM");
    operator.stdout.destroy();
    // Nothing of the module's is in the namespace but the pool and its standbys (no finalizer).
    await kube.delete(`/api/v1/namespaces/${ns}`);
    await kube.waitFor(`/api/v1/namespaces/${ns}`, o => o === undefined, 300_000);
    cluster("module", "start");
  }
}

/**
 * Warm claims as a steady stream instead of a burst: one claim every 250 ms, then every 125 ms,
 * for 30 s each on a pool of 25, sent on time whether or not the previous one is done (an open
 * loop, as users arrive). The writes that wait for a quiet moment (claims' finishes and Events
 * after 100 ms without a claim, the pool's replenishment after 1 s; at most 15, 5 and 2 s) fall
 * due in the middle of it, so this is the warm claim with CubePod's own background work beside
 * it, as the back-to-back series meets it only once the pool is empty; and the faster stream
 * asks whether the pool keeps up. Each claim is split, from the audit log, by whether any other write in the namespace
 * (the module's, kwok's, the scheduler's, the garbage collector's) was in the API server while
 * the claim's own three were.
 */
async function benchStream(kube: Kube, ns: string) {
  const pool = "stream-pool";
  const standbys = await startPool(kube, ns, pool, 25);
  const series = async (label: string, everyMs: number) => {
    await standbys.atLeast(25);
    await sleep(3000);
    const { claim: one, stop } = claimTimer(kube, ns, pool, standbys);
    const names = Array.from({ length: 30_000 / everyMs }, (_, i) => `stream-${label}-${i}`);
    const latency = new Map<string, number>();
    let fewestReady = standbys.ready();
    const misses = await indexMissesDuring(async () => {
      const t0 = now();
      const sent: Promise<void>[] = [];
      for (const [i, name] of names.entries()) {
        await sleep(Math.max(0, t0 + i * everyMs - now()));
        fewestReady = Math.min(fewestReady, standbys.ready());
        sent.push(one(name).then(ms => void latency.set(name, ms)));
      }
      await Promise.all(sent);
    });
    stop();
    const boxes = new Map<string, Obj>();
    for (const n of names) boxes.set(n, (await kube.get(paths.podboxes(ns, n))).body);
    const warm = names.filter(n => boxes.get(n)?.status?.reason === "WarmPoolClaimed");
    const cold = names.filter(n => !warm.includes(n));
    const met = metOtherWrites(ns, boxes);
    const ms = (list: string[]) => list.map(n => latency.get(n)!);
    return {
      warm: { ...stats(ms(warm)), claimed: warm.length, of: names.length },
      warmAlone: stats(ms(warm.filter(n => met.get(n) === false))),
      warmBesideOtherWrites: stats(ms(warm.filter(n => met.get(n) === true))),
      ...(cold.length > 0 ? { cold: stats(ms(cold)) } : {}),
      fewestReadyStandbys: fewestReady,
      indexMisses: misses,
    };
  };
  results.warmClaimStream = {
    what: "PodBox create -> status.podIP (ms), a steady stream of claims for 30 s, pool of 25",
    every250ms: await series("a", 250),
    every125ms: await series("b", 125),
  };
  standbys.stop();
  await deletePool(kube, ns, pool);
}

/**
 * For each warm-claimed box: whether a write in `ns` other than its claim's own three (create,
 * Pod patch, status patch) was inside the API server at the same time as one of them.
 */
function metOtherWrites(ns: string, boxes: Map<string, Obj>): Map<string, boolean> {
  const writes = auditWrites(ns);
  const met = new Map<string, boolean>();
  for (const [name, mine] of claimWrites(writes, boxes)) {
    const overlaps = (w: AuditWrite) => mine.some(m => w.from < m.to && m.from < w.to);
    met.set(
      name,
      writes.some(w => !mine.includes(w) && overlaps(w)),
    );
  }
  return met;
}

async function benchCold(kube: Kube, ns: string) {
  const pods = watcher(kube, paths.pods(ns), () => true);
  const running = watcher(kube, paths.podboxes(ns), o => o.status?.phase === "Running");
  const toPod: number[] = [];
  const toRunning: number[] = [];
  for (let i = 0; i < 30; i++) {
    const name = `cold-${i}`;
    const t0 = now();
    await kube.mustCreate(paths.podboxes(ns), podBox(name, { templateRef: "python" }));
    toPod.push((await pods.when(name)) - t0);
    toRunning.push((await running.when(name)) - t0);
  }
  pods.stop();
  running.stop();
  results.coldStart = {
    what: "PodBox create request -> its Pod exists / the box is Running (ms), sequential",
    toPod: stats(toPod),
    toRunning: stats(toRunning),
  };
}

async function benchAdmission(kube: Kube, ns: string) {
  const run = async (label: string, labels: Record<string, string>) => {
    const latencies: number[] = [];
    const pending: Promise<void>[] = [];
    for (let i = 0; i < 500; i++) {
      const t0 = now();
      pending.push(
        kube
          .mustCreate(paths.pods(ns), {
            metadata: { name: `${label}-${i}`, labels },
            spec: { containers: [{ name: "sandbox", image: "py:3" }] },
          })
          .then(() => void latencies.push(now() - t0)),
      );
      await sleep(20); // 50 creates per second
    }
    await Promise.all(pending);
    return stats(latencies);
  };
  const plain = await run("plain", { app: "bench" });
  const sandbox = await run("sandbox", { "pod.cubeplex.ai/template": "python" });
  // As the operator builds them: the hash names the template version, which the webhook caches.
  const built = await run("built", {
    "pod.cubeplex.ai/template": "python",
    "pod.cubeplex.ai/template-hash": templateHashOf(TEMPLATE),
  });
  const added = (s: Stats) => ({
    p50: Math.round((s.p50 - plain.p50) * 10) / 10,
    p99: Math.round((s.p99 - plain.p99) * 10) / 10,
  });
  results.admission = {
    what: "Pod create request latency at 50 creates/s (ms); sandbox Pods go through the mutate webhook",
    plainPod: plain,
    sandboxPod: sandbox,
    addedByWebhook: added(sandbox),
    operatorBuiltSandboxPod: built,
    addedByWebhookToOperatorBuilt: added(built),
  };
}

function moduleRSSMiB(): number {
  const out = execFileSync("ps", ["-eo", "rss=,args="], { encoding: "utf8" });
  const line = out.split("\n").find(l => l.includes("pepr-cubepod.js"));
  return line ? Math.round(Number(line.trim().split(/\s+/)[0]) / 1024) : NaN;
}

async function metric(name: string): Promise<string[]> {
  const text = await fetch("http://127.0.0.1:8081/metrics").then(r => r.text());
  return text.split("\n").filter(l => l.startsWith(name));
}

/**
 * Counts claims whose standby index had none ready until `done`: how many a read of the pool
 * served (the index lagged), and how many found the pool empty.
 */
async function indexMissesDuring(done: () => Promise<void>) {
  const read = async () => {
    const lines = await metric("cubepod_claim_index_misses_total");
    const count = (found: string) =>
      Number(lines.find(l => l.includes(`found="${found}"`))?.split(" ")[1] ?? 0);
    return { servedByRead: count("standby"), poolEmpty: count("none") };
  };
  const before = await read();
  await done();
  const after = await read();
  return {
    servedByRead: after.servedByRead - before.servedByRead,
    poolEmpty: after.poolEmpty - before.poolEmpty,
  };
}

/** A byte-valued metric of the module, in MiB. */
async function metricMiB(name: string): Promise<number> {
  const line = (await metric(name)).find(l => l.startsWith(`${name} `));
  return line ? Math.round(Number(line.split(" ")[1]) / 1048576) : NaN;
}

/**
 * Requests the module sent to the API server, from the audit log: its own client's user agent,
 * and the fluent client's (Pepr's watches and store, the module's own watch). Pepr's store
 * (`peprstores`, where OnSchedule records each run) is counted apart: it is per module, not per box.
 */
function moduleRequests(): { store: number; other: number } {
  const file = join(CLUSTER_DIR, "logs", "audit.log");
  if (!existsSync(file)) return { store: NaN, other: NaN };
  const lines = readFileSync(file, "utf8")
    .split("\n")
    .filter(
      l =>
        l.includes('"userAgent":"kubernetes-fluent-client"') || l.includes('"userAgent":"cubepod"'),
    );
  const store = lines.filter(l => l.includes('"resource":"peprstores"')).length;
  return { store, other: lines.length - store };
}

/** The audit log's events (this log and its rotated predecessor) that contain every `needle`. */
function auditEvents(...needles: string[]): Obj[] {
  const dir = join(CLUSTER_DIR, "logs");
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter(f => f.startsWith("audit") && f.endsWith(".log"))
    .flatMap(f => readFileSync(join(dir, f), "utf8").split("\n"))
    .filter(l => needles.every(n => l.includes(n)))
    .map(l => JSON.parse(l) as Obj);
}

/** An audit timestamp (RFC 3339 with microseconds) in epoch milliseconds, fraction kept. */
const auditMs = (t: string) =>
  Date.parse(t.slice(0, 19) + "Z") + Number(`0${t.slice(19, -1)}`) * 1000;

/**
 * Splits each claim's latency into the time the API server spent inside its three writes (the
 * client's create, the claim's conditional Pod patch, the box status patch; from the audit log:
 * request received to response complete) and the rest (watch delivery to the module and to the
 * client, the module, the network). The first is what this machine's API server costs; the
 * operator's part is in the second.
 */
function apiServerShare(ns: string, boxes: Map<string, Obj>) {
  const writes = claimWrites(auditWrites(ns), boxes);
  return (claims: [string, number][]) => {
    const api: number[] = [];
    const rest: number[] = [];
    for (const [name, total] of claims) {
      const mine = writes.get(name);
      if (!mine) continue;
      const sum = mine.reduce((t, w) => t + (w.to - w.from), 0);
      api.push(sum);
      rest.push(total - sum);
    }
    if (api.length === 0) return {};
    const { p50, p95 } = stats(api);
    return { insideApiServerP50: p50, insideApiServerP95: p95, restP50: stats(rest).p50 };
  };
}

/** A write from the audit log: received by the API server at `from`, answered at `to` (ms). */
type AuditWrite = { e: Obj; from: number; to: number };

/** The writes in `ns` that the audit log holds. */
function auditWrites(ns: string): AuditWrite[] {
  return auditEvents(`"namespace":"${ns}"`, '"stage":"ResponseComplete"')
    .filter(e => ["create", "update", "patch", "delete"].includes(e.verb))
    .map(e => ({ e, from: auditMs(e.requestReceivedTimestamp), to: auditMs(e.stageTimestamp) }));
}

/**
 * Each claimed box's own three writes, for the boxes the log has all three of: the client's
 * create, the module's conditional patch of the standby Pod, and the module's status patch. Each
 * is the first of its kind: the claim's own come before any later change of the box.
 */
function claimWrites(writes: AuditWrite[], boxes: Map<string, Obj>): Map<string, AuditWrite[]> {
  const first = new Map<string, AuditWrite>();
  for (const w of writes) {
    const { e } = w;
    const o = e.objectRef ?? {};
    const ours = e.userAgent === "cubepod";
    const key =
      o.resource === "podboxes" && e.verb === "create"
        ? `create/${o.name}`
        : o.resource === "podboxes" && o.subresource === "status" && e.verb === "patch" && ours
          ? `status/${o.name}`
          : o.resource === "pods" && !o.subresource && e.verb === "patch" && ours
            ? `pod/${o.name}`
            : undefined;
    if (key && !first.has(key)) first.set(key, w);
  }
  const claims = new Map<string, AuditWrite[]>();
  for (const [name, box] of boxes) {
    const keys = [`create/${name}`, `pod/${box.status?.podName}`, `status/${name}`];
    const mine = keys.map(k => first.get(k));
    if (mine.every(w => w !== undefined)) claims.set(name, mine as AuditWrite[]);
  }
  return claims;
}

/** Resolves once `running` boxes are Running and `paused` Paused, from one list and a watch. */
async function boxesSettled(kube: Kube, ns: string, running: number, paused: number) {
  const count = (items: Obj[], phase: string) =>
    items.filter(b => b.status?.phase === phase).length;
  await kube.waitForItems(
    paths.podboxes(ns),
    items => count(items, "Running") === running && count(items, "Paused") === paused,
    1_200_000,
  );
}

async function benchScale(kube: Kube) {
  const ns = await kube.namespace("bench-scale");
  await kube.mustCreate(paths.podtemplates(ns), podTemplate("python", TEMPLATE));
  const running = 1200;
  const paused = 400;
  const pooled = 400;
  const t0 = now();
  const standbys = await startPool(kube, ns, "scale-pool", pooled);
  const creates: Promise<unknown>[] = [];
  for (let i = 0; i < running + paused; i++) {
    const spec = {
      templateRef: "python",
      desiredState: i < running ? "Running" : "Paused",
      idleTimeoutSeconds: 3600,
    };
    creates.push(kube.mustCreate(paths.podboxes(ns), podBox(`s-${i}`, spec)));
    if (creates.length >= 20) await Promise.all(creates.splice(0));
  }
  await Promise.all(creates);
  // Converged: every running box Running, every paused one Paused, the pool full (from watches).
  await Promise.all([boxesSettled(kube, ns, running, paused), standbys.atLeast(pooled)]);
  standbys.stop();
  const converge = (now() - t0) / 1000;
  await sleep(15_000); // let the last status echoes settle
  const before = moduleRequests();
  await sleep(60_000);
  const after = moduleRequests();
  await sleep(11_000); // one more reaper pass over the full cache
  const reaper = await metric("cubepod_reaper_last_pass");
  const boxes = running + paused + pooled;
  results.scale = {
    what: `${running} running + ${paused} paused boxes + ${pooled} pooled standbys`,
    convergeSeconds: Math.round(converge),
    moduleRSSMiB: moduleRSSMiB(),
    moduleHeapUsedMiB: await metricMiB("nodejs_heap_size_used_bytes"),
    moduleExternalMiB: await metricMiB("nodejs_external_memory_bytes"),
    moduleRequestsInIdleMinute: after.other - before.other,
    apiRequestsPerIdleBoxPerMinute:
      Math.round(((after.other - before.other) / boxes) * 1000) / 1000,
    peprScheduleStoreWritesPerMinute: after.store - before.store,
    reaperPass: reaper,
  };
  await kube.delete(`/api/v1/namespaces/${ns}`);
}

/** The command that reruns each result. */
const RERUN: Record<string, string> = {
  apiServerBaseline: "npm run bench (taken before any of them)",
  wakeUp: "npm run bench (taken before any of them)",
  warmClaim: "npm run bench -- warm",
  warmClaimFloor: "npm run bench -- floor",
  warmClaimStream: "npm run bench -- stream",
  coldStart: "npm run bench -- cold",
  admission: "npm run bench -- admission",
  scale: "npm run bench -- scale",
};

/** One line per figure: benchmark, measure, value. Each claim's figure (`samples`): JSON only. */
function printTable(): void {
  const rows: [string, string, string][] = [];
  const walk = (prefix: string, v: unknown) => {
    if (v && typeof v === "object" && !Array.isArray(v)) {
      for (const [k, x] of Object.entries(v))
        if (k !== "what" && k !== "samples") walk(prefix ? `${prefix}.${k}` : k, x);
    } else rows.push([prefix.split(".")[0], prefix.split(".").slice(1).join("."), String(v)]);
  };
  walk("", results);
  const w = [0, 1, 2].map(i => Math.max(...rows.map(r => r[i].length), 9));
  const line = (r: string[]) => r.map((c, i) => c.padEnd(w[i])).join("  ");
  console.log(line(["benchmark", "measure", "value"]));
  console.log(line(w.map(n => "-".repeat(n))));
  rows.forEach(r => console.log(line(r)));
  for (const [k, v] of Object.entries(results)) {
    console.log(`${k}: ${(v as { what?: string }).what ?? ""}`);
    console.log(`  rerun: ${RERUN[k] ?? `npm run bench -- ${k}`}`);
  }
}

/**
 * Waits until no benchmark namespace is left (an earlier run's, or this run's previous step's,
 * whose deletion takes a while): its teardown would compete with the figures being taken.
 */
async function noBenchNamespaces(kube: Kube) {
  await kube.waitForItems(
    "/api/v1/namespaces",
    items => !items.some(n => String(n.metadata.name).startsWith("bench")),
    600_000,
  );
}

async function main() {
  cluster("up");
  const kube = new Kube();
  await noBenchNamespaces(kube);
  const ns = await kube.namespace("bench");
  await kube.mustCreate(paths.podtemplates(ns), podTemplate("python", TEMPLATE));
  await benchBaseline(kube, ns);
  if (wanted("warm")) await benchWarm(kube, ns);
  if (wanted("floor")) await benchFloor(kube);
  if (wanted("stream")) await benchStream(kube, ns);
  if (wanted("cold")) await benchCold(kube, ns);
  if (wanted("admission")) await benchAdmission(kube, ns);
  await kube.delete(`/api/v1/namespaces/${ns}`);
  if (wanted("scale")) {
    await noBenchNamespaces(kube);
    await benchScale(kube);
  }
  kube.close();

  const dir = join(ROOT, "bench", "results");
  mkdirSync(dir, { recursive: true });
  const stamp = new Date().toISOString().replace(/[:.]/g, "-");
  const file = join(dir, `${stamp}.json`);
  writeFileSync(
    file,
    JSON.stringify({ date: new Date().toISOString(), machine: "2 cores", results }, null, 2),
  );
  printTable();
  console.log(`saved ${file}`);
}

main().catch(e => {
  console.error(e);
  process.exit(1);
});
