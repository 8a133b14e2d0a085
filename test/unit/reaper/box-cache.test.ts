import type { PodBox } from "../../../capabilities/api/kinds";
import { BoxCache } from "../../../capabilities/reaper/box-cache";

const T0 = Date.parse("2026-11-30T10:00:00Z");
const box = (
  name: string,
  spec: object,
  status: object = {},
  annotations?: Record<string, string>,
) =>
  ({
    metadata: { namespace: "ns", name, annotations },
    spec: { templateRef: "t", ...spec },
    status,
  }) as unknown as PodBox;

describe("BoxCache", () => {
  it("reports a box once its idle deadline has passed, and only once", () => {
    const cache = new BoxCache();
    cache.update(
      box(
        "idle",
        { idleTimeoutSeconds: 60 },
        { phase: "Running", lastActivityAt: new Date(T0).toISOString() },
      ),
      T0,
    );
    cache.update(box("busy", {}, { phase: "Running" }), T0);
    expect(cache.due(T0 + 59_000)).toEqual([]);
    expect(cache.due(T0 + 60_000)).toEqual(["ns/idle"]);
    expect(cache.due(T0 + 120_000)).toEqual([]);
  });

  it("moves the deadline when activity is recorded", () => {
    const cache = new BoxCache();
    const status = { phase: "Running", lastActivityAt: new Date(T0).toISOString() };
    cache.update(box("b", { idleTimeoutSeconds: 60 }, status), T0);
    cache.update(
      box("b", { idleTimeoutSeconds: 60 }, status, {
        "pod.cubeplex.ai/last-activity": new Date(T0 + 50_000).toISOString(),
      }),
      T0 + 50_000,
    );
    expect(cache.due(T0 + 60_000)).toEqual([]);
    expect(cache.due(T0 + 110_000)).toEqual(["ns/b"]);
  });

  it("counts boxes per phase and forgets deleted ones", () => {
    const cache = new BoxCache();
    cache.update(box("a", {}, { phase: "Running" }));
    cache.update(box("b", {}, { phase: "Paused" }));
    cache.update(box("c", {}, {}));
    expect(cache.phases()).toEqual({ Running: 1, Paused: 1, Pending: 1 });
    cache.remove("ns", "a");
    expect(cache.size).toBe(2);
  });

  it("reports at once a box whose status lags its rules (paused, lease run out)", () => {
    const cache = new BoxCache();
    const lease = new Date(T0 - 1000).toISOString();
    cache.update(
      box(
        "p",
        { idleTimeoutSeconds: 1, leaseExpiresAt: lease },
        {
          phase: "Paused",
          reason: "IdlePaused",
          lastActivityAt: new Date(T0 - 60_000).toISOString(),
        },
      ),
      T0,
    );
    expect(cache.due(T0)).toEqual(["ns/p"]);
    cache.update(
      box("t", { leaseExpiresAt: lease }, { phase: "Terminated", reason: "LeaseExpired" }),
      T0,
    );
    expect(cache.due(T0)).toEqual([]);
  });
});
