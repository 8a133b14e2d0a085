import { podBoxSpecSchema } from "../../../capabilities/api/podbox";
import {
  effectiveState,
  idleDeadline,
  lastActivity,
  nextDeadline,
} from "../../../capabilities/reaper/activity";

const T0 = Date.parse("2026-11-30T10:00:00Z");
const at = (secondsAfterT0: number) => new Date(T0 + secondsAfterT0 * 1000).toISOString();
const box = (spec: object, lastActivityAt = at(0), annotation?: string) => ({
  spec: podBoxSpecSchema.parse({ templateRef: "t", ...spec }),
  status: { lastActivityAt },
  lastActivityAnnotation: annotation,
});

describe("idle and lease rules", () => {
  it("takes the newest of the annotation and the last start as the last activity", () => {
    expect(lastActivity(box({}, at(0), at(30)))).toBe(T0 + 30_000);
    expect(lastActivity(box({}, at(50), at(30)))).toBe(T0 + 50_000);
    expect(lastActivity({ ...box({}), status: {} })).toBeUndefined();
  });

  it("reads only RFC 3339 times: JavaScript's looser dates are not activity", () => {
    for (const bad of ["2030", "Tue, 01 Dec 2026 10:00:00 GMT", "2026-12-01", "soon"]) {
      expect(lastActivity(box({}, at(0), bad))).toBe(T0);
    }
    expect(lastActivity(box({}, at(0), "2026-11-30T11:00:00+01:00"))).toBe(T0);
    expect(lastActivity(box({}, at(0), "2026-11-30T10:00:30.5Z"))).toBe(T0 + 30_500);
  });

  it("leaves a box without an idle timeout running forever", () => {
    expect(idleDeadline(box({}))).toBeUndefined();
    expect(idleDeadline(box({ idleTimeoutSeconds: 0 }))).toBeUndefined();
    expect(effectiveState(box({}), T0 + 1e9)).toEqual({ desired: "Running" });
  });

  it("pauses a box idle past its timeout", () => {
    const b = box({ idleTimeoutSeconds: 60 });
    expect(effectiveState(b, T0 + 59_999)).toEqual({ desired: "Running" });
    expect(effectiveState(b, T0 + 60_000)).toEqual({ desired: "Paused", reason: "IdlePaused" });
  });

  it("never pauses a box with a live lease", () => {
    const b = box({ idleTimeoutSeconds: 60, leaseExpiresAt: at(3600) });
    expect(effectiveState(b, T0 + 3_599_000)).toEqual({ desired: "Running" });
  });

  it("pauses an idle box once its lease has expired, then terminates it on a later pass", () => {
    const b = box({ idleTimeoutSeconds: 60, leaseExpiresAt: at(120) });
    expect(effectiveState(b, T0 + 90_000)).toEqual({ desired: "Running" });
    expect(effectiveState(b, T0 + 120_000)).toEqual({ desired: "Paused", reason: "IdlePaused" });
    const paused = { ...b, status: { ...b.status, phase: "Paused" as const } };
    expect(effectiveState(paused, T0 + 130_000)).toEqual({
      desired: "Terminated",
      reason: "LeaseExpired",
    });
  });

  it("keeps a box its lease ended terminated, whatever activity comes later", () => {
    const ended = box({ leaseExpiresAt: at(10) }, at(0), at(500));
    const status = {
      ...ended.status,
      phase: "Terminated" as const,
      reason: "LeaseExpired" as const,
    };
    expect(effectiveState({ ...ended, status }, T0 + 600_000)).toEqual({
      desired: "Terminated",
      reason: "LeaseExpired",
    });
    // A new lease brings it back.
    const renewed = box({ leaseExpiresAt: at(10_000) }, at(0), at(500));
    expect(effectiveState({ ...renewed, status }, T0 + 600_000)).toEqual({ desired: "Running" });
  });

  it("terminates a paused box whose lease expired, and keeps an unleased paused box", () => {
    expect(
      effectiveState(box({ desiredState: "Paused", leaseExpiresAt: at(10) }), T0 + 10_000),
    ).toEqual({
      desired: "Terminated",
      reason: "LeaseExpired",
    });
    expect(effectiveState(box({ desiredState: "Paused" }), T0 + 1e9)).toEqual({
      desired: "Paused",
    });
  });

  it("lets a running box with an expired lease but no idleness run", () => {
    expect(effectiveState(box({ leaseExpiresAt: at(10) }), T0 + 1e9)).toEqual({
      desired: "Running",
    });
  });

  it("ends an idle pause when new activity is recorded", () => {
    const idle = box({ idleTimeoutSeconds: 60 });
    expect(effectiveState(idle, T0 + 100_000).desired).toBe("Paused");
    const touched = box({ idleTimeoutSeconds: 60 }, at(0), at(99));
    expect(effectiveState(touched, T0 + 100_000)).toEqual({ desired: "Running" });
  });

  it("respects a spec that says Terminated", () => {
    expect(
      effectiveState(box({ desiredState: "Terminated", idleTimeoutSeconds: 1 }), T0 + 1e9),
    ).toEqual({
      desired: "Terminated",
    });
  });

  it("ends a box at its expiry, whatever its lease or activity: terminated, or paused", () => {
    const live = { leaseExpiresAt: at(9999), idleTimeoutSeconds: 0 };
    const ends = box({ ...live, expiresAt: at(60) }, at(0), at(59));
    expect(effectiveState(ends, T0 + 59_999)).toEqual({ desired: "Running" });
    expect(effectiveState(ends, T0 + 60_000)).toEqual({ desired: "Terminated", reason: "Expired" });
    const pauses = box({ ...live, expiresAt: at(60), onExpiry: "Pause" });
    expect(effectiveState(pauses, T0 + 60_000)).toEqual({ desired: "Paused", reason: "Expired" });
    // A later expiry (a client's new timeout) lets it run again; a spec's Terminated stays.
    expect(effectiveState(box({ expiresAt: at(120) }), T0 + 60_000)).toEqual({
      desired: "Running",
    });
    expect(effectiveState(box({ desiredState: "Terminated", expiresAt: at(0) }), T0)).toEqual({
      desired: "Terminated",
    });
    expect(nextDeadline(ends, T0)).toBe(T0 + 60_000);
    // Paused by its spec, it keeps until resumed.
    expect(effectiveState(box({ desiredState: "Paused", expiresAt: at(0) }), T0 + 1)).toEqual({
      desired: "Paused",
    });
  });

  it("reports the next deadline still ahead", () => {
    const b = box({ idleTimeoutSeconds: 60, leaseExpiresAt: at(30) });
    expect(nextDeadline(b, T0)).toBe(T0 + 30_000);
    expect(nextDeadline(b, T0 + 30_000)).toBe(T0 + 60_000);
    expect(nextDeadline(b, T0 + 60_000)).toBeUndefined();
  });
});
