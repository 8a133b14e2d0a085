import type { V1Pod } from "@kubernetes/client-node";
import type { PodBox } from "../../../capabilities/api/kinds";
import type { ApiClient } from "../../../capabilities/client/api-client";
import { ClaimActivity } from "../../../capabilities/claim/claim-activity";
import { type BoxEventOutcome, ClaimReconciler } from "../../../capabilities/claim/reconciler";
import type { Standby } from "../../../capabilities/claim/standby-index";
import { WarmClaims } from "../../../capabilities/claim/warm-claims";
import { Failpoints } from "../../../capabilities/kit/failpoint";
import { WriteEchoes } from "../../../capabilities/kit/write-echoes";
import { FINALIZER } from "../../../capabilities/manifests/labels";

// Pepr loads as an ES module, which the unit tier does not run; the runner only logs with it.
jest.mock("pepr", () => ({ Log: { debug: jest.fn(), warn: jest.fn() } }));

const KEY = "ns/b";

const box = (
  opts: { rv?: string; phase?: "Running"; finalizers?: string[]; retain?: boolean } = {},
): PodBox =>
  ({
    metadata: {
      namespace: "ns",
      name: "b",
      uid: "uid-b",
      resourceVersion: opts.rv ?? "1",
      ...(opts.finalizers ? { finalizers: opts.finalizers } : {}),
    },
    spec: { warmPoolRef: "pool", ...(opts.retain ? { volumeReclaimPolicy: "Retain" } : {}) },
    ...(opts.phase ? { status: { phase: opts.phase } } : {}),
  }) as PodBox;

const standby: Standby = {
  namespace: "ns",
  pool: "pool",
  name: "pool-x",
  resourceVersion: "5",
  uid: "uid-x",
  podIP: "127.64.0.5",
  rootfsPVCName: "pool-x-rootfs-g1",
  workspacePVCName: "pool-x-workspace",
};

/**
 * The claim runner with the claims' state and the box's echoes, and no client: none of what is
 * tested here may send a request.
 */
function setup() {
  const finishes: string[] = [];
  const activity = new ClaimActivity(() => 0);
  const claims = new WarmClaims(activity, { quietMs: 0, maxDelayMs: 0 }, key => finishes.push(key));
  const echoes = new WriteEchoes();
  const unexpected = () => {
    throw new Error("no write expected");
  };
  const runner = new ClaimReconciler({
    client: {} as ApiClient,
    failpoints: new Failpoints(),
    clock: () => new Date(0),
    claims,
    pools: { templateOf: () => undefined, asked: unexpected, replenishSoon: unexpected },
    boxes: {
      echoes,
      writeStatus: unexpected,
      hasFinalizer: () => false,
      addFinalizer: unexpected,
      recordEvent: unexpected,
    },
  });
  /** The outcomes of a box's watch event, as the box reconciler is told them. */
  const event = (b: PodBox) => {
    const outcomes: BoxEventOutcome[] = [];
    runner.onBoxEvent(KEY, b, o => outcomes.push(o));
    return outcomes;
  };
  return { activity, claims, echoes, finishes, runner, event };
}

describe("ClaimReconciler: a box's watch event", () => {
  it("lets a new box of a pool jump the queue until its run takes the claim", () => {
    const { activity, claims, event } = setup();
    expect(event(box())).toEqual(["claim"]);
    // A box waiting to claim counts as a claim under way.
    expect(activity.last).toBe(0);
    expect(event(box({ rv: "2" }))).toEqual(["claim"]);
    expect(claims.takeCandidate(KEY)?.box.metadata?.resourceVersion).toBe("2");
    // It claims at most once: a later event would race its own cold start.
    expect(event(box({ rv: "3" }))).toEqual(["reconcile"]);
  });

  it("reconciles a box that may not claim in its turn", () => {
    const { event } = setup();
    expect(event(box({ phase: "Running" }))).toEqual(["reconcile"]);
    expect(event(box({ finalizers: [FINALIZER] }))).toEqual(["reconcile"]);
  });

  it("forgets the attempt of a box whose status shows", () => {
    const { claims, event } = setup();
    event(box());
    claims.takeCandidate(KEY);
    expect(event(box({ rv: "2", phase: "Running" }))).toEqual(["reconcile"]);
    // Only the attempt's bookkeeping is under test: a box with no status again may claim.
    expect(event(box({ rv: "3" }))).toEqual(["claim"]);
  });

  it("drops the echo of the box's own write, which still settles its attempt", () => {
    const { claims, echoes, event } = setup();
    event(box());
    claims.takeCandidate(KEY);
    echoes.record(KEY, "2");
    expect(event(box({ rv: "2", phase: "Running" }))).toEqual([]);
    expect(event(box({ rv: "3" }))).toEqual(["claim"]);
  });

  it("holds an event while a write of the box is in flight, and drops it if it is the echo", async () => {
    const { echoes, runner } = setup();
    const outcomes: BoxEventOutcome[] = [];
    let answer!: (rv: string) => void;
    const write = echoes.during(KEY, () => new Promise<string>(r => (answer = r)));
    runner.onBoxEvent(KEY, box({ rv: "2", phase: "Running" }), o => outcomes.push(o));
    runner.onBoxEvent(KEY, box({ rv: "3", phase: "Running" }), o => outcomes.push(o));
    expect(outcomes).toEqual([]);
    answer("2");
    await write;
    expect(outcomes).toEqual(["reconcile"]);
  });
});

describe("ClaimReconciler: a claim's finish", () => {
  it("runs the finish alone while no event came", () => {
    const { claims, finishes } = setup();
    // A box whose volumes must outlive it has its finish queued at once.
    claims.claimed(KEY, { box: box({ retain: true }), standby });
    expect(finishes).toEqual([KEY]);
    expect(claims.takeUnfinished(KEY)).toMatchObject({ standby, finishOnly: true });
    expect(claims.takeUnfinished(KEY)).toBeUndefined();
  });

  it("reconciles in full after a change of the box, but not after an echo", () => {
    const { claims, echoes, event } = setup();
    claims.claimed(KEY, { box: box({ retain: true }), standby });
    echoes.record(KEY, "2");
    event(box({ rv: "2", phase: "Running" }));
    expect(claims.takeUnfinished(KEY)?.finishOnly).toBe(true);

    claims.claimed(KEY, { box: box({ retain: true }), standby });
    expect(event(box({ rv: "3", phase: "Running" }))).toEqual(["reconcile"]);
    expect(claims.takeUnfinished(KEY)?.finishOnly).toBe(false);
  });

  it("reconciles in full after any other event of the box", () => {
    const { claims, runner } = setup();
    claims.claimed(KEY, { box: box({ retain: true }), standby });
    runner.eventCame(KEY);
    expect(claims.takeUnfinished(KEY)?.finishOnly).toBe(false);
  });

  it("leaves a box with no claim waiting or unfinished to the full reconcile, with no request", async () => {
    const { runner } = setup();
    await expect(runner.reconcile(KEY)).resolves.toBe("reconcile");
  });
});

describe("ClaimReconciler: a watch event of a box's Pod", () => {
  const pod = (rv: string, deleting = false): V1Pod => ({
    metadata: {
      namespace: "ns",
      name: "pool-x",
      resourceVersion: rv,
      ...(deleting ? { deletionTimestamp: new Date(0) } : {}),
    },
  });

  it("drops the echo of the claim's write of the Pod, not the Pod's going", () => {
    const { claims, runner } = setup();
    claims.podWrites.record("ns/pool-x", "7");
    const seen: string[] = [];
    runner.onPodEvent(pod("7"), false, () => seen.push("7"));
    runner.onPodEvent(pod("8"), false, () => seen.push("8"));
    runner.onPodEvent(pod("7", true), false, () => seen.push("deleting"));
    expect(seen).toEqual(["8", "deleting"]);
    // Its versions are forgotten with it.
    runner.onPodEvent(pod("7"), false, () => seen.push("7 again"));
    expect(seen).toEqual(["8", "deleting", "7 again"]);
  });
});
