import { describeAction } from "../../../capabilities/kit/object-actions";
import { podWarmPoolSpecSchema } from "../../../capabilities/api/podwarmpool";
import {
  decidePool,
  failedPoolStatus,
  ObservedStandby,
  PoolObservation,
  STANDBY_CREATE_BATCH,
} from "../../../capabilities/pool/decide";
import { template } from "../fixtures";

const NOW = "2026-11-30T10:00:00Z";
const HASH = "h-current";
const names = Array.from({ length: 10 }, (_, i) => `pool-new${i}`);

function obs(replicas: number, standbys: ObservedStandby[], withTemplate = true): PoolObservation {
  return {
    pool: {
      name: "pool",
      namespace: "ns",
      uid: "pool-uid",
      generation: 2,
      spec: podWarmPoolSpecSchema.parse({ templateRef: "python", replicas }),
      status: {},
    },
    template: withTemplate ? template() : undefined,
    templateHash: withTemplate ? HASH : undefined,
    standbys,
    freshNames: names,
    now: NOW,
  };
}

const standby = (
  name: string,
  opts: { ready?: boolean; hash?: string; pod?: boolean; phase?: string } = {},
): ObservedStandby => ({
  name,
  templateHash: opts.hash ?? HASH,
  pod:
    opts.pod === false
      ? undefined
      : {
          name,
          phase: opts.phase ?? (opts.ready === false ? "Pending" : "Running"),
          ready: opts.ready ?? true,
          podIP: opts.ready === false ? undefined : "127.64.0.9",
          deleting: false,
          resourceVersion: `rv-${name}`,
        },
  pvcs: [
    { name: `${name}-rootfs-g1`, role: "rootfs", deleting: false },
    { name: `${name}-workspace`, role: "workspace", deleting: false },
  ],
});
/** The actions that remove a standby (Pod first), and that make one (PVCs first). */
const removes = (n: string) => [
  `deletePod ${n}`,
  `deletePVC ${n}-rootfs-g1`,
  `deletePVC ${n}-workspace`,
];
const makes = (n: string) => [
  `createPVC ${n}-workspace`,
  `createPVC ${n}-rootfs-g1`,
  `createPod ${n}`,
  `addPodOwner ${n}-workspace`,
  `addPodOwner ${n}-rootfs-g1`,
];
const summary = (p: ReturnType<typeof decidePool>) => p.actions.map(describeAction);

describe("decidePool", () => {
  it("creates at most a batch of standbys per reconcile, and asks to be reconciled again", () => {
    const many = Array.from({ length: STANDBY_CREATE_BATCH }, (_, i) => `pool-b${i}`);
    const p = decidePool({ ...obs(1000, []), freshNames: many });
    expect(p.actions.filter(a => a.type === "createPod")).toHaveLength(STANDBY_CREATE_BATCH);
    expect(p.requeueAfterMs).toBe(0);
    // A pool the batch fills needs no second look.
    expect(decidePool(obs(2, [])).requeueAfterMs).toBeUndefined();
    // Nor does one whose template is missing: nothing can be created until it appears.
    expect(decidePool(obs(1000, [], false)).requeueAfterMs).toBeUndefined();
  });

  it("creates the missing standbys: both PVCs, then the Pod, labelled for the pool", () => {
    const p = decidePool(obs(2, []));
    expect(summary(p)).toEqual([...makes("pool-new0"), ...makes("pool-new1")]);
    const pod = p.actions.find(a => a.type === "createPod");
    expect(pod?.type === "createPod" && pod.pod.metadata?.labels).toMatchObject({
      "pod.cubeplex.ai/pool": "pool",
      "pod.cubeplex.ai/template-hash": HASH,
      "pod.cubeplex.ai/volume-key": "pool-new0",
    });
    expect(pod?.type === "createPod" && pod.pod.metadata?.labels).not.toHaveProperty(
      "pod.cubeplex.ai/box",
    );
    expect(pod?.type === "createPod" && pod.pod.metadata?.ownerReferences).toEqual([
      // No blockOwnerDeletion: a claim removes the reference, and the garbage collector would
      // answer each removal with a GET of the pool.
      {
        apiVersion: "pod.cubeplex.ai/v1alpha1",
        kind: "PodWarmPool",
        name: "pool",
        uid: "pool-uid",
        controller: true,
      },
    ]);
    expect(p.status).toMatchObject({
      replicas: 0,
      readyReplicas: 0,
      observedGeneration: 2,
      templateHash: HASH,
    });
  });

  it("does nothing when the pool is full and ready, and says so", () => {
    const p = decidePool(obs(2, [standby("a"), standby("b")]));
    expect(p.actions).toEqual([]);
    // The selector is what the scale subresource reports: the pool's standbys, never a claimed Pod.
    expect(p.status).toMatchObject({
      replicas: 2,
      readyReplicas: 2,
      selector: "pod.cubeplex.ai/pool=pool",
    });
    expect(p.status.conditions?.[0]).toMatchObject({
      type: "Ready",
      status: "True",
      reason: "PoolReady",
    });
  });

  it("counts unready standbys as replicas, not ready ones", () => {
    const p = decidePool(obs(2, [standby("a"), standby("b", { ready: false })]));
    expect(p.actions).toEqual([]);
    expect(p.status).toMatchObject({ replicas: 2, readyReplicas: 1 });
    expect(p.status.conditions?.[0]).toMatchObject({ status: "False", reason: "Replenishing" });
  });

  it("scales down, removing unready standbys first", () => {
    const p = decidePool(obs(1, [standby("a"), standby("b", { ready: false }), standby("c")]));
    expect(summary(p)).toEqual([...removes("b"), ...removes("a")]);
  });

  it("deletes a standby's Pod only as observed (a claim may take it meanwhile), before its PVCs", () => {
    const p = decidePool(obs(0, [standby("a")]));
    expect(p.actions[0]).toEqual({ type: "deletePod", name: "a", resourceVersion: "rv-a" });
  });

  it("scales to zero", () => {
    expect(summary(decidePool(obs(0, [standby("a")])))).toEqual([...removes("a")]);
  });

  it("replaces stale standbys one at a time, never emptying the pool", () => {
    const stale = ["a", "b", "c"].map(n => standby(n, { hash: "old" }));
    // Step 1: one new standby beyond replicas (surge), no stale one removed yet.
    const p1 = decidePool(obs(3, stale));
    expect(summary(p1)).toEqual([...makes("pool-new0")]);
    // Step 2: the new one is not ready yet: nothing changes.
    expect(decidePool(obs(3, [...stale, standby("n0", { ready: false })])).actions).toEqual([]);
    // Step 3: it is ready: one stale standby goes; the next new one waits for the surge room.
    const p3 = decidePool(obs(3, [...stale, standby("n0")]));
    expect(summary(p3)).toEqual([...removes("a"), ...makes("pool-new0")]);
  });

  it("removes unready stale standbys at once", () => {
    const p = decidePool(obs(1, [standby("a"), standby("old", { hash: "old", ready: false })]));
    expect(summary(p)).toEqual([...removes("old")]);
  });

  it("removes a standby that lost its Pod (a claimer may have written to its volumes), then makes a new one", () => {
    const p = decidePool(obs(1, [standby("a", { pod: false })]));
    expect(summary(p)).toEqual([...removes("a").slice(1), ...makes("pool-new0")]);
  });

  it("makes a new standby's Pod an owner of its PVCs, after the Pod (its uid comes from the create)", () => {
    const p = decidePool(obs(1, []));
    const owners = p.actions.filter(a => a.type === "addPodOwner");
    expect(owners).toEqual([
      {
        type: "addPodOwner",
        name: "pool-new0-workspace",
        pod: "pool-new0",
        owners: [
          expect.objectContaining({ kind: "PodWarmPool", uid: "pool-uid", controller: true }),
        ],
      },
      expect.objectContaining({ name: "pool-new0-rootfs-g1", pod: "pool-new0" }),
    ]);
    expect(owners[0].type === "addPodOwner" && owners[0].podUid).toBeUndefined();
  });

  it("adds the observed Pod to the owners of a standby's PVCs that lack it, guarded by the owners read", () => {
    const poolRef = {
      apiVersion: "pod.cubeplex.ai/v1alpha1",
      kind: "PodWarmPool",
      name: "pool",
      uid: "pool-uid",
      controller: true,
    };
    const podRef = { apiVersion: "v1", kind: "Pod", name: "a", uid: "pod-a" };
    const a = standby("a");
    a.pod!.uid = "pod-a";
    a.pvcs[0].owners = [poolRef, podRef];
    a.pvcs[1].owners = [poolRef];
    const p = decidePool(obs(1, [a]));
    expect(p.actions).toEqual([
      { type: "addPodOwner", name: "a-workspace", owners: [poolRef], pod: "a", podUid: "pod-a" },
    ]);
  });

  it("adds no Pod owner to a standby it removes", () => {
    const a = standby("a", { phase: "Failed", ready: false });
    a.pod!.uid = "pod-a";
    expect(summary(decidePool(obs(1, [a])))).toEqual([...removes("a"), ...makes("pool-new0")]);
  });

  it("removes a standby whose Pod ended, then makes a new one", () => {
    const p = decidePool(obs(1, [standby("a", { phase: "Failed", ready: false })]));
    expect(summary(p)).toEqual([...removes("a"), ...makes("pool-new0")]);
  });

  it("creates nothing without its template, and reports it", () => {
    const p = decidePool(obs(2, [], false));
    expect(p.actions).toEqual([]);
    expect(p.status.conditions?.[0]).toMatchObject({ status: "False", reason: "TemplateNotFound" });
  });
});

describe("failedPoolStatus", () => {
  it("keeps the plan's counts and says why the pool is not filling", () => {
    const o = obs(2, []);
    const planned = decidePool(o).status;
    const failed = failedPoolStatus(o, planned, 'HTTP 403: RuntimeClass "kata" not found');
    expect(failed).toEqual({
      ...planned,
      conditions: [
        {
          type: "Ready",
          status: "False",
          observedGeneration: 2,
          lastTransitionTime: NOW,
          reason: "StandbyWriteFailed",
          message: 'cannot keep standbys: HTTP 403: RuntimeClass "kata" not found',
        },
      ],
    });
  });
});
