import { egressAnnotations } from "../manifests/pod";
import { ANNOTATION_EGRESS } from "../network/egress-agent";
import type { a } from "pepr";
import type { PodWarmPool } from "../api/kinds";
import type { PodWarmPoolStatus } from "../api/podwarmpool";
import { paths } from "../client/paths";
import type { ClaimActivity } from "../claim/claim-activity";
import type { PoolTemplate } from "../claim/decide";
import type { QuietWindow } from "../config";
import { describeError, NamespaceTerminatingError } from "../kit/api-errors";
import { applyAction, ActionContext } from "../kit/object-actions";
import { objectKey } from "../kit/object-key";
import { writeStatusAt } from "../kit/status-patch";
import type { WorkQueue, WorkResult } from "../kit/work-queue";
import { WriteEchoes } from "../kit/write-echoes";
import { LABEL_POOL } from "../manifests/labels";
import { reconcileDuration } from "../metrics/registry";
import { decidePool, failedPoolStatus, type PoolObservation } from "./decide";
import { observePool } from "./observe";
import { demandTarget, HeldTarget, PoolDemand } from "./demand";
import type { SeedIndex } from "../seed/seed-index";

/** The longest a pool's write waits for claims in flight to end. */
const CLAIM_YIELD_MAX_MS = 1000;

export type PoolReconcilerDeps = ActionContext & {
  queue: WorkQueue;
  clock: () => Date;
  claims: ClaimActivity;
  /** Replenishment waits for this much quiet after claims and standby events. */
  replenish: QuietWindow;
  /** The templates' filled seeds, which new standbys' rootfs volumes are cloned from. */
  seeds?: SeedIndex;
};

/**
 * Reconciles PodWarmPools: each run reads the pool, its template and its standbys, decides, and
 * applies the actions, yielding to warm claims in flight. It also keeps, for claims, the current
 * template of each pool.
 */
export class PoolReconciler {
  /** Pool versions this reconciler wrote (its status): their watch events need no reconcile. */
  readonly #writes = new WriteEchoes();
  /** The current template of each pool and its hash: claims prefer standbys that are not stale. */
  readonly #templates = new Map<string, PoolTemplate & { hash: string }>();
  /** What boxes asked each pool for, and each autoscaling pool's target. */
  readonly #demand = new PoolDemand();
  readonly #targets = new Map<string, HeldTarget>();

  constructor(private readonly deps: PoolReconcilerDeps) {}

  /** The template a pool's last reconcile saw, if any. */
  templateOf(poolKey: string): (PoolTemplate & { hash: string }) | undefined {
    return this.#templates.get(poolKey);
  }

  /** A watch event of the pool, unless it is the echo of its status write. */
  onPoolEvent(pool: PodWarmPool): void {
    const key = objectKey(pool.metadata!.namespace!, pool.metadata!.name!);
    this.#writes.unlessEcho(key, pool.metadata?.resourceVersion, () => this.deps.queue.add(key));
  }

  /** A watch event of a standby Pod: its pool replenishes soon. */
  onStandbyEvent(pod: a.Pod): void {
    const pool = pod.metadata?.labels?.[LABEL_POOL];
    if (pool) this.replenishSoon(objectKey(pod.metadata!.namespace!, pool));
  }

  /**
   * A box asked the pool for a standby: an autoscaling pool follows such asks. Only those are
   * kept (a pool's reconcile has set its target), as only their count prunes them.
   */
  asked(poolKey: string): void {
    if (this.#targets.has(poolKey)) this.#demand.record(poolKey, this.deps.clock().getTime());
  }

  /** Asks for a reconcile now (its template changed). */
  reconcileSoon(poolKey: string): void {
    this.deps.queue.add(poolKey);
  }

  /**
   * Asks for the pool's reconcile once claims and standby events for it have gone quiet, and at
   * the latest after the window's maximum: a burst of claims is not slowed by standby creation
   * competing for the API server, and the standbys made during a burst do not go to its last
   * boxes at random. Under a steady stream the quiet never comes, so a pool of N refills N per
   * maximum delay (see docs/decisions/0004-replenishment-window.md).
   */
  replenishSoon(poolKey: string): void {
    const { quietMs, maxDelayMs } = this.deps.replenish;
    this.deps.queue.addWhenQuiet(poolKey, quietMs, maxDelayMs);
  }

  /**
   * An autoscaling pool's target from the asks of its window ({@link demandTarget}), set on the
   * observation; when to look again while it is above the floor.
   */
  #followDemand(key: string, o: PoolObservation): number | undefined {
    const { autoscale, replicas } = o.pool.spec;
    if (!autoscale) {
      this.#targets.delete(key);
      return undefined;
    }
    const nowMs = this.deps.clock().getTime();
    const windowMs = autoscale.windowSeconds * 1000;
    const { held, recheckInMs } = demandTarget({
      floor: replicas,
      ceiling: autoscale.maxReplicas,
      asks: this.#demand.since(key, nowMs - windowMs),
      standbys: o.standbys.length,
      nowMs,
      windowMs,
      held: this.#targets.get(key),
    });
    this.#targets.set(key, held);
    o.desiredReplicas = held.target;
    return recheckInMs;
  }

  /** One reconcile of a pool: observe, decide, apply, write the status when it changed. */
  async reconcile(key: string): Promise<WorkResult> {
    const { client, claims } = this.deps;
    const [namespace, name] = key.split("/");
    const pool = await client.get<PodWarmPool>(paths.podWarmPools(namespace, name));
    if (!pool || pool.metadata?.deletionTimestamp) {
      this.#templates.delete(key);
      this.#writes.forget(key);
      this.#demand.forget(key);
      this.#targets.delete(key);
      return;
    }
    const end = reconcileDuration.startTimer({ kind: "PodWarmPool" });
    try {
      const o = await observePool(client, pool, this.deps.clock(), this.deps.seeds);
      if (o.templateHash && o.template) {
        const { name, spec } = o.template;
        const egress = egressAnnotations(undefined, spec)?.[ANNOTATION_EGRESS];
        this.#templates.set(key, {
          hash: o.templateHash,
          name,
          envdPort: spec.envdPort,
          ...(egress !== undefined ? { egress } : {}),
        });
      }
      const recheckInMs = this.#followDemand(key, o);
      const plan = decidePool(o);
      const writeStatus = (status: PodWarmPoolStatus) =>
        this.#writes.during(key, () =>
          writeStatusAt(client, paths.podWarmPools(namespace, name), pool.status ?? {}, status),
        );
      try {
        const createdPods = new Map<string, string>();
        for (const a of plan.actions) {
          // A claim in flight goes first: refill is not urgent, the claim's box is.
          await claims.noneInFlight(CLAIM_YIELD_MAX_MS);
          await applyAction(this.deps, namespace, name, a, createdPods);
        }
      } catch (e) {
        if (e instanceof NamespaceTerminatingError) return;
        // Said in the status (best effort), then retried with backoff by the queue.
        await writeStatus(failedPoolStatus(o, plan.status, describeError(e))).catch(
          () => undefined,
        );
        throw e;
      }
      await writeStatus(plan.status);
      const after = Math.min(plan.requeueAfterMs ?? Infinity, recheckInMs ?? Infinity);
      return after !== Infinity ? { requeueAfterMs: after } : undefined;
    } finally {
      end();
    }
  }
}
