import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { a, K8s, Log } from "pepr";
import { WatchEvent, type GenericClass, type KubernetesObject } from "kubernetes-fluent-client";
import { CubePodTemplate, PodBox, PodWarmPool } from "../api/kinds";
import { ApiClient, USER_AGENT } from "../client/api-client";
import { defaultCredentials } from "../client/kubeconfig";
import { paths } from "../client/paths";
import type { Config } from "../config";
import { describeError } from "../kit/api-errors";
import { keepMetadata, slim } from "../kit/watched";
import { LABEL_SHARD } from "../manifests/labels";
import { shardHeld, shardNamespaces } from "../metrics/registry";
import { startMetricsServer } from "../metrics/server";
import { fillGauges, Operator } from "../operator";
import { MODULE_WATCHES, type ModuleWatch } from "../watches";
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
  readonly #connected = new Set<number>();
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
    const selector = { [LABEL_SHARD]: shardName(shard, config.shards.count) };
    shardWatches().forEach((w, i) => {
      const watcher = K8s(w.model, { labels: labelsOf(w, selector) }).Watch((obj, phase) => {
        if (!this.active) return;
        const deleted = phase === "DELETED";
        this.#track(w.model, obj, deleted);
        w.handle(this.op, obj, deleted);
      }, WATCH_CFG);
      watcher.events.on(WatchEvent.CONNECT, () => this.#connected.add(i));
      watcher.events.on(WatchEvent.RECONNECT, () => this.#connected.delete(i));
      watcher.events.on(WatchEvent.GIVE_UP, () => this.#connected.delete(i));
      watcher.start().catch(e => Log.error({ error: String(e) }, "shard watch failed to start"));
      this.#watchers.push(watcher);
    });
  }

  /** Whether every watch of the shard is connected. */
  connected(): boolean {
    return this.#connected.size === this.#watchers.length;
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

  /** Stops acting: no new write, no new event; resolves once the writes in flight are done. */
  async stop(timeoutMs: number): Promise<void> {
    this.active = false;
    for (const w of this.#watchers) w.close();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      this.client.settled(),
      new Promise(resolve => (timer = setTimeout(resolve, timeoutMs))),
    ]);
    clearTimeout(timer);
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
    this.#client = new ApiClient(config.apiTimeoutMs, defaultCredentials, this.#userAgent);
    this.leases = new ShardLeases({
      client: this.#client,
      config: config.shards,
      me: this.identity,
      handlers: { gained: s => this.#gained(s), lost: s => this.#lost(s) },
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
    process.once("SIGTERM", () => void this.leases.stop());
  }

  health(): { ok: boolean; detail: string } {
    const leases = this.leases.health();
    if (!leases.ok) return leases;
    const down = [...this.#instances.values()].filter(i => !i.connected()).map(i => i.shard);
    if (down.length > 0) return { ok: false, detail: `watches of shards [${down}] not connected` };
    return leases;
  }

  #gained(shard: number): void {
    const inst = new ShardInstance(shard, this.config, this.#userAgent, () =>
      this.leases.valid(shard),
    );
    this.#instances.set(shard, inst);
    if (shard === 0) this.#startSharder();
  }

  async #lost(shard: number): Promise<void> {
    const inst = this.#instances.get(shard);
    if (!inst) return;
    this.#instances.delete(shard);
    if (shard === 0) this.#stopSharder();
    await inst.stop(this.config.apiTimeoutMs);
  }

  /** Watches what is outside every shard, and stamps each such object with its shard label. */
  #startSharder(): void {
    const count = this.config.shards.count;
    const outside = { [outsideShards(count)]: "" };
    const seen = new Set<string>();
    for (const w of shardWatches()) {
      const id = `${w.model.name}:${w.label?.join("=") ?? ""}`;
      if (seen.has(id)) continue;
      seen.add(id);
      const path = OBJECT_PATHS.get(w.model)!;
      const watcher = K8s(w.model, { labels: labelsOf(w, outside) }).Watch((obj, phase) => {
        const { namespace, name } = obj.metadata ?? {};
        if (phase === "DELETED" || !namespace || !name || !this.leases.valid(0)) return;
        const labels = { [LABEL_SHARD]: namespaceShard(namespace, count) };
        this.#client
          .mergePatch(path(namespace, name), { metadata: { labels } })
          .catch(e => Log.warn({ namespace, name, error: describeError(e) }, "shard stamp failed"));
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
