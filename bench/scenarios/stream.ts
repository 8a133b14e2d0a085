import { Kube, Obj, paths } from "../../testkit/kube";
import { openLoop, steady } from "../lib/arrivals";
import { AuditWrite, auditWrites, claimWrites } from "../lib/audit";
import { indexMissesDuring } from "../lib/module";
import { claimTimer, deletePool, startPool } from "../lib/pools";
import { results } from "../lib/results";
import { sleep, stats } from "../lib/stats";

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
export async function benchStream(kube: Kube, ns: string) {
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
      await openLoop(steady(names.length, everyMs), async i => {
        fewestReady = Math.min(fewestReady, standbys.ready());
        latency.set(names[i], await one(names[i]));
      });
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
export function metOtherWrites(ns: string, boxes: Map<string, Obj>): Map<string, boolean> {
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
