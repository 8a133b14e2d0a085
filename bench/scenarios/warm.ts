import { Kube, Obj, paths } from "../../testkit/kube";
import { apiServerShare } from "../lib/audit";
import { indexMissesDuring } from "../lib/module";
import { claimTimer, deletePool, startPool } from "../lib/pools";
import { results } from "../lib/results";
import { sleep, stats, tenths } from "../lib/stats";

/**
 * The back-to-back series runs in rounds of 40 claims on a pool of 25, the pool full again
 * before each: 200 claims, so that its p99 is a percentile (the third slowest) and not the one
 * slowest claim, as it is of 40. Likewise six rounds of 20 concurrent claims.
 */
export const C1_ROUNDS = 5;
export const C1_PER_ROUND = 40;
export const C20_ROUNDS = 6;

export async function benchWarm(kube: Kube, ns: string) {
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
      // Each round starts a moment after the pool is full: the objects just made are still
      // being digested (garbage collector graph, volume controller, caches), which slows the
      // claims right after.
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
