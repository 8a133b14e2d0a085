import { spawn } from "node:child_process";
import { join } from "node:path";
import { cluster, Kube, paths, ROOT } from "../../testkit/kube";
import { podTemplate, TEMPLATE } from "../../testkit/objects";
import { claimTimer, startPool } from "../lib/pools";
import { C1_PER_ROUND, C1_ROUNDS, C20_ROUNDS } from "./warm";
import { results } from "../lib/results";
import { sleep, stats, tenths } from "../lib/stats";

/**
 * The floor under the warm claim on this machine, taken right after it: the same claims (back to
 * back, then one at a time on a full pool) served by bench/floor-operator.ts instead of the
 * module, which is stopped meanwhile. That operator makes the same two writes on the same
 * standby Pods (made by the module before it stopped) and does nothing else, so the difference
 * between the two figures is what CubePod adds. Last, the same rounds of 20 concurrent claims.
 */
export async function benchFloor(kube: Kube) {
  const ns = await kube.namespace("bench-floor");
  await kube.mustCreate(paths.podtemplates(ns), podTemplate("python", TEMPLATE));
  const pool = "floor-pool";
  const backToBackClaims = C1_ROUNDS * C1_PER_ROUND;
  const size = backToBackClaims + 20 + C20_ROUNDS * 20;
  const standbys = await startPool(kube, ns, pool, size);
  await standbys.atLeast(size);
  standbys.stop();
  try {
    await withFloorOperator(ns, pool, async () => {
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
    });
  } finally {
    // Nothing of the module's is in the namespace but the pool and its standbys (no finalizer).
    await kube.delete(`/api/v1/namespaces/${ns}`);
    await kube.waitFor(`/api/v1/namespaces/${ns}`, o => o === undefined, 300_000);
    cluster("module", "start");
  }
}

/**
 * Runs `measure` with the module stopped and bench/scenarios/floor-operator.ts serving the claims
 * of `pool` from its ready standbys instead; the module stays stopped after it.
 */
export async function withFloorOperator(ns: string, pool: string, measure: () => Promise<void>) {
  cluster("module", "stop");
  // Its own process group: npx and tsx start children of their own, and all of them must end.
  const operator = spawn(
    "npx",
    ["tsx", join(ROOT, "bench", "scenarios", "floor-operator.ts"), ns, pool],
    {
      stdio: ["ignore", "pipe", "inherit"],
      detached: true,
    },
  );
  try {
    await new Promise<void>((resolve, reject) => {
      operator.stdout.on("data", d => String(d).includes("ready") && resolve());
      operator.on("exit", code => reject(new Error(`floor operator exited (${code})`)));
    });
    await measure();
  } finally {
    // It may have ended already (what ended it is on stderr).
    if (operator.exitCode === null) process.kill(-operator.pid!, "SIGTERM");
    operator.stdout.destroy();
  }
}
