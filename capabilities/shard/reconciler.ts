import { Log } from "pepr";
import type { ApiClient } from "../client/api-client";
import type { ShardConfig } from "../config";
import { describeError, statusOf } from "../kit/api-errors";
import { decideLeases, type LeaseAction, type ObservedLease } from "./decide";
import {
  type Lease,
  LABEL_LEASE,
  LeaseObserver,
  leasesPath,
  memberLeaseName,
  shardLeaseName,
} from "./observe";

/** A round asked for by an event runs this soon after it, so that a burst makes one round. */
const SOON_MS = 20;
import { shardName } from "./shard-of";

/** What a replica does when it starts and stops serving a shard. */
export type ShardHandlers = {
  gained(shard: number): void;
  /**
   * Stops serving the shard at once; resolves true once none of its writes is in flight, false
   * if some still were after `waitMs`.
   */
  lost(shard: number, waitMs: number): Promise<boolean>;
};

/** Lease times are MicroTime: RFC 3339 with microseconds. */
const microTime = (ms: number) => new Date(ms).toISOString().replace("Z", "000Z");

/**
 * Holds this replica's shard Leases: every third of a Lease's duration, when a Lease it watches
 * is about to expire, and when one is released, it renews, takes and gives up shards as
 * {@link decideLeases} says of the Leases as its watch last saw them.
 *
 * The fence: a shard is served only while its Lease was renewed within two thirds of its duration
 * (measured from when the renewal was sent), and another replica takes it only a whole duration
 * after it last saw the Lease change. Between the two lies a third of the duration in which
 * neither writes, which covers a write that was in flight when the holder stopped. A shard given
 * up on purpose is released once its writes in flight are done, so a move costs no wait; if they
 * are not done within a third of the duration, it is left to expire instead.
 */
export class ShardLeases {
  readonly #held = new Map<
    number,
    { resourceVersion: string; renewedAt: number; validUntil: number }
  >();
  readonly #observer: LeaseObserver;
  #timer?: { at: number; handle: NodeJS.Timeout };
  #running = false;
  #again = false;
  #stopped = false;
  #roundAt: number;
  /** When this replica last renewed its member Lease (its clock, ms). */
  #memberRenewedAt = -Infinity;
  #startedAt?: number;
  #lastError = "no round yet";

  constructor(
    private readonly deps: {
      client: ApiClient;
      config: ShardConfig;
      me: string;
      handlers: ShardHandlers;
      clock?: () => number;
    },
  ) {
    this.#observer = new LeaseObserver(
      deps.config.namespace,
      () => this.#now(),
      () => this.#schedule(SOON_MS),
    );
    this.#roundAt = this.#now();
  }

  get durationMs(): number {
    return this.deps.config.leaseSeconds * 1000;
  }

  #now(): number {
    return (this.deps.clock ?? Date.now)();
  }

  /** Whether this replica may write in the shard now. */
  valid(shard: number): boolean {
    const h = this.#held.get(shard);
    return h !== undefined && h.validUntil > this.#now();
  }

  /** The shards this replica serves, ascending. */
  held(): number[] {
    return [...this.#held.keys()].sort((a, b) => a - b);
  }

  /**
   * Healthy while a round succeeded within three Lease durations: a replica that cannot renew
   * loses its shards after one, and restarting it sooner would not bring the API server back.
   */
  health(): { ok: boolean; detail: string } {
    const age = this.#now() - this.#roundAt;
    if (age <= 3 * this.durationMs) return { ok: true, detail: `holding shards [${this.held()}]` };
    return {
      ok: false,
      detail: `no lease round for ${Math.round(age / 1000)} s: ${this.#lastError}`,
    };
  }

  /** Starts the watch of the Leases and the rounds. */
  start(): void {
    this.#observer.start();
    this.#schedule(0);
  }

  /** Asks for a round in `delayMs`, unless one is due sooner. */
  #schedule(delayMs: number): void {
    if (this.#stopped) return;
    const at = this.#now() + delayMs;
    if (this.#timer && this.#timer.at <= at) return;
    if (this.#timer) clearTimeout(this.#timer.handle);
    const handle = setTimeout(() => {
      this.#timer = undefined;
      void this.#run();
    }, delayMs);
    this.#timer = { at, handle };
  }

  /** One round at a time; one asked for meanwhile runs right after. */
  async #run(): Promise<void> {
    if (this.#running) {
      this.#again = true;
      return;
    }
    this.#running = true;
    try {
      await this.round();
    } finally {
      this.#running = false;
    }
    if (this.#again) {
      this.#again = false;
      this.#schedule(0);
    }
    // The next renewal due, or the moment a Lease held elsewhere expires, if sooner.
    const now = this.#now();
    const renewals = [this.#memberRenewedAt, ...[...this.#held.values()].map(h => h.renewedAt)];
    const due = Math.min(...renewals.map(at => at + this.#renewEveryMs));
    const expiry = this.#observer.nextExpiry(this.deps.me, now) ?? Infinity;
    const next = Math.min(due, expiry + SOON_MS, now + this.#renewEveryMs);
    this.#schedule(Math.max(SOON_MS, next - now));
  }

  /** How often a Lease is renewed: a third of its duration. */
  get #renewEveryMs(): number {
    return this.durationMs / 3;
  }

  /** Whether a Lease renewed at `at` is due again: rounds that events bring write nothing early. */
  #due(at: number, now: number): boolean {
    return now - at >= this.#renewEveryMs * 0.9;
  }

  /** Stops the rounds, gives every shard up and removes the member Lease (a graceful exit). */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer.handle);
    await Promise.all(this.held().map(shard => this.#release(shard)));
    await this.deps.client
      .delete(leasesPath(this.deps.config.namespace, memberLeaseName(this.deps.me)))
      .catch(() => undefined);
  }

  /** One round: read the Leases, decide, act. */
  async round(): Promise<void> {
    const { count } = this.deps.config;
    try {
      for (const shard of this.held()) {
        if (!this.valid(shard)) await this.#lose(shard, "its Lease was not renewed in time");
      }
      if (!this.#observer.synced) {
        this.#lastError = "the Leases are not listed yet";
        return;
      }
      const now = this.#now();
      const { shards, members } = this.#observer.observe();
      this.#startedAt ??= now;
      const actions = decideLeases({
        now,
        startedAt: this.#startedAt,
        me: this.deps.me,
        count,
        shards: Array.from({ length: count }, (_, i) =>
          shards.get(shardLeaseName(shardName(i, count))),
        ),
        members,
        held: new Set(this.#held.keys()),
      });
      for (const action of actions) {
        try {
          await this.#apply(action);
        } catch (e) {
          Log.warn({ action: action.kind, error: describeError(e) }, "shard lease action failed");
        }
      }
      this.#roundAt = now;
    } catch (e) {
      this.#lastError = describeError(e);
      Log.warn({ error: this.#lastError }, "shard lease round failed");
    }
  }

  async #apply(action: LeaseAction): Promise<void> {
    const { client, config, me } = this.deps;
    const now = this.#now();
    switch (action.kind) {
      case "createMember":
        if (!this.#due(this.#memberRenewedAt, now)) return;
        this.#memberRenewedAt = now;
        await this.#create(memberLeaseName(me), "member", now);
        return;
      case "renewMember":
        if (!this.#due(this.#memberRenewedAt, now)) return;
        this.#memberRenewedAt = now;
        await client.mergePatch(leasesPath(config.namespace, action.lease.name), {
          spec: { holderIdentity: me, renewTime: microTime(now) },
        });
        return;
      case "deleteMember":
        await client
          .delete(leasesPath(config.namespace, action.lease.name), action.lease.resourceVersion)
          .catch(e => {
            if (statusOf(e) !== 404 && statusOf(e) !== 409) throw e;
          });
        return;
      case "renew":
        return this.#renew(action.shard, now);
      case "acquire":
        return this.#acquire(action.shard, action.lease, now);
      case "release":
        return this.#release(action.shard);
      case "lost":
        await this.#lose(action.shard, "another replica holds its Lease");
        return;
    }
  }

  #leaseName(shard: number): string {
    return shardLeaseName(shardName(shard, this.deps.config.count));
  }

  async #create(name: string, kind: "shard" | "member", now: number): Promise<Lease> {
    const { client, config, me } = this.deps;
    const created = await client.create<Lease>(leasesPath(config.namespace), {
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      metadata: { name, labels: { [LABEL_LEASE]: kind } },
      spec: {
        holderIdentity: me,
        leaseDurationSeconds: config.leaseSeconds,
        acquireTime: microTime(now),
        renewTime: microTime(now),
      },
    });
    this.#observer.wrote(created);
    return created;
  }

  /** A merge patch of a Lease at the version given: a 409 if anyone wrote it since. */
  async #patch(name: string, resourceVersion: string, spec: Lease["spec"]): Promise<Lease> {
    const { client, config } = this.deps;
    const patched = await client.mergePatch<Lease>(leasesPath(config.namespace, name), {
      metadata: { resourceVersion },
      spec,
    });
    this.#observer.wrote(patched);
    return patched;
  }

  #hold(shard: number, lease: Lease, sentAt: number): void {
    this.#held.set(shard, {
      resourceVersion: lease.metadata!.resourceVersion!,
      renewedAt: sentAt,
      validUntil: sentAt + (this.durationMs * 2) / 3,
    });
  }

  async #renew(shard: number, now: number): Promise<void> {
    const h = this.#held.get(shard)!;
    if (!this.#due(h.renewedAt, now)) return;
    // Counted from the attempt: a renewal that fails is tried again a renewal period later, not at
    // once (its validity still runs from the last one that succeeded).
    h.renewedAt = now;
    try {
      const lease = await this.#patch(this.#leaseName(shard), h.resourceVersion, {
        renewTime: microTime(now),
      });
      if (this.#held.has(shard)) this.#hold(shard, lease, now);
    } catch (e) {
      if (statusOf(e) === 409 || statusOf(e) === 404) {
        await this.#lose(shard, "its Lease changed under it");
      } else throw e;
    }
  }

  async #acquire(shard: number, observed: ObservedLease | undefined, now: number): Promise<void> {
    const name = this.#leaseName(shard);
    const spec = {
      holderIdentity: this.deps.me,
      leaseDurationSeconds: this.deps.config.leaseSeconds,
      acquireTime: microTime(now),
      renewTime: microTime(now),
    };
    let lease: Lease;
    try {
      lease = observed
        ? await this.#patch(name, observed.resourceVersion, spec)
        : await this.#create(name, "shard", now);
    } catch (e) {
      // Another replica was first.
      if (statusOf(e) === 409) return;
      throw e;
    }
    this.#hold(shard, lease, now);
    Log.info({ shard: shardName(shard, this.deps.config.count) }, "shard acquired");
    this.deps.handlers.gained(shard);
  }

  async #release(shard: number): Promise<void> {
    const h = this.#held.get(shard);
    if (!h) return;
    const settled = await this.#lose(
      shard,
      "released to balance the replicas",
      this.durationMs / 3,
    );
    if (!settled) return;
    await this.#patch(this.#leaseName(shard), h.resourceVersion, {
      holderIdentity: "",
    }).catch(e => {
      if (statusOf(e) !== 409 && statusOf(e) !== 404) throw e;
    });
  }

  /** Stops serving a shard; resolves whether its writes settled within `waitMs`. */
  async #lose(shard: number, why: string, waitMs = 0): Promise<boolean> {
    if (!this.#held.delete(shard)) return false;
    Log.info({ shard: shardName(shard, this.deps.config.count), why }, "shard lost");
    return this.deps.handlers.lost(shard, waitMs);
  }
}
