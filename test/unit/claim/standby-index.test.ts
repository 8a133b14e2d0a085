import type { V1Pod } from "@kubernetes/client-node";
import { StandbyIndex } from "../../../capabilities/claim/standby-index";

const pod = (
  name: string,
  opts: {
    ready?: boolean;
    pool?: string | null;
    rv?: string;
    hash?: string;
    deleting?: boolean;
    controller?: { kind: string; name: string; uid?: string };
    box?: string;
  } = {},
): V1Pod => ({
  metadata: {
    name,
    namespace: "ns",
    resourceVersion: opts.rv ?? "1",
    labels: {
      ...(opts.pool === null ? {} : { "pod.cubeplex.ai/pool": opts.pool ?? "pool" }),
      "pod.cubeplex.ai/template-hash": opts.hash ?? "h1",
      ...(opts.box ? { "pod.cubeplex.ai/box": opts.box } : {}),
    },
    ownerReferences: [
      {
        apiVersion: "pod.cubeplex.ai/v1alpha1",
        uid: "u",
        controller: true,
        ...(opts.controller ?? { kind: "PodWarmPool", name: opts.pool ?? "pool" }),
      },
    ],
    ...(opts.deleting ? { deletionTimestamp: new Date() } : {}),
  },
  spec: {
    containers: [],
    volumes: [
      { name: "rootfs", persistentVolumeClaim: { claimName: `${name}-rootfs-g1` } },
      { name: "workspace", persistentVolumeClaim: { claimName: `${name}-workspace` } },
    ],
  },
  status:
    opts.ready === false
      ? { phase: "Pending" }
      : { phase: "Running", podIP: "127.64.0.3", conditions: [{ type: "Ready", status: "True" }] },
});

/** The ready standbys the index counts for pool ns/pool (what the metrics report). */
const readyIn = (index: StandbyIndex) =>
  index.counts().find(c => c.namespace === "ns" && c.pool === "pool")?.ready ?? 0;

describe("StandbyIndex", () => {
  it("counts only Pods the pool made and no box holds", () => {
    const index = new StandbyIndex();
    index.observe(pod("other-pool", { controller: { kind: "PodWarmPool", name: "elsewhere" } }));
    index.observe(pod("a-box", { controller: { kind: "PodBox", name: "victim" } }));
    index.observe(pod("held", { box: "victim" }));
    expect(readyIn(index)).toBe(0);
    index.observe(pod("made"));
    expect(readyIn(index)).toBe(1);
  });

  it("keeps ready standbys and hands each out once", () => {
    const index = new StandbyIndex();
    index.observe(pod("a"));
    index.observe(pod("b", { ready: false }));
    expect(readyIn(index)).toBe(1);
    expect(index.take("ns", "pool")).toMatchObject({
      name: "a",
      resourceVersion: "1",
      podIP: "127.64.0.3",
      rootfsPVCName: "a-rootfs-g1",
      workspacePVCName: "a-workspace",
    });
    expect(index.take("ns", "pool")).toBeUndefined();
  });

  it("follows readiness, deletion and departure from the pool", () => {
    const index = new StandbyIndex();
    index.observe(pod("a", { ready: false }));
    index.observe(pod("a", { rv: "2" }));
    expect(readyIn(index)).toBe(1);
    index.observe(pod("a", { rv: "3", deleting: true }));
    expect(readyIn(index)).toBe(0);
    index.observe(pod("b"));
    index.observe(pod("b", { pool: null, rv: "4" }));
    expect(readyIn(index)).toBe(0);
  });

  it("offers only standbys of the current template when a hash is given", () => {
    const index = new StandbyIndex();
    index.observe(pod("old", { hash: "h0" }));
    expect(index.take("ns", "pool", "h1")).toBeUndefined();
    expect(index.take("ns", "pool", "h0")?.name).toBe("old");
  });

  it("takes in a read's ready standbys, but not one a claim took at the version read", () => {
    const index = new StandbyIndex();
    index.observe(pod("a"));
    expect(index.take("ns", "pool")?.name).toBe("a");
    // The read predates the claim's write: "a" is still ready at the version it was taken at.
    index.refresh("ns", "pool", [pod("a"), pod("b", { ready: false }), pod("c")]);
    expect(index.take("ns", "pool")?.name).toBe("c");
    expect(index.take("ns", "pool")).toBeUndefined();
    // Changed since (the claim failed, the Pod is the pool's again): it can be taken again.
    index.refresh("ns", "pool", [pod("a", { rv: "2" })]);
    expect(index.take("ns", "pool")?.name).toBe("a");
  });

  it("forgets a taken standby that a read no longer finds in its pool", () => {
    const index = new StandbyIndex();
    index.observe(pod("a"));
    index.observe(pod("x", { pool: "other" }));
    index.take("ns", "pool");
    index.take("ns", "other");
    // "a" left the pool (claimed) and its watch event never came; "x" is another pool's.
    index.refresh("ns", "pool", []);
    // Back in the pool at the version it was taken at (only a forgotten one can come back so).
    index.refresh("ns", "pool", [pod("a")]);
    expect(index.take("ns", "pool")?.name).toBe("a");
    index.refresh("ns", "other", [pod("x", { pool: "other" })]);
    expect(index.take("ns", "other")).toBeUndefined();
  });

  it("believes its watch over what it handed out", () => {
    const index = new StandbyIndex();
    index.observe(pod("a"));
    index.take("ns", "pool");
    // A watch that restarts replays the Pod as added: the index follows its watch, as before.
    index.observe(pod("a"));
    expect(index.take("ns", "pool")?.name).toBe("a");
  });

  it("knows which box holds a Pod still in its pool, from its watch and from a read", () => {
    const index = new StandbyIndex();
    const claimed = (name: string, rv: string) =>
      pod(name, { rv, controller: { kind: "PodBox", name: "b1", uid: "box-1" } });
    expect(index.wasRead("ns", "pool")).toBe(false);
    index.observe(pod("a"));
    expect(index.holdsClaimed("box-1")).toBe(false);
    index.observe(claimed("a", "2"));
    expect(index.holdsClaimed("box-1")).toBe(true);
    // Relabelled by the claim's finish, it leaves the pool's watch.
    index.observe(pod("a", { rv: "3", pool: null, box: "b1" }), true);
    expect(index.holdsClaimed("box-1")).toBe(false);
    // A read finds one claimed before this process; a later read no longer finds it.
    index.refresh("ns", "pool", [claimed("b", "4")]);
    expect(index.wasRead("ns", "pool")).toBe(true);
    expect(index.wasRead("ns", "other")).toBe(false);
    expect(index.holdsClaimed("box-1")).toBe(true);
    index.refresh("ns", "other", []);
    expect(index.holdsClaimed("box-1")).toBe(true);
    index.refresh("ns", "pool", []);
    expect(index.holdsClaimed("box-1")).toBe(false);
  });

  it("counts ready standbys per pool", () => {
    const index = new StandbyIndex();
    index.observe(pod("a"));
    index.observe(pod("b", { pool: "other" }));
    expect(index.counts()).toEqual(
      expect.arrayContaining([
        { namespace: "ns", pool: "pool", ready: 1 },
        { namespace: "ns", pool: "other", ready: 1 },
      ]),
    );
  });
});
