import {
  decideLeases,
  type LeaseView,
  type ObservedLease,
} from "../../../capabilities/shard/decide";
import {
  namespaceShard,
  outsideShards,
  shardOf,
  withShardLabel,
} from "../../../capabilities/shard/shard-of";

const D = 15_000;
const lease = (holder: string, seenAt = 0, firstSeenAt = 0): ObservedLease => ({
  name: `l-${holder}`,
  holder,
  resourceVersion: "1",
  seenAt,
  firstSeenAt,
  durationMs: D,
});
const view = (v: Partial<LeaseView>): LeaseView => ({
  now: 1000,
  startedAt: 0,
  me: "a",
  count: 3,
  shards: [],
  members: [],
  held: new Set(),
  ...v,
});
const kinds = (v: LeaseView) =>
  decideLeases(v).map(a => ("shard" in a ? `${a.kind}:${a.shard}` : a.kind));

describe("shardOf", () => {
  it("puts a namespace in one shard, the same for every caller, spread over all", () => {
    const names = Array.from({ length: 300 }, (_, i) => `tenant-${i}`);
    const counts = [0, 0, 0];
    for (const n of names) counts[shardOf(n, 3)]++;
    for (const c of counts) expect(c).toBeGreaterThan(70);
    expect(shardOf("tenant-7", 3)).toBe(shardOf("tenant-7", 3));
    expect(shardOf("anything", 1)).toBe(0);
  });

  it("names the shard with the count, and selects what lies outside every shard", () => {
    expect(namespaceShard("default", 3)).toMatch(/^[0-2]-of-3$/);
    expect(outsideShards(3)).toBe("pod.cubeplex.ai/shard notin (0-of-3,1-of-3,2-of-3)");
    expect(withShardLabel({ app: "x" }, "default", 3)).toEqual({
      app: "x",
      "pod.cubeplex.ai/shard": namespaceShard("default", 3),
    });
  });
});

describe("decideLeases", () => {
  it("a first replica creates its member Lease and takes every free shard", () => {
    expect(kinds(view({}))).toEqual(["createMember", "acquire:0", "acquire:1", "acquire:2"]);
  });

  it("replicas starting together split the free shards by identity, one each", () => {
    const members = [lease("a"), lease("b"), lease("c")];
    expect(kinds(view({ members, me: "a" }))).toEqual(["renewMember", "acquire:0"]);
    expect(kinds(view({ members, me: "b" }))).toEqual(["renewMember", "acquire:1"]);
    expect(kinds(view({ members, me: "c" }))).toEqual(["renewMember", "acquire:2"]);
  });

  it("renews what it holds and takes nothing while shards are fairly held", () => {
    const members = [lease("a"), lease("b"), lease("c")];
    const shards = [lease("a"), lease("b"), lease("c")];
    expect(kinds(view({ members, shards, held: new Set([0]) }))).toEqual([
      "renewMember",
      "renew:0",
    ]);
  });

  it("gives one shard up when a replica is added, and the newcomer takes it", () => {
    const members = [lease("a"), lease("b"), lease("c")];
    const before = [lease("a"), lease("b"), lease("a")];
    expect(kinds(view({ members, shards: before, held: new Set([0, 2]) }))).toEqual([
      "renewMember",
      "release:2",
      "renew:0",
    ]);
    const released = [lease("a"), lease("b"), lease("")];
    expect(kinds(view({ members, shards: released, me: "c" }))).toEqual([
      "renewMember",
      "acquire:2",
    ]);
    // The others leave it to the replica holding fewest.
    expect(kinds(view({ members, shards: released, me: "b", held: new Set([1]) }))).toEqual([
      "renewMember",
      "renew:1",
    ]);
  });

  it("takes a dead replica's shard once its Lease went a whole duration unrenewed", () => {
    const now = 100_000;
    const members = [lease("a", now), lease("b", now), lease("c", now - D - 1)];
    const alive = [lease("a", now), lease("b", now), lease("c", now - D)];
    expect(kinds(view({ now, members, shards: alive, held: new Set([0]) }))).toEqual([
      "renewMember",
      "renew:0",
    ]);
    const dead = [lease("a", now), lease("b", now), lease("c", now - D - 1)];
    expect(kinds(view({ now, members, shards: dead, held: new Set([0]) }))).toEqual([
      "renewMember",
      "renew:0",
      "acquire:2",
    ]);
    expect(kinds(view({ now, members, shards: dead, me: "b", held: new Set([1]) }))).toEqual([
      "renewMember",
      "renew:1",
    ]);
  });

  it("gives a dead replica's shard to a replica that watched long enough, beyond the bound", () => {
    const now = 100_000;
    const members = [
      lease("a", now),
      lease("b", now),
      lease("c", now - D - 1),
      lease("d", now, now - 1000),
    ];
    const shards = [lease("a", now), lease("b", now), lease("c", 0)];
    // d joined a moment ago: it could not yet tell that c's Lease expired.
    expect(kinds(view({ now, members, shards, held: new Set([0]) }))).toEqual([
      "renewMember",
      "renew:0",
      "acquire:2",
    ]);
    expect(kinds(view({ now, members, shards, me: "d", startedAt: now - 1000 }))).toEqual([
      "renewMember",
    ]);
    // Then the bound (three live replicas: one each) moves the surplus to d.
    const after = [lease("a", now), lease("b", now), lease("a", now)];
    const alive = [lease("a", now), lease("b", now), lease("d", now, now - 1000)];
    expect(kinds(view({ now, members: alive, shards: after, held: new Set([0, 2]) }))).toEqual([
      "renewMember",
      "release:2",
      "renew:0",
    ]);
  });

  it("a new replica waits a whole duration before it takes Leases a dead generation left", () => {
    const now = 100_000;
    const shards = [lease("old", 0), lease("old", 0), lease("old", 0)];
    const fresh = view({ now, me: "x", startedAt: now - 1000, shards, members: [lease("x", now)] });
    expect(kinds(fresh)).toEqual(["renewMember"]);
    expect(kinds({ ...fresh, startedAt: now - D })).toEqual([
      "renewMember",
      "acquire:0",
      "acquire:1",
      "acquire:2",
    ]);
  });

  it("stops serving a shard another replica holds, and does not take it back", () => {
    const members = [lease("a"), lease("b")];
    const shards = [lease("b"), lease("b"), lease("a")];
    expect(kinds(view({ count: 3, members, shards, held: new Set([0, 2]) }))).toEqual([
      "renewMember",
      "lost:0",
      "renew:2",
    ]);
  });

  it("takes back a shard whose Lease still names it after it stopped serving it", () => {
    const members = [lease("a"), lease("b")];
    const shards = [lease("a"), lease("b")];
    expect(
      kinds(view({ count: 2, members, shards, held: new Set([1].filter(() => false)) })),
    ).toEqual(["renewMember", "acquire:0"]);
  });

  it("deletes member Leases left unrenewed for three durations", () => {
    const now = 100_000;
    const members = [lease("a", now), lease("gone", now - 3 * D - 1)];
    expect(
      decideLeases(view({ now, members, count: 1, shards: [lease("a", now)], held: new Set([0]) })),
    ).toEqual([
      { kind: "renewMember", lease: members[0] },
      { kind: "deleteMember", lease: members[1] },
      { kind: "renew", shard: 0 },
    ]);
  });

  it("holds at most ceil(shards / replicas): with more replicas than shards, some hold none", () => {
    const members = [lease("a"), lease("b"), lease("c"), lease("d")];
    const shards = [lease("a"), lease("b"), lease("c")];
    expect(kinds(view({ members, shards, me: "d" }))).toEqual(["renewMember"]);
  });
});
