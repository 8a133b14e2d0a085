import { randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { a, K8s, Log } from "pepr";
import { WatchEvent, type GenericClass, type KubernetesObject } from "kubernetes-fluent-client";
import { CubePodTemplate, PodBox, PodWarmPool } from "../api/kinds";
import { ApiClient, USER_AGENT } from "../client/api-client";
import { defaultCredentials } from "../client/kubeconfig";
import { paths } from "../client/paths";
import type { Config } from "../config";
import { describeError, statusOf } from "../kit/api-errors";
import { WorkQueue } from "../kit/work-queue";
import { keepMetadata, slim } from "../kit/watched";
import { LABEL_SHARD } from "../manifests/labels";
import { shardHeld, shardNamespaces } from "../metrics/registry";
import { startMetricsServer } from "../metrics/server";
import { fillGauges, Operator } from "../operator";
import { MODULE_WATCHES, type ModuleWatch } from "../watches";
import { PID_FILE } from "./pid-file";
import { ShardLeases } from "./reconciler";
import { ShardClient } from "./shard-client";
import { namespaceShard, outsideShards, shardName } from "./shard-of";

/** The fluent client's watch settings, as Pepr gives its own watches. */
const WATCH_CFG = {
  resyncFailureMax: 5,
  resyncDelaySec: 5,
  lastSeenLimitSeconds: 300,
  relistIntervalSec: 600,
};

/** How long a stopping replica spends giving its shards up (the chart's grace period is 5 s). */
const STOP_MS = 3000;

/** This process's name among the replicas: its host (the Pod's name) and a nonce per start. */
export function replicaIdentity(host = hostname()): string {
  const base = host
    .toLowerCase()
    .replace(/[^a-z0-9-]/g, "-")
    .slice(0, 40)
    .replace(/-+$/, "");
  return `${base || "replica"}-${randomBytes(3).toString("hex")}`;
}

/** The watches of one shard: the module's watches, and its boxes and pools for the reconcilers. */
function shardWatches(): ModuleWatch[] {
  const cubepodKinds: ModuleWatch[] = [
    // Boxes are reconciled on every change; their deletion comes as a change (a finalizer holds it).
    {
      model: PodBox,
      handle: (op, box, deleted) => {
        if (!deleted) op.boxes.onBoxEvent(slim(box as PodBox));
      },
    },
    // The reaper's own copy of each box keeps only its metadata.
    {
      model: PodBox,
      handle: (op, box, deleted) => {
        op.reaper.onBoxEvent(box as PodBox, deleted);
        keepMetadata(box);
      },
    },
    {
      model: PodWarmPool,
      handle: (op, pool, deleted) => {
        if (!deleted) op.onPoolEvent(slim(pool as PodWarmPool));
      },
    },
  ];
  return [...cubepodKinds, ...MODULE_WATCHES];
}

const labelsOf = (w: { label?: [string, string?] }, extra: Record<string, string>) => ({
  ...(w.label ? { [w.label[0]]: w.label[1] ?? "" } : {}),
  ...extra,
});

/** One shard served by this replica: its operator, its client and its watches. */
class ShardInstance {
  active = true;
  readonly client: ShardClient;
  readonly op: Operator;
  readonly #watchers: { close(): void }[] = [];
  /** Watches that gave up reconnecting: only a restart brings them back. */
  readonly #failed = new Set<number>();
  /** Namespace → the CubePod objects seen in it, for /metrics. */
  readonly namespaces = new Map<string, Set<string>>();

  constructor(
    readonly shard: number,
    config: Config,
    userAgent: string,
    valid: () => boolean,
  ) {
    this.client = new ShardClient(
      config.apiTimeoutMs,
      defaultCredentials,
      userAgent,
      config.shards.count,
      () => this.active && valid(),
    );
    this.op = new Operator(config, this.client, undefined, () => this.active);
    void this.op.boxes.start();
    const selector = { [LABEL_SHARD]: shardName(shard, config.shards.count) };
    shardWatches().forEach((w, i) => {
      const watcher = K8s(w.model, { labels: labelsOf(w, selector) }).Watch((obj, phase) => {
        if (!this.active) return;
        const deleted = phase === "DELETED";
        this.#track(w.model, obj, deleted);
        w.handle(this.op, obj, deleted);
      }, WATCH_CFG);
      watcher.events.on(WatchEvent.CONNECT, () => this.#failed.delete(i));
      watcher.events.on(WatchEvent.GIVE_UP, () => this.#failed.add(i));
      watcher.start().catch(e => Log.error({ error: String(e) }, "shard watch failed to start"));
      this.#watchers.push(watcher);
    });
  }

  /**
   * Whether no watch of the shard gave up. A watch still listing a shard just taken is not a
   * failure: under load that list can take longer than a liveness probe waits, and a restart
   * would only move the shard and start the list again elsewhere.
   */
  watching(): boolean {
    return this.#failed.size === 0;
  }

  #track(model: GenericClass, obj: KubernetesObject, deleted: boolean): void {
    if (model !== PodBox && model !== PodWarmPool && model !== CubePodTemplate) return;
    const { namespace, name } = obj.metadata ?? {};
    if (!namespace) return;
    const key = `${model.name}/${name}`;
    const seen = this.namespaces.get(namespace) ?? new Set<string>();
    if (deleted) seen.delete(key);
    else seen.add(key);
    if (seen.size === 0) this.namespaces.delete(namespace);
    else this.namespaces.set(namespace, seen);
  }

  /**
   * Stops acting: no new write, no new event. Resolves true once the writes in flight are done,
   * false if some still were after `waitMs`.
   */
  async stop(waitMs: number): Promise<boolean> {
    this.active = false;
    for (const w of this.#watchers) w.close();
    let timer: NodeJS.Timeout | undefined;
    const settled = await Promise.race([
      this.client.settled().then(() => true),
      new Promise<boolean>(resolve => (timer = setTimeout(() => resolve(false), waitMs))),
    ]);
    clearTimeout(timer);
    return settled;
  }
}

/** The object paths of the kinds whose unstamped objects the holder of shard 0 stamps. */
const OBJECT_PATHS = new Map<GenericClass, (namespace: string, name: string) => string>([
  [PodBox, paths.podBoxes],
  [PodWarmPool, paths.podWarmPools],
  [CubePodTemplate, paths.podTemplates],
  [a.Pod, paths.pods],
  [a.PersistentVolumeClaim, paths.pvcs],
  [a.NetworkPolicy, paths.networkPolicies],
]);

/**
 * The watcher of a replica among several (`CUBEPOD_SHARDS` > 1): it holds shard Leases
 * ({@link ShardLeases}) and runs, for each shard it holds, an operator of its own with watches
 * that select the shard's label, so that the API server sends it only its share. Losing a shard
 * drops its operator whole, so nothing it knew outlives the moment another replica may act there.
 * The holder of shard 0 also stamps the shard label on objects outside every shard: created
 * without it, or before the count changed.
 */
export class ShardedWatcher {
  readonly identity = replicaIdentity();
  readonly #userAgent = `${USER_AGENT}/${this.identity}`;
  readonly #instances = new Map<number, ShardInstance>();
  readonly #client: ApiClient;
  readonly leases: ShardLeases;
  #sharder: { close(): void }[] = [];

  constructor(private readonly config: Config) {
    // A Lease request that hangs must not hold the rounds past the renewal deadline.
    const leaseTimeoutMs = Math.min(config.apiTimeoutMs, (config.shards.leaseSeconds * 1000) / 3);
    this.#client = new ApiClient(leaseTimeoutMs, defaultCredentials, this.#userAgent);
    this.leases = new ShardLeases({
      client: this.#client,
      config: config.shards,
      me: this.identity,
      handlers: { gained: s => this.#gained(s), lost: (s, waitMs) => this.#lost(s, waitMs) },
    });
  }

  start(): void {
    const { config } = this;
    Log.info({ replica: this.identity, shards: config.shards.count }, "sharded watcher starting");
    this.leases.start();
    setInterval(() => {
      for (const inst of this.#instances.values()) void inst.op.reaper.pass();
    }, config.reaperIntervalSeconds * 1000);
    startMetricsServer(
      async () => this.health(),
      () => this.#fillGauges(),
      config.metricsPort,
      config.metricsHost,
    );
    // A replica stopping gives its shards up first, so the next holder need not wait them out.
    // Pepr's own handler would exit as soon as its server closed. In a Pod the module is a child
    // of Pepr's controller, which ignores SIGTERM as PID 1: the chart's preStop hook sends it
    // here, to the process this file names.
    try {
      writeFileSync(PID_FILE, String(process.pid));
    } catch (e) {
      Log.warn(
        { error: String(e) },
        `cannot write ${PID_FILE}: a stopping replica's shards expire`,
      );
    }
    process.removeAllListeners("SIGTERM");
    process.once("SIGTERM", () => {
      let timer: NodeJS.Timeout | undefined;
      void Promise.race([
        this.leases.stop(),
        new Promise(resolve => (timer = setTimeout(resolve, STOP_MS))),
      ]).finally(() => {
        clearTimeout(timer);
        process.exit(143);
      });
    });
  }

  health(): { ok: boolean; detail: string } {
    const leases = this.leases.health();
    if (!leases.ok) return leases;
    const down = [...this.#instances.values()].filter(i => !i.watching()).map(i => i.shard);
    if (down.length > 0) return { ok: false, detail: `watches of shards [${down}] gave up` };
    return leases;
  }

  #gained(shard: number): void {
    const inst = new ShardInstance(shard, this.config, this.#userAgent, () =>
      this.leases.valid(shard),
    );
    this.#instances.set(shard, inst);
    if (shard === 0) this.#startSharder();
  }

  async #lost(shard: number, waitMs: number): Promise<boolean> {
    const inst = this.#instances.get(shard);
    if (!inst) return true;
    this.#instances.delete(shard);
    if (shard === 0) this.#stopSharder();
    return inst.stop(waitMs);
  }

  /**
   * Watches what is outside every shard, and stamps each such object with its shard label,
   * retried with backoff (the webhook that sees the change may not be up yet).
   */
  #startSharder(): void {
    const count = this.config.shards.count;
    const outside = { [outsideShards(count)]: "" };
    const stamps = new WorkQueue(
      async path => {
        if (!this.leases.valid(0)) return;
        const namespace = /\/namespaces\/([^/]+)\//.exec(path)![1];
        const labels = { [LABEL_SHARD]: namespaceShard(namespace, count) };
        await this.#client.mergePatch(path, { metadata: { labels } }).catch(e => {
          if (statusOf(e) !== 404) throw e;
        });
      },
      {
        concurrency: 2,
        baseDelayMs: 500,
        maxDelayMs: 30_000,
        onError: (path, e) => Log.warn({ path, error: describeError(e) }, "shard stamp failed"),
      },
    );
    const seen = new Set<string>();
    for (const w of shardWatches()) {
      const id = `${w.model.name}:${w.label?.join("=") ?? ""}`;
      if (seen.has(id)) continue;
      seen.add(id);
      const path = OBJECT_PATHS.get(w.model)!;
      const watcher = K8s(w.model, { labels: labelsOf(w, outside) }).Watch((obj, phase) => {
        const { namespace, name } = obj.metadata ?? {};
        if (phase !== "DELETED" && namespace && name) stamps.add(path(namespace, name));
      }, WATCH_CFG);
      watcher.start().catch(e => Log.error({ error: String(e) }, "sharder watch failed to start"));
      this.#sharder.push(watcher);
    }
  }

  #stopSharder(): void {
    for (const w of this.#sharder.splice(0)) w.close();
  }

  #fillGauges(): void {
    const instances = [...this.#instances.values()];
    fillGauges(instances.map(i => i.op));
    shardHeld.reset();
    shardNamespaces.reset();
    const count = this.config.shards.count;
    for (const inst of instances) {
      const shard = shardName(inst.shard, count);
      shardHeld.set({ shard, replica: this.identity }, 1);
      for (const namespace of inst.namespaces.keys()) shardNamespaces.set({ shard, namespace }, 1);
    }
  }
}
