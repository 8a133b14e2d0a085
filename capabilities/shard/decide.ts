/**
 * Which shard Leases a replica renews, takes and gives up, from what it observed: pure, so that
 * every case (start, a replica added, one dead, a race) is a unit test.
 *
 * Each replica also keeps a member Lease, so that the others count it before it holds anything.
 * A live replica holds at most ceil(shards / live replicas). An open shard (never held, or
 * released) goes to the live replica holding fewest, within that bound, ties by identity, so every
 * replica computes the same assignment and a race between two is settled by the Lease's
 * resourceVersion. An expired shard (not renewed within its duration, as this replica's clock
 * measured it: its holder is presumed dead) goes at once, beyond the bound, to the replica holding
 * fewest among those that have watched the Leases for a whole duration (a newer one would have to
 * wait that long to see it expire), and the bound moves the surplus on later.
 */

/** A Lease as observed: its holder, version, and when this replica first saw that version. */
export type ObservedLease = {
  name: string;
  /** Empty once released. */
  holder: string;
  resourceVersion: string;
  /** This replica's clock (ms) when it first saw this resourceVersion. */
  seenAt: number;
  /** This replica's clock (ms) when it first saw this Lease at all. */
  firstSeenAt: number;
  durationMs: number;
};

export type LeaseView = {
  now: number;
  /** When this replica first read the Leases. */
  startedAt: number;
  me: string;
  count: number;
  /** The shard Leases by index; absent ones were never created. */
  shards: (ObservedLease | undefined)[];
  members: ObservedLease[];
  /** The shards this replica serves now. */
  held: ReadonlySet<number>;
};

export type LeaseAction =
  | { kind: "createMember" }
  | { kind: "renewMember"; lease: ObservedLease }
  | { kind: "renew"; shard: number }
  | { kind: "acquire"; shard: number; lease?: ObservedLease }
  | { kind: "release"; shard: number }
  | { kind: "lost"; shard: number }
  | { kind: "deleteMember"; lease: ObservedLease };

/** A member Lease unrenewed this many durations is deleted by whoever sees it. */
const MEMBER_GONE_DURATIONS = 3;

const expired = (l: ObservedLease, now: number) => now - l.seenAt > l.durationMs;

/** The actions of one round, in order: member first, then what is lost, renewed, freed, taken. */
export function decideLeases(view: LeaseView): LeaseAction[] {
  const { now, startedAt, me, count, shards, members, held } = view;
  const actions: LeaseAction[] = [];

  const mine = members.find(m => m.holder === me);
  actions.push(mine ? { kind: "renewMember", lease: mine } : { kind: "createMember" });
  for (const m of members) {
    if (m.holder !== me && now - m.seenAt > MEMBER_GONE_DURATIONS * m.durationMs) {
      actions.push({ kind: "deleteMember", lease: m });
    }
  }

  // The live replicas, what each holds, and those that may judge an expiry.
  const holdings = new Map<string, number>([[me, 0]]);
  const settled = new Set<string>();
  if (now - startedAt >= (mine?.durationMs ?? Infinity)) settled.add(me);
  for (const m of members) {
    if (!m.holder || m.holder === me || expired(m, now)) continue;
    holdings.set(m.holder, 0);
    if (now - m.firstSeenAt >= m.durationMs) settled.add(m.holder);
  }
  const kept: number[] = [];
  const open: number[] = [];
  const lapsed: number[] = [];
  const suspect = new Set<string>();
  for (let i = 0; i < count; i++) {
    const lease = shards[i];
    if (held.has(i)) {
      if (lease?.holder === me) {
        kept.push(i);
        continue;
      }
      actions.push({ kind: "lost", shard: i });
    }
    if (!lease || !lease.holder || lease.holder === me) open.push(i);
    else if (expired(lease, now)) {
      lapsed.push(i);
      suspect.add(lease.holder);
    } else if (holdings.has(lease.holder)) {
      holdings.set(lease.holder, holdings.get(lease.holder)! + 1);
    }
  }
  holdings.set(me, kept.length);
  for (const s of suspect) holdings.delete(s);

  const target = Math.ceil(count / holdings.size);
  if (kept.length > target) {
    const shard = kept.pop()!;
    actions.push({ kind: "release", shard });
    holdings.set(me, kept.length);
  }
  for (const shard of kept) actions.push({ kind: "renew", shard });

  const fewest = (eligible: (id: string, n: number) => boolean) =>
    [...holdings.entries()]
      .filter(([id, n]) => eligible(id, n))
      .sort(([a, n], [b, m]) => n - m || (a < b ? -1 : a > b ? 1 : 0))[0];
  const assign = (shard: number, next: [string, number] | undefined) => {
    if (!next) return;
    holdings.set(next[0], next[1] + 1);
    if (next[0] === me) actions.push({ kind: "acquire", shard, lease: shards[shard] });
  };
  for (const shard of lapsed)
    assign(
      shard,
      fewest(id => settled.has(id)),
    );
  for (const shard of open)
    assign(
      shard,
      fewest((_, n) => n < target),
    );
  return actions;
}
