import { podWarmPoolSpecSchema } from "../../../capabilities/api/podwarmpool";
import { validatePodWarmPool } from "../../../capabilities/admission/rules";
import { decidePool, PoolObservation } from "../../../capabilities/pool/decide";
import { demandTarget, PoolDemand } from "../../../capabilities/pool/demand";
import { template } from "../fixtures";

const WINDOW = 60_000;
const T0 = 1_000_000;
const target = (over: Partial<Parameters<typeof demandTarget>[0]>) =>
  demandTarget({
    floor: 2,
    ceiling: 10,
    asks: 0,
    standbys: 2,
    nowMs: T0,
    windowMs: WINDOW,
    ...over,
  });

describe("demandTarget: an autoscaling pool's standbys follow the asks of its window", () => {
  it("keeps one standby per recent ask, within the floor and the ceiling", () => {
    const held = { target: 2, neededSinceMs: T0 };
    expect(target({ held, asks: 0 }).held.target).toBe(2);
    expect(target({ held, asks: 5 }).held.target).toBe(5);
    expect(target({ held, asks: 50 }).held.target).toBe(10);
  });

  it("rises at once, and falls only after a whole window in which the higher target was unneeded", () => {
    const up = target({ held: { target: 2, neededSinceMs: T0 }, asks: 6 });
    expect(up).toEqual({ held: { target: 6, neededSinceMs: T0 }, recheckInMs: WINDOW });
    const later = target({ held: up.held, asks: 3, nowMs: T0 + 30_000 });
    expect(later).toEqual({ held: up.held, recheckInMs: 30_000 });
    const busy = target({ held: up.held, asks: 6, nowMs: T0 + 30_000 });
    expect(busy.held).toEqual({ target: 6, neededSinceMs: T0 + 30_000 });
    const quiet = target({ held: up.held, asks: 1, nowMs: T0 + WINDOW });
    expect(quiet).toEqual({ held: { target: 2, neededSinceMs: T0 + WINDOW } });
  });

  it("after a restart, holds the standbys that exist for a window", () => {
    const fresh = target({ held: undefined, asks: 0, standbys: 7 });
    expect(fresh).toEqual({ held: { target: 7, neededSinceMs: T0 }, recheckInMs: WINDOW });
    expect(target({ held: undefined, standbys: 40 }).held.target).toBe(10);
    expect(target({ held: undefined, standbys: 0 })).toEqual({
      held: { target: 2, neededSinceMs: T0 },
    });
  });

  it("follows a floor or ceiling changed while a target is held", () => {
    const held = { target: 8, neededSinceMs: T0 };
    expect(target({ held, ceiling: 4, nowMs: T0 + 1 }).held.target).toBe(4);
    expect(target({ held, floor: 9, ceiling: 12, nowMs: T0 + 1 }).held.target).toBe(9);
  });
});

describe("PoolDemand", () => {
  it("counts a pool's asks within the window and forgets older ones", () => {
    const d = new PoolDemand();
    for (const t of [10, 20, 30]) d.record("ns/p", t);
    d.record("ns/q", 25);
    expect(d.since("ns/p", 15)).toBe(2);
    expect(d.since("ns/p", 0)).toBe(2);
    expect(d.since("ns/q", 0)).toBe(1);
    d.forget("ns/q");
    expect(d.since("ns/q", 0)).toBe(0);
    expect(d.since("ns/none", 0)).toBe(0);
  });
});

describe("an autoscaling pool's spec and decision", () => {
  it("defaults the window and refuses a ceiling below the floor, naming the field", () => {
    const ok = validatePodWarmPool({
      templateRef: "t",
      replicas: 2,
      autoscale: { maxReplicas: 5 },
    });
    expect(ok).toEqual({
      ok: true,
      spec: { templateRef: "t", replicas: 2, autoscale: { maxReplicas: 5, windowSeconds: 60 } },
    });
    const bad = validatePodWarmPool({
      templateRef: "t",
      replicas: 3,
      autoscale: { maxReplicas: 2 },
    });
    expect(bad).toEqual({
      ok: false,
      errors: ["spec.autoscale.maxReplicas: must be >= spec.replicas, the floor (2 < 3)"],
    });
    const short = validatePodWarmPool({
      templateRef: "t",
      autoscale: { maxReplicas: 2, windowSeconds: 1 },
    });
    expect(short.ok).toBe(false);
  });

  it("makes standbys up to the target, not spec.replicas, and reports it", () => {
    const o: PoolObservation = {
      pool: {
        name: "pool",
        namespace: "ns",
        uid: "u",
        generation: 1,
        spec: podWarmPoolSpecSchema.parse({
          templateRef: "python",
          replicas: 1,
          autoscale: { maxReplicas: 5 },
        }),
        status: {},
      },
      template: template(),
      templateHash: "h",
      standbys: [],
      desiredReplicas: 3,
      freshNames: ["a", "b", "c", "d", "e", "f"],
      now: "2026-12-05T00:00:00Z",
    };
    const plan = decidePool(o);
    expect(plan.actions.filter(a => a.type === "createPod")).toHaveLength(3);
    expect(plan.status.desiredReplicas).toBe(3);
    const plain = decidePool({ ...o, desiredReplicas: undefined });
    expect(plain.status.desiredReplicas).toBe(1);
  });
});
