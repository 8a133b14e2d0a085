import { a, K8s, Log } from "pepr";
import { WatchEvent } from "kubernetes-fluent-client";
import type { CubePodTemplate, PodWarmPool } from "./api/kinds";
import { PodBox } from "./api/kinds";
import { BoxEventRecorder } from "./box/apply";
import { BoxReconciler } from "./box/reconciler";
import { ClaimActivity } from "./claim/claim-activity";
import { WarmClaims } from "./claim/warm-claims";
import { ApiClient } from "./client/api-client";
import { defaultCredentials } from "./client/kubeconfig";
import { paths } from "./client/paths";
import type { Config } from "./config";
import { Failpoints } from "./kit/failpoint";
import { objectKey } from "./kit/object-key";
import { keepMetadata } from "./kit/watched";
import { boxOfPod } from "./manifests/owner";
import { reportRetry } from "./kit/retry-report";
import { WorkQueue } from "./kit/work-queue";
import {
  activeSandboxes,
  pausedSandboxes,
  warmPoolReady,
  workqueueDepth,
} from "./metrics/registry";
import { startMetricsServer } from "./metrics/server";
import { NetworkReconciler } from "./network/reconciler";
import { PoolReconciler } from "./pool/reconciler";
import { Reaper } from "./reaper/reaper";
import { SeedReconciler } from "./seed/reconciler";

/** How long /healthz waits for the API server's answer. */
const HEALTH_TIMEOUT_MS = 2000;

/**
 * The controller side of the module, built once from the configuration: the reconcilers with
 * their client, queues and clock, the warm claims' state and the reaper. Nothing runs until
 * {@link start} (the watcher's own watch and the metrics server) or a watch handler is called.
 */
export class Operator {
  readonly client: ApiClient;
  readonly claims: WarmClaims;
  readonly boxes: BoxReconciler;
  readonly pools: PoolReconciler;
  readonly reaper: Reaper;
  readonly network: NetworkReconciler;
  readonly seeds: SeedReconciler;
  readonly #failpoints: Failpoints;
  readonly #queues: Record<"PodBox" | "PodWarmPool" | "PodTemplate", WorkQueue>;
  readonly #watch = { connected: false, detail: "not started" };

  /**
   * @param active whether this operator still serves its objects: a shard's operator stops when
   *   its replica loses the shard, and its queued and delayed keys then run to nothing.
   */
  constructor(
    readonly config: Config,
    client = new ApiClient(config.apiTimeoutMs, defaultCredentials),
    clock: () => Date = () => new Date(),
    active: () => boolean = () => true,
  ) {
    this.client = client;
    const serving =
      <T>(worker: (key: string) => Promise<T>) =>
      async (key: string): Promise<T | undefined> =>
        active() ? worker(key) : undefined;
    this.#failpoints = new Failpoints(config.failpoint);
    const failpoints = this.#failpoints;
    const activity = new ClaimActivity();
    const seedQueue = new WorkQueue(
      serving(key => this.seeds.reconcile(key)),
      {
        concurrency: 1,
        baseDelayMs: 500,
        maxDelayMs: 60_000,
        onError: reportRetry("PodTemplate", "seed"),
      },
    );
    this.seeds = new SeedReconciler({ client, failpoints, queue: seedQueue });
    const poolQueue = new WorkQueue(
      serving(key => this.pools.reconcile(key)),
      {
        concurrency: 2,
        baseDelayMs: 500,
        maxDelayMs: 30_000,
        onError: reportRetry("PodWarmPool", "pool"),
      },
    );
    const boxQueue = new WorkQueue(
      serving(key => this.boxes.reconcile(key)),
      {
        concurrency: config.reconcileConcurrency,
        urgentConcurrency: config.claimConcurrency,
        baseDelayMs: 200,
        maxDelayMs: 30_000,
        onError: reportRetry("PodBox", "box"),
      },
    );
    this.pools = new PoolReconciler({
      client,
      failpoints,
      queue: poolQueue,
      clock,
      claims: activity,
      replenish: config.replenish,
      seeds: this.seeds.index,
    });
    this.claims = new WarmClaims(activity, config.claimFinish, key => boxQueue.add(key));
    this.boxes = new BoxReconciler({
      client,
      failpoints,
      queue: boxQueue,
      clock,
      claims: this.claims,
      pools: this.pools,
      events: new BoxEventRecorder(client, config, activity),
      seeds: this.seeds.index,
      defaultTemplates: config.defaultTemplatesNamespace,
      egressAgent: config.network.egressAgent !== undefined,
    });
    this.reaper = new Reaper(key => this.boxes.reconcileSoon(key));
    const networkQueue = new WorkQueue(
      serving(key => this.network.reconcile(key)),
      {
        concurrency: 2,
        baseDelayMs: 500,
        maxDelayMs: 60_000,
        onError: reportRetry("PodTemplate", "network"),
      },
    );
    this.network = new NetworkReconciler({
      client,
      queue: networkQueue,
      clock,
      network: config.network,
    });
    this.#queues = { PodBox: boxQueue, PodWarmPool: poolQueue, PodTemplate: networkQueue };
  }

  /** A PodTemplate appeared, changed or went: its boxes look again, its pools replace stale standbys. */
  async onTemplateEvent(tpl: CubePodTemplate): Promise<void> {
    // The echo of the template's own status write changes nothing a box or pool reads.
    if (this.network.isEcho(tpl)) return;
    const namespace = tpl.metadata!.namespace!;
    const name = tpl.metadata!.name;
    this.network.reconcileSoon(namespace, name!);
    this.seeds.onTemplateEvent(namespace, name!, tpl.spec);
    this.boxes.wake("PodTemplate", namespace, name!);
    const [boxes, pools] = await Promise.all([
      this.client.list<PodBox>(paths.podBoxes(namespace)),
      this.client.list<PodWarmPool>(paths.podWarmPools(namespace)),
    ]);
    for (const box of boxes) {
      if (box.spec?.templateRef === name) {
        this.boxes.reconcileSoon(objectKey(namespace, box.metadata!.name!));
      }
    }
    for (const pool of pools) {
      if (pool.spec?.templateRef === name) {
        this.pools.reconcileSoon(objectKey(namespace, pool.metadata!.name!));
      }
    }
  }

  /** A PodWarmPool appeared or changed: it reconciles, and the boxes waiting for it look again. */
  onPoolEvent(pool: PodWarmPool): void {
    this.boxes.wake("PodWarmPool", pool.metadata!.namespace!, pool.metadata!.name!);
    this.pools.onPoolEvent(pool);
  }

  /** A CubePod PVC appeared, changed or went: the boxes waiting for it look again. */
  onVolumeEvent(pvc: a.PersistentVolumeClaim): void {
    this.boxes.wake("PersistentVolumeClaim", pvc.metadata!.namespace!, pvc.metadata!.name!);
  }

  /** A standby Pod changed, went, or was claimed (it left the pool's label selection). */
  onStandbyEvent(pod: a.Pod, deleted: boolean): void {
    if (!this.#failpoints.standbyWatchLags) this.claims.standbys.observe(pod, deleted);
    this.pools.onStandbyEvent(pod);
    // A claimed standby keeps its pool's labels until the claim's finish: its box hears of it
    // here. Its relabelling ends the pool label's watch with a DELETED event of the Pod as it
    // was, at the relabel's version: an echo, unless the Pod is really going.
    if (boxOfPod(pod.metadata ?? {}) !== undefined) {
      this.boxes.onPodEvent(pod, deleted && Boolean(pod.metadata?.deletionTimestamp));
    }
  }

  /**
   * Starts the module's own PodBox watch, which feeds the reaper and tells /healthz whether
   * watching works, and the metrics server. Called once, in the process that runs watches.
   */
  start(): void {
    void this.boxes.start();
    const watcher = K8s(PodBox).Watch((box, phase) => {
      this.reaper.onBoxEvent(box, phase === "DELETED");
      keepMetadata(box);
    });
    const set = (connected: boolean, detail: string) =>
      Object.assign(this.#watch, { connected, detail });
    watcher.events.on(WatchEvent.CONNECT, () => set(true, "watching PodBoxes"));
    watcher.events.on(WatchEvent.NETWORK_ERROR, (e: Error) =>
      set(false, `watch network error: ${e.message}`),
    );
    watcher.events.on(WatchEvent.RECONNECT, () => set(false, "watch reconnecting"));
    watcher.events.on(WatchEvent.GIVE_UP, (e: Error) => set(false, `watch gave up: ${e.message}`));
    watcher.events.on(WatchEvent.ABORT, (e: Error) => set(false, `watch aborted: ${e.message}`));
    watcher.start().catch(e => set(false, `watch failed to start: ${String(e)}`));

    const { metricsPort, metricsHost } = this.config;
    startMetricsServer(
      () => this.health(),
      () => fillGauges([this]),
      metricsPort,
      metricsHost,
    );
    Log.info({ metrics: `${metricsHost}:${metricsPort}` }, "CubePod operator started");
  }

  /**
   * /healthz: the watch reported no failure since it connected, and the API server answers
   * `/readyz` now. The second check is needed because a watch whose server went away can stay
   * silent until the client's last-seen limit.
   */
  async health(): Promise<{ ok: boolean; detail: string }> {
    if (!this.#watch.connected) return { ok: false, detail: this.#watch.detail };
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        this.client.ready(),
        new Promise((_, reject) => {
          timer = setTimeout(() => reject(new Error("no answer in time")), HEALTH_TIMEOUT_MS);
        }),
      ]);
      return { ok: true, detail: this.#watch.detail };
    } catch (e) {
      return { ok: false, detail: `API server unreachable: ${(e as Error).message ?? e}` };
    } finally {
      clearTimeout(timer);
    }
  }

  /** The keys in each of its queues, by state. */
  queueStats(): [string, Record<string, number>][] {
    return Object.entries(this.#queues).map(([queue, q]) => [queue, q.stats()]);
  }
}

/**
 * Fills the gauges read from caches at scrape time, summed over the operators of this replica
 * (one, or one per shard it holds).
 */
export function fillGauges(operators: Operator[]): void {
  const phases: Record<string, number> = {};
  const depth = new Map<string, Map<string, number>>();
  warmPoolReady.reset();
  for (const op of operators) {
    for (const [phase, n] of Object.entries(op.reaper.boxes.phases())) {
      phases[phase] = (phases[phase] ?? 0) + (n ?? 0);
    }
    for (const c of op.claims.standbys.counts()) {
      warmPoolReady.set({ namespace: c.namespace, pool: c.pool }, c.ready);
    }
    for (const [queue, stats] of op.queueStats()) {
      const d = depth.get(queue) ?? new Map<string, number>();
      for (const [state, n] of Object.entries(stats)) d.set(state, (d.get(state) ?? 0) + n);
      depth.set(queue, d);
    }
  }
  activeSandboxes.set(phases.Running ?? 0);
  pausedSandboxes.set(phases.Paused ?? 0);
  workqueueDepth.reset();
  for (const [queue, d] of depth)
    for (const [state, n] of d) workqueueDepth.set({ queue, state }, n);
}

/** True in the process that runs watches and schedules (Pepr's watcher, or `pepr dev`). */
export const isWatcher = (env: Record<string, string | undefined> = process.env) =>
  env.PEPR_WATCH_MODE === "true" || env.PEPR_MODE === "dev";
