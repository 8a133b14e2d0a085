import type { ApiClient } from "../client/api-client";
import { GROUP } from "../api/common";
import type { ObservedLease } from "./decide";

/** The label of CubePod's Leases: `shard` or `member`. */
export const LABEL_LEASE = `${GROUP}/lease`;

export type Lease = {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string; namespace?: string; resourceVersion?: string; labels?: object };
  spec?: {
    holderIdentity?: string;
    leaseDurationSeconds?: number;
    acquireTime?: string;
    renewTime?: string;
    leaseTransitions?: number;
  };
};

export const leasesPath = (namespace: string, name?: string) =>
  `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases${name ? `/${name}` : ""}`;

export const shardLeaseName = (shard: string) => `cubepod-shard-${shard}`;
export const memberLeaseName = (identity: string) => `cubepod-member-${identity}`;

/**
 * Reads CubePod's Leases and stamps each version with when this replica first saw it: expiry is
 * measured on this replica's clock from that moment, never from another replica's `renewTime`,
 * so clocks that disagree cannot make a live holder look dead.
 */
export class LeaseObserver {
  readonly #seen = new Map<string, { resourceVersion: string; at: number; first: number }>();

  constructor(
    private readonly client: ApiClient,
    private readonly namespace: string,
  ) {}

  async observe(
    now: number,
  ): Promise<{ shards: Map<string, ObservedLease>; members: ObservedLease[] }> {
    const leases = await this.client.list<Lease>(leasesPath(this.namespace), LABEL_LEASE);
    const shards = new Map<string, ObservedLease>();
    const members: ObservedLease[] = [];
    const names = new Set<string>();
    for (const l of leases) {
      const name = l.metadata?.name ?? "";
      const resourceVersion = l.metadata?.resourceVersion ?? "";
      names.add(name);
      const seen = this.#seen.get(name);
      const seenAt = seen?.resourceVersion === resourceVersion ? seen.at : now;
      const firstSeenAt = seen?.first ?? now;
      this.#seen.set(name, { resourceVersion, at: seenAt, first: firstSeenAt });
      const observed: ObservedLease = {
        name,
        holder: l.spec?.holderIdentity ?? "",
        resourceVersion,
        seenAt,
        firstSeenAt,
        durationMs: (l.spec?.leaseDurationSeconds ?? 0) * 1000,
      };
      const kind = (l.metadata?.labels as Record<string, string> | undefined)?.[LABEL_LEASE];
      if (kind === "member") members.push(observed);
      else if (kind === "shard") shards.set(name, observed);
    }
    for (const name of this.#seen.keys()) if (!names.has(name)) this.#seen.delete(name);
    return { shards, members };
  }

  /** Records a version this replica wrote itself, seen now. */
  wrote(name: string, resourceVersion: string, now: number): void {
    this.#seen.set(name, { resourceVersion, at: now, first: this.#seen.get(name)?.first ?? now });
  }
}
