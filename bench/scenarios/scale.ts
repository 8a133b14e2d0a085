import { execFile } from "node:child_process";
import { existsSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { CLUSTER_DIR, cluster, Kube, Obj, paths, ROOT } from "../../testkit/kube";
import { podBox, podTemplate, TEMPLATE } from "../../testkit/objects";
import { metric, metricMiB, moduleRequests, moduleRSSMiB } from "../lib/module";
import { startPool } from "../lib/pools";
import { results } from "../lib/results";
import { now, sleep } from "../lib/stats";

/** How long a scale run may take to converge. */
const CONVERGE_MS = 1_800_000;

/** Resolves once `running` boxes are Running and `paused` Paused, from one list and a watch. */
export async function boxesSettled(kube: Kube, ns: string, running: number, paused: number) {
  const count = (items: Obj[], phase: string) =>
    items.filter(b => b.status?.phase === phase).length;
  await kube.waitForItems(
    paths.podboxes(ns),
    items => count(items, "Running") === running && count(items, "Paused") === paused,
    CONVERGE_MS,
  );
}

/** How many boxes of each kind a scale run makes, in each of its namespaces. */
export type ScaleShape = { namespaces: number; running: number; paused: number; pooled: number };

/** The shapes `npm run bench -- <name>` runs: the 10,000 boxes over 100 namespaces too. */
export const SCALE_SHAPES: Record<string, ScaleShape> = {
  scale: { namespaces: 1, running: 1200, paused: 400, pooled: 400 },
  scale10k: { namespaces: 100, running: 70, paused: 20, pooled: 10 },
};

/** The gateway's resident memory (it keeps every box it may serve), in MiB. */
async function gatewayRSSMiB(): Promise<number> {
  const text = await fetch("http://127.0.0.1:8082/metrics").then(r => r.text());
  const line = text.split("\n").find(l => l.startsWith("process_resident_memory_bytes "));
  return line ? Math.round(Number(line.split(" ")[1]) / 1048576) : NaN;
}

/** The line the module logs once its watches and reconcilers are started. */
const STARTED = "CubePod operator started";

/**
 * A watcher restart, as a crash and a restart of the watcher would be: the module killed, started
 * again, and a box that claims from `pool` created at once. Seconds from the start to the box
 * Running, and from the module's own start (its log line; `pepr dev` builds the module first,
 * which a deployed watcher does not) to it.
 */
async function restartToClaim(kube: Kube, ns: string, pool: string) {
  const log = join(CLUSTER_DIR, "logs", "module.log");
  cluster("module", "kill");
  rmSync(log, { force: true });
  const t0 = now();
  const start = promisify(execFile)("bash", [join(ROOT, "local-cluster", "module.sh"), "start"]);
  await kube.mustCreate(paths.podboxes(ns), podBox("after-restart", { warmPoolRef: pool }));
  let started: number | undefined;
  const box = kube.waitFor(
    paths.podboxes(ns, "after-restart"),
    o => o?.status?.phase === "Running",
    600_000,
  );
  let running: Obj | undefined;
  let failed: unknown;
  void box.then(
    b => (running = b),
    e => (failed = e ?? new Error("the box never ran")),
  );
  while (!running && !failed) {
    if (started === undefined && existsSync(log) && readFileSync(log, "utf8").includes(STARTED))
      started = now();
    await sleep(50);
  }
  if (failed || !running) throw failed;
  const served = now();
  await start;
  return {
    restartToClaimSeconds: Math.round((served - t0) / 100) / 10,
    moduleStartToClaimSeconds:
      started === undefined ? NaN : Math.round((served - started) / 100) / 10,
    claimReason: running.status.reason,
  };
}

/** Makes one namespace's template, pool and boxes, 20 writes at a time. */
async function fill(kube: Kube, ns: string, shape: ScaleShape) {
  await kube.mustCreate(paths.podtemplates(ns), podTemplate("python", TEMPLATE));
  const standbys = await startPool(kube, ns, "scale-pool", shape.pooled);
  const creates: Promise<unknown>[] = [];
  for (let i = 0; i < shape.running + shape.paused; i++) {
    const spec = {
      templateRef: "python",
      desiredState: i < shape.running ? "Running" : "Paused",
      idleTimeoutSeconds: 3600,
    };
    creates.push(kube.mustCreate(paths.podboxes(ns), podBox(`s-${i}`, spec)));
    if (creates.length >= 20) await Promise.all(creates.splice(0));
  }
  await Promise.all(creates);
  return standbys;
}

/**
 * Makes a shape's namespaces and fills them, and resolves once it converged: its namespaces and
 * the seconds from the first create.
 */
export async function fillConverged(kube: Kube, shape: ScaleShape) {
  const t0 = now();
  const namespaces: string[] = [];
  for (let i = 0; i < shape.namespaces; i++) namespaces.push(await kube.namespace("bench-scale"));
  const pools = [];
  // Namespaces are filled a few at a time, as independent tenants would apply them.
  for (let i = 0; i < namespaces.length; i += 4) {
    pools.push(...(await Promise.all(namespaces.slice(i, i + 4).map(ns => fill(kube, ns, shape)))));
  }
  // Converged: every running box Running, every paused one Paused, each pool full (from watches).
  await Promise.all([
    ...namespaces.map(ns => boxesSettled(kube, ns, shape.running, shape.paused)),
    ...pools.map(p => p.atLeast(shape.pooled, CONVERGE_MS)),
  ]);
  pools.forEach(p => p.stop());
  return { namespaces, convergeSeconds: (now() - t0) / 1000 };
}

export async function benchScale(kube: Kube, name: keyof typeof SCALE_SHAPES & string) {
  const shape = SCALE_SHAPES[name];
  const { namespaces, convergeSeconds: converge } = await fillConverged(kube, shape);
  await sleep(15_000); // let the last status echoes settle
  const before = moduleRequests();
  await sleep(60_000);
  const after = moduleRequests();
  await sleep(11_000); // one more reaper pass over the full cache
  const reaper = await metric("cubepod_reaper_last_pass");
  const perNamespace = shape.running + shape.paused + shape.pooled;
  const boxes = perNamespace * shape.namespaces;
  results[name] = {
    what:
      `${shape.running * shape.namespaces} running + ${shape.paused * shape.namespaces} paused ` +
      `boxes + ${shape.pooled * shape.namespaces} pooled standbys in ${shape.namespaces} ` +
      `namespace(s)`,
    convergeSeconds: Math.round(converge),
    moduleRSSMiB: moduleRSSMiB(),
    moduleHeapUsedMiB: await metricMiB("nodejs_heap_size_used_bytes"),
    moduleExternalMiB: await metricMiB("nodejs_external_memory_bytes"),
    gatewayRSSMiB: await gatewayRSSMiB(),
    moduleRequestsInIdleMinute: after.other - before.other,
    apiRequestsPerIdleBoxPerMinute:
      Math.round(((after.other - before.other) / boxes) * 1000) / 1000,
    peprScheduleStoreWritesPerMinute: after.store - before.store,
    reaperPass: reaper,
    ...(await restartToClaim(kube, namespaces[0], "scale-pool")),
  };
  for (const ns of namespaces) await kube.delete(`/api/v1/namespaces/${ns}`);
}
