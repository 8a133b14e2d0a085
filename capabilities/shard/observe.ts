import { a, K8s, Log, RegisterKind } from "pepr";
import { WatchEvent } from "kubernetes-fluent-client";
import { GROUP } from "../api/common";
import type { ObservedLease } from "./decide";

/** The label of CubePod's Leases: `shard` or `member`. */
export const LABEL_LEASE = `${GROUP}/lease`;

/** The fluent client's class of coordination.k8s.io Leases, for the watch. */
export class Lease extends a.GenericKind {
  declare spec?: {
    holderIdentity?: string;
    leaseDurationSeconds?: number;
    acquireTime?: string;
    renewTime?: string;
  };
}
RegisterKind(Lease, {
  group: "coordination.k8s.io",
  version: "v1",
  kind: "Lease",
  plural: "leases",
});

export const leasesPath = (namespace: string, name?: string) =>
  `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases${name ? `/${name}` : ""}`;

export const shardLeaseName = (shard: string) => `cubepod-shard-${shard}`;
export const memberLeaseName = (identity: string) => `cubepod-member-${identity}`;

type Seen = { kind: string; lease: ObservedLease };

/**
 * Follows CubePod's Leases with a watch and stamps each version with when this replica first saw
 * it: expiry is measured on this replica's clock from that moment, never from another replica's
 * `renewTime`, so clocks that disagree cannot make a live holder look dead, and a renewal is seen
 * as it happens rather than at the next read.
 */
export class LeaseObserver {
  readonly #seen = new Map<string, Seen>();
  #synced = false;

  constructor(
    private readonly namespace: string,
    private readonly clock: () => number,
    /** Called when a shard's Lease is released or goes: it may be taken now. */
    private readonly onFreed: () => void,
  ) {}

  /** Starts the watch (a list, then its changes). */
  start(): void {
    const watcher = K8s(Lease, { namespace: this.namespace, labels: { [LABEL_LEASE]: "" } }).Watch(
      (lease, phase) => this.#see(lease, phase === "DELETED"),
    );
    watcher.events.on(WatchEvent.LIST, () => (this.#synced = true));
    watcher.start().catch(e => Log.error({ error: String(e) }, "shard lease watch failed"));
  }

  /** Whether the watch has listed the Leases once. */
  get synced(): boolean {
    return this.#synced;
  }

  #see(l: Lease, deleted: boolean): void {
    const name = l.metadata?.name ?? "";
    const kind = (l.metadata?.labels ?? {})[LABEL_LEASE] ?? "";
    if (deleted) {
      this.#seen.delete(name);
      if (kind === "shard") this.onFreed();
      return;
    }
    const resourceVersion = l.metadata?.resourceVersion ?? "";
    const holder = l.spec?.holderIdentity ?? "";
    this.#record(name, kind, resourceVersion, holder, (l.spec?.leaseDurationSeconds ?? 0) * 1000);
    if (kind === "shard" && holder === "") this.onFreed();
  }

  #record(name: string, kind: string, resourceVersion: string, holder: string, durationMs: number) {
    const now = this.clock();
    const before = this.#seen.get(name)?.lease;
    // A version already seen (this replica's own write, echoed by the watch) keeps its moment, and
    // an older one (an event behind the answer to this replica's write) changes nothing. Versions
    // are etcd revisions, which only grow.
    if (before && Number(before.resourceVersion) >= Number(resourceVersion)) return;
    this.#seen.set(name, {
      kind,
      lease: {
        name,
        holder,
        resourceVersion,
        seenAt: now,
        firstSeenAt: before?.firstSeenAt ?? now,
        durationMs,
      },
    });
  }

  /** The Leases as last seen. */
  observe(): { shards: Map<string, ObservedLease>; members: ObservedLease[] } {
    const shards = new Map<string, ObservedLease>();
    const members: ObservedLease[] = [];
    for (const { kind, lease } of this.#seen.values()) {
      if (kind === "member") members.push(lease);
      else if (kind === "shard") shards.set(lease.name, lease);
    }
    return { shards, members };
  }

  /** Records a Lease this replica wrote, as the API server answered it. */
  wrote(lease: Lease): void {
    const kind = (lease.metadata?.labels ?? {})[LABEL_LEASE] ?? "";
    this.#record(
      lease.metadata!.name!,
      kind,
      lease.metadata!.resourceVersion!,
      lease.spec?.holderIdentity ?? "",
      (lease.spec?.leaseDurationSeconds ?? 0) * 1000,
    );
  }

  /**
   * When the next Lease held by another replica expires unless renewed (ms), if any does after
   * `now`: one that already has is acted on by the round that sees it, or left to the replica the
   * assignment gives it to.
   */
  nextExpiry(me: string, now: number): number | undefined {
    let next: number | undefined;
    for (const { lease } of this.#seen.values()) {
      if (!lease.holder || lease.holder === me) continue;
      const at = lease.seenAt + lease.durationMs;
      if (at > now && (next === undefined || at < next)) next = at;
    }
    return next;
  }
}
