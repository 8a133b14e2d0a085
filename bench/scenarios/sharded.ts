import { shardOf } from "../../capabilities/shard/shard-of";
import { deployModule, undeployModule } from "../../testkit/deployed-module";
import { Kube, Obj, paths } from "../../testkit/kube";
import { podTemplate, TEMPLATE } from "../../testkit/objects";
import {
  heldBy,
  killModuleProcess,
  namespacesPerShard,
  podOfReplica,
  replicaFigures,
  scaleWatcher,
  shardLease,
  waitLiveHolders,
  waitShardHolders,
  watcherPods,
} from "../../testkit/shards";
import { claimTimer, deletePool, startPool } from "../lib/pools";
import { results } from "../lib/results";
import { hundredths, sleep, stats, tenths } from "../lib/stats";
import { fillConverged, SCALE_SHAPES } from "./scale";
import {
  bestRate,
  type ClaimTarget,
  deleteBoxes,
  RAMP_POOL,
  RATES,
  saturated,
  step,
  STEP_MS,
  type Step,
} from "./saturation";

/*
 * Sharded watchers on kwok: the module installed from its chart on the real node with
 * `watcher.replicas: 3` (three shards, the chart's default Lease of 15 s), its sandboxes on kwok's
 * node. `sharded`: a replica killed during a stream of claims, and the claim ramp with three
 * replicas against one (the same install scaled to one replica, which then holds all three
 * shards). `sharded10k`: 10,000 boxes, the memory of each replica against one holding them all.
 */

const SHARDS = 3;
/** Room for one replica to hold all 10,000 boxes, and no CPU cap: only the machine limits. */
const RESOURCES = { requests: { memory: "64Mi", cpu: "50m" }, limits: { memory: "2Gi", cpu: "2" } };
const allHeldByOne = (h: string[]) => h.every(x => x !== "" && x === h[0]);

/** `sharded`: the kill and the ramp; `sharded10k`: the 10,000 boxes. */
export async function benchSharded(kube: Kube, part: "sharded" | "sharded10k") {
  await deployModule(kube, { replicas: SHARDS, resources: RESOURCES });
  try {
    await waitLiveHolders(kube, SHARDS, SHARDS, 180_000);
    if (part === "sharded10k") return await tenThousandBoxes(kube);
    const suffix = Math.random().toString(36).slice(2, 6);
    const namespaces = namespacesPerShard(`bench-shard-${suffix}`, SHARDS, ns =>
      shardOf(ns, SHARDS),
    );
    for (const ns of namespaces) {
      await kube.mustCreate("/api/v1/namespaces", { metadata: { name: ns } });
      await kube.mustCreate(paths.podtemplates(ns), podTemplate("python", TEMPLATE));
    }
    await killDuringClaims(kube, namespaces);
    await rampThreeAgainstOne(kube, namespaces);
    for (const ns of namespaces) await kube.delete(`/api/v1/namespaces/${ns}`);
  } finally {
    await undeployModule(kube);
  }
}

/**
 * 200 claims at 10/s over the three shards' namespaces; 5 s in, the replica holding shard 1 is
 * killed (SIGKILL). Every claim must be served once; the figures are how long the shard went
 * unserved and what its claims waited.
 */
async function killDuringClaims(kube: Kube, namespaces: string[]) {
  const pools = await Promise.all(namespaces.map(ns => startPool(kube, ns, "stream", 80)));
  await Promise.all(pools.map(p => p.atLeast(80)));
  const timers = namespaces.map((ns, i) => claimTimer(kube, ns, "stream", pools[i]));
  const holders = await waitLiveHolders(kube, SHARDS, SHARDS, 60_000);
  const victim = holders[1];
  const pod = podOfReplica(await watcherPods(kube), victim)!;
  const claims: Promise<number | undefined>[] = [];
  const sentAt: number[] = [];
  let killedAt = 0;
  for (let i = 0; i < 200; i++) {
    if (i === 50) {
      if (killModuleProcess(pod) === 0)
        throw new Error(`no module process in ${pod.metadata.name}`);
      killedAt = Date.now();
    }
    sentAt.push(Date.now());
    const timeout = sleep(180_000).then(() => undefined);
    claims.push(Promise.race([timers[i % SHARDS].claim(`k-${i}`).catch(() => undefined), timeout]));
    await sleep(100);
  }
  const times = await Promise.all(claims);
  for (const t of timers) t.stop();
  const moved = await waitShardHolders(kube, SHARDS, h => h[1] !== "" && h[1] !== victim, 60_000);
  const lease = (await kube.get(shardLease(1, SHARDS))).body;
  const boxes = (await kube.get(paths.podboxes(namespaces[1]))).body.items as Obj[];
  const podNames = boxes.map(b => b.status?.podName).filter(Boolean);
  const victimClaims = times.filter((t, i) => i % SHARDS === 1 && sentAt[i] >= killedAt);
  const otherClaims = times.filter((t, i) => i % SHARDS !== 1 && sentAt[i] >= killedAt);
  const served = (ts: (number | undefined)[]) => ts.filter((t): t is number => t !== undefined);
  results.shardedKill = {
    what:
      "three watcher replicas (Lease 15 s); 200 warm claims at 10/s over three namespaces, one " +
      "per shard; the replica holding shard 1 killed with SIGKILL after 50",
    claims: times.length,
    claimsNeverServed: times.filter(t => t === undefined).length,
    standbysClaimedTwice: podNames.length - new Set(podNames).size,
    shardTakenOverAfterSeconds: tenths((Date.parse(lease.spec.acquireTime) - killedAt) / 1000),
    takenOverBy: moved[1] === victim ? "the same replica" : "another replica",
    killedShardClaimsAfterKill: stats(served(victimClaims)),
    otherShardsClaimsAfterKill: stats(served(otherClaims)),
  };
  console.log(`sharded: kill: ${JSON.stringify(results.shardedKill)}`);
  await waitShardHolders(kube, SHARDS, heldBy(SHARDS), 120_000);
  for (const ns of namespaces) {
    await deleteBoxes(kube, ns);
    await deletePool(kube, ns, "stream");
  }
}

/**
 * The claim ramp (saturation.ts) over the three namespaces, with three replicas, then with the
 * install scaled to one replica holding all three shards.
 */
async function rampThreeAgainstOne(kube: Kube, namespaces: string[]) {
  const perPool = Math.ceil(RAMP_POOL / SHARDS);
  const targets: ClaimTarget[] = await Promise.all(
    namespaces.map(async ns => ({
      ns,
      pool: "ramp",
      standbys: await startPool(kube, ns, "ramp", perPool),
    })),
  );
  const ramp = async (label: string) => {
    const steps: Step[] = [];
    for (const rate of RATES) {
      const count = (rate * STEP_MS) / 1000;
      await Promise.all(targets.map(t => t.standbys.atLeast(perPool)));
      await sleep(2000);
      steps.push(await step(kube, targets, `${label}${rate}`, rate, count));
      console.log(`sharded: ${label} at ${rate}/s: ${JSON.stringify(steps.at(-1))}`);
      for (const t of targets) await deleteBoxes(kube, t.ns);
      if (saturated(steps.at(-1)!)) break;
    }
    return steps;
  };
  const three = await ramp("r3-");
  await scaleWatcher(kube, 1);
  await waitShardHolders(kube, SHARDS, allHeldByOne, 120_000);
  const one = await ramp("r1-");
  await scaleWatcher(kube, SHARDS);
  await waitShardHolders(kube, SHARDS, heldBy(SHARDS), 120_000);
  for (const t of targets) {
    t.standbys.stop();
    await deletePool(kube, t.ns, "ramp");
  }
  results.shardedSaturation = {
    what:
      "warm claims in an open-loop ramp over three namespaces, one per shard, 3 s per rate: the " +
      "highest rate (claims/s) with p99 <= 1 s and no errors, with three watcher replicas and " +
      "with the same install scaled to one",
    threeReplicasClaimsPerSecond: bestRate(three),
    oneReplicaClaimsPerSecond: bestRate(one),
    ratio: hundredths(bestRate(three) / Math.max(1, bestRate(one))),
    ...Object.fromEntries(three.map(s => [`threeReplicas${s.rate}PerSecond`, s])),
    ...Object.fromEntries(one.map(s => [`oneReplica${s.rate}PerSecond`, s])),
  };
}

/**
 * The 10,000 boxes of `scale10k` over 100 namespaces: converged with three replicas, each
 * replica's memory; then scaled to one replica, which takes every shard, and its memory.
 */
async function tenThousandBoxes(kube: Kube) {
  const shape = SCALE_SHAPES.scale10k;
  const idle = await Promise.all((await watcherPods(kube)).map(replicaFigures));
  const { namespaces, convergeSeconds } = await fillConverged(kube, shape);
  const running = shape.running * shape.namespaces;
  results.shardedScale10k = {
    what:
      `${running} running + ${shape.paused * shape.namespaces} paused boxes + ` +
      `${shape.pooled * shape.namespaces} pooled standbys in ${shape.namespaces} namespaces, ` +
      "three watcher replicas; then the install scaled to one replica holding every shard; " +
      "idle: a replica before the boxes were made",
    convergeSeconds: Math.round(convergeSeconds),
    ...(await memoryThreeAgainstOne(kube, running, idle)),
  };
  console.log(`sharded: 10k: ${JSON.stringify(results.shardedScale10k)}`);
  for (const ns of namespaces) await kube.delete(`/api/v1/namespaces/${ns}`);
}

type ReplicaFigures = Awaited<ReturnType<typeof replicaFigures>>;

/**
 * Each of the three replicas' memory and namespaces once settled, then the install scaled to one
 * replica: its memory once it serves all `running` boxes; the largest replica's share of one's, in
 * all and above what the replicas held when `idle`.
 */
export async function memoryThreeAgainstOne(kube: Kube, running: number, idle: ReplicaFigures[]) {
  await sleep(30_000);
  const figures = await Promise.all((await watcherPods(kube)).map(replicaFigures));
  figures.sort((a, b) => b.rssMiB - a.rssMiB);

  await scaleWatcher(kube, 1);
  await waitShardHolders(kube, SHARDS, allHeldByOne, 180_000);
  let alone = await replicaFigures((await watcherPods(kube))[0]);
  for (let i = 0; i < 600 && alone.activeSandboxes !== running; i++) {
    await sleep(1000);
    alone = await replicaFigures((await watcherPods(kube))[0]);
  }
  await sleep(30_000);
  alone = await replicaFigures((await watcherPods(kube))[0]);

  const largest = (f: ReplicaFigures[], of: "rssMiB" | "heapUsedMiB") =>
    Math.max(...f.map(x => x[of]));
  /** The largest replica's share of the one replica's figure, above `base`. */
  const share = (of: "rssMiB" | "heapUsedMiB", base = 0) =>
    hundredths((largest(figures, of) - base) / (alone[of] - base));
  return {
    idleReplicaRSSMiB: largest(idle, "rssMiB"),
    idleReplicaHeapUsedMiB: largest(idle, "heapUsedMiB"),
    ...Object.fromEntries(
      figures.flatMap((f, i) => [
        [`replica${i + 1}RSSMiB`, f.rssMiB],
        [`replica${i + 1}HeapUsedMiB`, f.heapUsedMiB],
        [`replica${i + 1}Namespaces`, f.namespaces],
      ]),
    ),
    largestRSSMiB: largest(figures, "rssMiB"),
    largestHeapUsedMiB: largest(figures, "heapUsedMiB"),
    oneReplicaRSSMiB: alone.rssMiB,
    oneReplicaHeapUsedMiB: alone.heapUsedMiB,
    oneReplicaNamespaces: alone.namespaces,
    largestReplicaOverOneRSS: share("rssMiB"),
    largestReplicaOverOneHeap: share("heapUsedMiB"),
    largestReplicaOverOneRSSAboveIdle: share("rssMiB", largest(idle, "rssMiB")),
    largestReplicaOverOneHeapAboveIdle: share("heapUsedMiB", largest(idle, "heapUsedMiB")),
  };
}
