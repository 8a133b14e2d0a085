import { boxOfPod } from "../../capabilities/manifests/owner";
import { auditEvents } from "../../testkit/audit-log";
import { cluster, Kube, Obj, paths } from "../../testkit/kube";
import { podTemplate, TEMPLATE } from "../../testkit/objects";
import { openLoop, steady } from "../lib/arrivals";
import { auditMs } from "../lib/audit";
import { claimTimer, type PoolReadiness, poolPods, startPool } from "../lib/pools";
import { cpuBetween, cpuByRole, machineQuiet, type RoleCpu } from "../lib/process-cpu";
import { results } from "../lib/results";
import { hundredths, sleep, stats, tenths } from "../lib/stats";
import { withFloorOperator } from "./floor";

/** The rates of the ramp, claims per second; each step lasts {@link STEP_MS}. */
export const RATES = [10, 20, 40, 60, 70, 80, 90, 100, 110, 120, 130, 140, 160, 180, 200];
export const STEP_MS = 3000;
/**
 * A ramp's pool: standbys for its fastest step. Every step starts on a full pool, so that none
 * runs beside the refill of the step before it (the floor operator never refills: a CubePod step
 * after a floor step would otherwise pay for the floor's claims).
 */
export const RAMP_POOL = (Math.max(...RATES) * STEP_MS) / 1000;
/** A claim not served within this long counts as an error. */
const CLAIM_TIMEOUT_MS = 10_000;
/** Saturated: p99 above this, or any error. */
const P99_LIMIT_MS = 1000;

export type Step = { rate: number; sentPerSecond: number; errors: number } & Partial<
  ReturnType<typeof stats>
>;
/** Where a ramp's claims go: a pool, and its ready standbys. */
export type ClaimTarget = { ns: string; pool: string; standbys: PoolReadiness };

export const saturated = (s: Step) => s.errors > 0 || (s.p99 ?? Infinity) > P99_LIMIT_MS;
/** The highest rate of a ramp that kept p99 within the limit without errors. */
export const bestRate = (steps: Step[]) =>
  Math.max(0, ...steps.filter(s => !saturated(s)).map(s => s.rate));

/**
 * Warm claims at saturation: an open-loop ramp, a step of 3 s at each rate (claims sent on a clock
 * whatever the answers do), CubePod and then the floor operator (floor-operator.ts: the claim's
 * two writes and nothing else, the module stopped) at each rate, on the same pool, full again
 * and the machine quiet before each step, until each has passed a p99 of 1 s or had errors. A
 * claim is the PodBox create to its `status.podIP` as a watching client sees it; one not served
 * within 10 s, or served by a cold start, is an error. The figure is each one's highest rate
 * that kept p99 within 1 s without errors, and their ratio; and where the time of CubePod's
 * highest rate went, against the floor at that rate: each process's CPU and the API requests per
 * claim.
 */
export async function benchSaturation(kube: Kube) {
  const ns = await kube.namespace("bench-saturation");
  await kube.mustCreate(paths.podtemplates(ns), podTemplate("python", TEMPLATE));
  const pool = "ramp-pool";
  const standbys = await startPool(kube, ns, pool, RAMP_POOL);
  const ramp: { cubepod: Step[]; floor: Step[] } = { cubepod: [], floor: [] };
  const done = (steps: Step[]) => steps.some(saturated);
  const target = [{ ns, pool, standbys }];
  const costs = { cubepod: new Map<number, StepCost>(), floor: new Map<number, StepCost>() };
  for (const rate of RATES) {
    if (done(ramp.cubepod) && done(ramp.floor)) break;
    const count = (rate * STEP_MS) / 1000;
    if (!done(ramp.cubepod)) {
      await standbys.atLeast(RAMP_POOL);
      await settle();
      ramp.cubepod.push(
        await costed(costs.cubepod, rate, () => step(kube, target, `c${rate}`, rate, count)),
      );
      console.log(`saturation: CubePod at ${rate}/s: ${JSON.stringify(ramp.cubepod.at(-1))}`);
      await deleteBoxes(kube, ns);
    }
    if (!done(ramp.floor)) {
      await standbys.atLeast(RAMP_POOL);
      await withFloorOperator(ns, pool, async () => {
        await settle();
        ramp.floor.push(
          await costed(costs.floor, rate, () => step(kube, target, `f${rate}`, rate, count)),
        );
        console.log(`saturation: floor at ${rate}/s: ${JSON.stringify(ramp.floor.at(-1))}`);
        // Its boxes have no finalizer: they go at once, their Pods with them.
        await deleteBoxes(kube, ns);
        await kube.waitForItems(
          paths.pods(ns),
          items => !items.some(p => boxOfPod(p.metadata) !== undefined),
          300_000,
        );
      }).finally(() => cluster("module", "start"));
    }
  }
  standbys.stop();
  results.claimSaturation = {
    what:
      "warm claims in an open-loop ramp, 3 s per rate: the highest rate (claims/s) with p99 <= 1 s " +
      "and no errors, CubePod against the floor operator on the same pool",
    cubepodClaimsPerSecond: bestRate(ramp.cubepod),
    floorClaimsPerSecond: bestRate(ramp.floor),
    ratio: hundredths(bestRate(ramp.cubepod) / Math.max(1, bestRate(ramp.floor))),
    ...Object.fromEntries(ramp.cubepod.map(s => [`cubepod${s.rate}PerSecond`, s])),
    ...Object.fromEntries(ramp.floor.map(s => [`floor${s.rate}PerSecond`, s])),
  };
  const rate = bestRate(ramp.cubepod);
  const [mine, floor] = [costs.cubepod.get(rate), costs.floor.get(rate)];
  if (mine && floor) {
    results.claimSaturationCost = {
      what:
        `per warm claim, at the highest rate CubePod kept within a p99 of 1 s (${rate}/s): the ` +
        "CPU milliseconds each process used from the step's first claim to its last served, and " +
        "the API requests in the claims' namespace (watches left out), CubePod against the floor " +
        "operator; operator: the module or the floor operator, sender: the benchmark's process",
      ...perClaim(ns, { cubepod: mine, floor }, (rate * STEP_MS) / 1000),
    };
  }
  await kube.delete(`/api/v1/namespaces/${ns}`);
  await kube.waitForItems(poolPods(ns, pool), items => items.length === 0, 300_000);
}

/** Waits before a step until the machine is quiet, and says so when it never was. */
async function settle() {
  if (!(await machineQuiet())) console.log("saturation: the machine was not quiet before a step");
}

/** What a step cost: when it ran (epoch ms), and each role's CPU meanwhile. */
type StepCost = { from: number; to: number; cpu: RoleCpu };

/** The machine's processes by what they do in a claim. */
function roleOf(pid: number, command: string): string {
  if (pid === process.pid) return "sender";
  if (/pepr-cubepod\.js|floor-operator\.ts/.test(command)) return "operator";
  const program = command.split(" ")[0].split("/").pop();
  return program === "kube-apiserver" || program === "etcd" ? program : "other";
}

/** Runs a step, and records its cost under its rate. */
async function costed(costs: Map<number, StepCost>, rate: number, run: () => Promise<Step>) {
  const [before, from] = [cpuByRole(roleOf), Date.now()];
  const s = await run();
  costs.set(rate, { from, to: Date.now(), cpu: cpuBetween(before, cpuByRole(roleOf)) });
  return s;
}

/** Each role's CPU milliseconds and the API requests per claim, for each of the steps. */
function perClaim(ns: string, steps: Record<string, StepCost>, claims: number) {
  const requests = auditEvents(`"namespace":"${ns}"`, '"stage":"ResponseComplete"').filter(
    e => e.verb !== "watch",
  );
  const each = (f: (c: StepCost) => number) =>
    Object.fromEntries(Object.entries(steps).map(([k, c]) => [k, hundredths(f(c) / claims)]));
  const cpu = (role?: string) => (c: StepCost) =>
    role ? (c.cpu.get(role) ?? 0) : [...c.cpu.values()].reduce((a, b) => a + b, 0);
  return {
    kubeApiserverCpuMs: each(cpu("kube-apiserver")),
    etcdCpuMs: each(cpu("etcd")),
    operatorCpuMs: each(cpu("operator")),
    senderCpuMs: each(cpu("sender")),
    otherCpuMs: each(cpu("other")),
    allCpuMs: each(cpu()),
    apiRequests: each(
      c =>
        requests.filter(e => {
          const at = auditMs(e.requestReceivedTimestamp);
          return at >= c.from && at <= c.to;
        }).length,
    ),
  };
}

/**
 * One step of the ramp: `count` claims at `rate` a second, sent on a clock, taking turns over the
 * targets.
 */
export async function step(
  kube: Kube,
  targets: ClaimTarget[],
  label: string,
  rate: number,
  count: number,
): Promise<Step> {
  const timers = targets.map(t => claimTimer(kube, t.ns, t.pool, t.standbys));
  const names = Array.from({ length: count }, (_, i) => `${label}-${i}`);
  const timeout = () => sleep(CLAIM_TIMEOUT_MS).then(() => undefined);
  const { results: times, rate: sent } = await openLoop(steady(count, 1000 / rate), i =>
    Promise.race([timers[i % targets.length].claim(names[i]).catch(() => undefined), timeout()]),
  );
  for (const t of timers) t.stop();
  const warm = new Set<string>();
  for (const t of targets) {
    const boxes = (await kube.get(paths.podboxes(t.ns))).body.items as Obj[];
    for (const b of boxes) if (b.status?.reason === "WarmPoolClaimed") warm.add(b.metadata.name);
  }
  const served = names.flatMap((n, i) =>
    times[i] !== undefined && warm.has(n) ? [times[i]!] : [],
  );
  return {
    rate,
    sentPerSecond: tenths(sent),
    errors: count - served.length,
    ...(served.length > 0 ? stats(served) : {}),
  };
}

/** Deletes every box of the namespace, and waits until they are gone. */
export async function deleteBoxes(kube: Kube, ns: string) {
  const boxes = (await kube.get(paths.podboxes(ns))).body.items as Obj[];
  for (let i = 0; i < boxes.length; i += 20) {
    await Promise.all(
      boxes.slice(i, i + 20).map(b => kube.delete(paths.podboxes(ns, b.metadata.name))),
    );
  }
  await kube.waitForItems(paths.podboxes(ns), items => items.length === 0, 600_000);
}
