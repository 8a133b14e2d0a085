import { randomBytes } from "node:crypto";
import type { kind } from "pepr";
import type { CubePodTemplate, PodWarmPool } from "../api/kinds";
import { getObject, listObjects, paths } from "../client/resources";
import type { PodWarmPoolStatus } from "../api/podwarmpool";
import { podWarmPoolSpecSchema } from "../api/podwarmpool";
import { validatePodTemplate } from "../admission/rules";
import {
  LABEL_POOL,
  LABEL_TEMPLATE_HASH,
  LABEL_VOLUME,
  LABEL_VOLUME_KEY,
} from "../manifests/labels";
import { templateHash } from "../manifests/template-hash";
import type { PoolTemplate } from "./claim-decide";
import { reconcileDuration } from "../metrics/registry";
import { applyAction, claimClock, writeStatusAt } from "./box-apply";
import { describeError, NamespaceTerminatingError } from "./errors";
import { reportRetry } from "./retry-report";
import { decidePool, failedPoolStatus, ObservedStandby, PoolObservation } from "./pool-decide";
import { OwnWrites } from "./own-writes";
import { KeyedQueue, WorkResult } from "./queue";
import { objectKey } from "./keys";
import { kubeTime } from "./conditions";

/**
 * The current template of each pool and its hash, for claims to prefer standbys that are not
 * stale.
 */
export const poolTemplates = new Map<string, PoolTemplate & { hash: string }>();

/** Reads a pool, its template and its standbys (Pods and PVCs by the pool label). */
export async function observePool(pool: PodWarmPool, now = new Date()): Promise<PoolObservation> {
  const namespace = pool.metadata!.namespace!;
  const name = pool.metadata!.name!;
  const spec = podWarmPoolSpecSchema.parse(pool.spec);
  const [tpl, pods, pvcs] = await Promise.all([
    getObject<CubePodTemplate>(paths.podTemplates(namespace, spec.templateRef)),
    listObjects<kind.Pod>(paths.pods(namespace), `${LABEL_POOL}=${name}`),
    listObjects<kind.PersistentVolumeClaim>(paths.pvcs(namespace), `${LABEL_POOL}=${name}`),
  ]);
  const verdict = tpl ? validatePodTemplate(tpl.spec) : undefined;
  const template = verdict?.ok ? { name: spec.templateRef, spec: verdict.spec } : undefined;

  const standbys = new Map<string, ObservedStandby>();
  const entry = (key: string) => {
    const s = standbys.get(key) ?? { name: key, pvcs: [] };
    standbys.set(key, s);
    return s;
  };
  for (const p of pvcs) {
    const key = p.metadata?.labels?.[LABEL_VOLUME_KEY];
    const role = p.metadata?.labels?.[LABEL_VOLUME];
    if (!key || (role !== "rootfs" && role !== "workspace")) continue;
    const s = entry(key);
    s.templateHash ??= p.metadata?.labels?.[LABEL_TEMPLATE_HASH];
    s.pvcs.push({
      name: p.metadata!.name!,
      role,
      deleting: Boolean(p.metadata?.deletionTimestamp),
      owners: p.metadata?.ownerReferences ?? [],
    });
  }
  for (const p of pods) {
    const s = entry(p.metadata!.name!);
    s.templateHash = p.metadata?.labels?.[LABEL_TEMPLATE_HASH] ?? s.templateHash;
    s.pod = {
      name: p.metadata!.name!,
      uid: p.metadata?.uid,
      phase: p.status?.phase,
      podIP: p.status?.podIP,
      ready: (p.status?.conditions ?? []).some(c => c.type === "Ready" && c.status === "True"),
      deleting: Boolean(p.metadata?.deletionTimestamp),
      resourceVersion: p.metadata?.resourceVersion,
    };
  }
  // PVCs whose Pod left the pool: a box claimed it and will take the PVCs over; not ours now.
  const podless = [...standbys.values()].filter(s => !s.pod).map(s => s.name);
  if (podless.length > 0) {
    const claimed = await listObjects<kind.Pod>(
      paths.pods(namespace),
      `${LABEL_VOLUME_KEY} in (${podless.join(",")})`,
    );
    for (const p of claimed) standbys.delete(p.metadata?.labels?.[LABEL_VOLUME_KEY] ?? "");
  }

  const hash = template ? templateHash(template.spec) : undefined;
  return {
    pool: {
      name,
      namespace,
      uid: pool.metadata!.uid!,
      generation: pool.metadata?.generation ?? 0,
      spec,
      status: pool.status ?? {},
    },
    template,
    templateHash: hash,
    standbys: [...standbys.values()],
    freshNames: Array.from(
      { length: spec.replicas + 1 },
      () => `${name}-${randomBytes(3).toString("hex")}`,
    ),
    now: kubeTime(now),
  };
}

/** The longest a pool's write waits for claims in flight to end. */
const CLAIM_YIELD_MAX_MS = 1000;

/** Pool versions this reconciler wrote (its status): their watch events need no reconcile. */
const poolWrites = new OwnWrites();

/** Enqueues the reconcile of a pool's watch event, unless it is the echo of its status write. */
export function enqueuePool(pool: PodWarmPool): void {
  const key = objectKey(pool.metadata!.namespace!, pool.metadata!.name!);
  poolWrites.unlessEcho(key, pool.metadata?.resourceVersion, () => poolQueue.add(key));
}

/** One reconcile of a pool: observe, decide, apply, write the status when it changed. */
export async function reconcilePool(key: string): Promise<WorkResult> {
  const [namespace, name] = key.split("/");
  const pool = await getObject<PodWarmPool>(paths.podWarmPools(namespace, name));
  if (!pool || pool.metadata?.deletionTimestamp) {
    poolTemplates.delete(key);
    poolWrites.forget(key);
    return;
  }
  const end = reconcileDuration.startTimer({ kind: "PodWarmPool" });
  try {
    const o = await observePool(pool);
    if (o.templateHash && o.template) {
      const { name, spec } = o.template;
      poolTemplates.set(key, { hash: o.templateHash, name, envdPort: spec.envdPort });
    }
    const plan = decidePool(o);
    const writeStatus = (status: PodWarmPoolStatus) =>
      poolWrites.during(key, () =>
        writeStatusAt(paths.podWarmPools(namespace, name), pool.status ?? {}, status),
      );
    try {
      const createdPods = new Map<string, string>();
      for (const a of plan.actions) {
        // A claim in flight goes first: each write beside its three slows it (refill is not
        // urgent, the claim's box is; measured, claims during a refill met 2-4 of its writes).
        await claimClock.noneInFlight(CLAIM_YIELD_MAX_MS);
        await applyAction(namespace, name, a, createdPods);
      }
    } catch (e) {
      if (e instanceof NamespaceTerminatingError) return;
      // Said in the status (best effort), then retried with backoff by the queue.
      await writeStatus(failedPoolStatus(o, plan.status, describeError(e))).catch(() => undefined);
      throw e;
    }
    await writeStatus(plan.status);
  } finally {
    end();
  }
}

/** The queue of pool reconciles. */
export const poolQueue = new KeyedQueue(reconcilePool, {
  concurrency: 2,
  baseDelayMs: 500,
  maxDelayMs: 30_000,
  onError: reportRetry("PodWarmPool", "pool"),
});

/**
 * After claims (taken or found the pool empty) and standby events, the pool is replenished once
 * they have been quiet for a moment, and at the latest 2 s after the first: a burst of claims is
 * not slowed by standby creation competing for the API server, and the standbys made during a
 * burst do not go to its last boxes at random (the burst's split stays what the pool had). Under
 * a steady stream the quiet never comes, so a pool of N refills N per max delay: at 5 s, a pool
 * of 25 served 5 claims/s and started the rest cold (8 claims/s: 90 of 240 cold; at 2 s, none;
 * bench/results/experiments/2026-11-30-replenish-max-delay/).
 */
export const REPLENISH_DELAY_MS = Number(process.env.CUBEPOD_REPLENISH_DELAY_MS ?? 1000);
const REPLENISH_MAX_DELAY_MS = Number(process.env.CUBEPOD_REPLENISH_MAX_DELAY_MS ?? 2000);

/** Asks for the pool's reconcile once claims and standby events for it have gone quiet. */
export function replenishSoon(poolKey: string): void {
  poolQueue.addWhenQuiet(poolKey, REPLENISH_DELAY_MS, REPLENISH_MAX_DELAY_MS);
}
