import { boxOfPod } from "../../capabilities/manifests/owner";
import { Kube, Obj, paths } from "../../testkit/kube";
import { podBox } from "../../testkit/objects";
import { now } from "./stats";
import { watcher } from "./watch";

/** The collection of a pool's Pods (its standbys), by their pool label. */
export const poolPods = (ns: string, pool: string) =>
  `${paths.pods(ns)}?labelSelector=${encodeURIComponent(`pod.cubeplex.ai/pool=${pool}`)}`;

/** Deletes a pool; its standbys go with it, and the next benchmark starts once they are gone. */
export async function deletePool(kube: Kube, ns: string, pool: string) {
  await kube.delete(paths.podwarmpools(ns, pool));
  await kube.waitForItems(poolPods(ns, pool), items => items.length === 0, 300_000);
}

export type PoolReadiness = ReturnType<typeof poolReadiness>;

/**
 * Follows the ready standby Pods of a pool from a list and watches (the pool's status lags), so
 * that waiting for standbys between claims adds no requests of the benchmark's own but a list
 * each time the API server ends a watch.
 */
export function poolReadiness(kube: Kube, ns: string, pool: string) {
  const query = poolPods(ns, pool);
  const ready = new Set<string>();
  // Standbys a box was seen running on. The watch's event for a Pod leaving the pool can come
  // after the box's: counted as ready, such a Pod would make the benchmark send a claim against
  // an empty pool, and measure a cold start. A name leaves the set with its Pod: the pool may
  // give a later standby the same name.
  const claimed = new Set<string>();
  let waiters: { n: number; resolve: () => void }[] = [];
  const see = (type: string, p: Obj) => {
    if (type === "DELETED") claimed.delete(p.metadata.name);
    const isReady =
      type !== "DELETED" &&
      !p.metadata.deletionTimestamp &&
      !claimed.has(p.metadata.name) &&
      // A claimed standby keeps the pool's label until its claim's finish; a box controls it.
      boxOfPod(p.metadata) === undefined &&
      (p.status?.conditions ?? []).some((c: Obj) => c.type === "Ready" && c.status === "True");
    if (isReady) ready.add(p.metadata.name);
    else ready.delete(p.metadata.name);
    waiters = waiters.filter(w => (ready.size >= w.n ? (w.resolve(), false) : true));
  };
  const follow = kube.followCollection(
    query,
    pods => {
      ready.clear();
      const listed = new Set(pods.map(p => p.metadata.name as string));
      for (const name of claimed) if (!listed.has(name)) claimed.delete(name);
      for (const p of pods) see("ADDED", p);
    },
    see,
  );
  const started = follow.started;
  return {
    /** Standbys ready now (as last seen by the watch). */
    ready: () => ready.size,
    /** A box runs on this Pod now: it is no standby, whatever the pool's watch still says. */
    claimed: (pod: string) => {
      claimed.add(pod);
      ready.delete(pod);
    },
    /** Resolves once at least `n` standbys are ready, or fails after `timeoutMs`. */
    atLeast: async (n: number, timeoutMs = 300_000) => {
      await started;
      if (ready.size >= n) return;
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`pool ${pool} never had ${n} ready standbys`)),
          timeoutMs,
        );
        waiters.push({ n, resolve: () => (clearTimeout(timer), resolve()) });
      });
    },
    stop: () => follow.stop(),
  };
}
/** Creates a pool of the "python" template and follows its ready standbys. */
export async function startPool(kube: Kube, ns: string, pool: string, replicas: number) {
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
export function claimTimer(kube: Kube, ns: string, pool: string, standbys: PoolReadiness) {
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
    /**
     * The claim itself as the watch saw it, whoever made the box: from the box's first event to
     * its `status.podIP`.
     */
    claimSpan: async (name: string) => (await w.when(name)) - w.firstSeen(name)!,
    stop: w.stop,
  };
}
