import type { PodBox } from "../../../capabilities/api/kinds";
import { BoxCache } from "../../../capabilities/reaper/box-cache";
import { DeadlineTimers } from "../../../capabilities/reaper/deadline-timers";

const T0 = Date.parse("2026-11-30T10:00:00Z");
const box = (name: string, spec: object, status: object = {}) =>
  ({
    metadata: { namespace: "ns", name },
    spec: { templateRef: "t", ...spec },
    status: { phase: "Running", ...status },
  }) as unknown as PodBox;
const at = (ms: number) => new Date(ms).toISOString();

/** The reaper's wiring: the cache says whether a deadline stands, the timers say when to ask. */
function reaper() {
  const due: string[] = [];
  const cache = new BoxCache();
  const timers = new DeadlineTimers((key, now) => {
    if (cache.takeIfDue(key, now)) due.push(key);
    return cache.next(key);
  });
  const event = (b: PodBox) => {
    const { key, deadline } = cache.update(b, Date.now());
    timers.set(key, deadline);
  };
  return { due, cache, timers, event };
}

describe("DeadlineTimers with the BoxCache", () => {
  beforeEach(() => jest.useFakeTimers({ now: T0 }));
  afterEach(() => jest.useRealTimers());

  it("hands a box over at its expiry, with no pass, and once", () => {
    const r = reaper();
    r.event(box("b", { expiresAt: at(T0 + 2000) }));
    jest.advanceTimersByTime(1999);
    expect(r.due).toEqual([]);
    jest.advanceTimersByTime(10);
    expect(r.due).toEqual(["ns/b"]);
    expect(r.cache.due(Date.now())).toEqual([]);
    expect(r.timers.size).toBe(0);
  });

  it("moves the timer when the deadline moves, and keeps one timer per box", () => {
    const r = reaper();
    r.event(box("b", { expiresAt: at(T0 + 2000) }));
    r.event(box("b", { expiresAt: at(T0 + 2000) }));
    r.event(box("b", { expiresAt: at(T0 + 60_000) }));
    expect(r.timers.size).toBe(1);
    jest.advanceTimersByTime(30_000);
    expect(r.due).toEqual([]);
    jest.advanceTimersByTime(30_010);
    expect(r.due).toEqual(["ns/b"]);
  });

  it("drops the timer of a box that no longer has a deadline, or is cleared", () => {
    const r = reaper();
    r.event(box("gone", { expiresAt: at(T0 + 1000) }));
    r.event(box("kept", { expiresAt: at(T0 + 1000) }));
    r.timers.clear("ns/gone");
    r.event(box("kept", {}));
    expect(r.timers.size).toBe(0);
    jest.advanceTimersByTime(5000);
    expect(r.due).toEqual([]);
  });

  it("does not hand over again a deadline a scheduled pass already took", () => {
    const r = reaper();
    r.event(box("b", { expiresAt: at(T0 + 1000) }));
    expect(r.cache.due(T0 + 1000)).toEqual(["ns/b"]);
    jest.advanceTimersByTime(5000);
    expect(r.due).toEqual([]);
    expect(r.timers.size).toBe(0);
  });

  it("re-arms a deadline beyond a Node timer's reach instead of firing early", () => {
    const r = reaper();
    const far = T0 + 40 * 24 * 3600_000;
    r.event(box("far", { expiresAt: at(far) }));
    jest.advanceTimersByTime(2 ** 31);
    expect(r.due).toEqual([]);
    expect(r.timers.size).toBe(1);
    jest.advanceTimersByTime(far - Date.now() + 10);
    expect(r.due).toEqual(["ns/far"]);
  });

  it("hands a box over again at its next deadline when one changed nothing", () => {
    // Idle after 1 s, but leased for 8: the idle deadline changes nothing, the lease's end does.
    const r = reaper();
    const started = { lastActivityAt: at(T0) };
    r.event(box("b", { idleTimeoutSeconds: 1, leaseExpiresAt: at(T0 + 8000) }, started));
    jest.advanceTimersByTime(1010);
    expect(r.due).toEqual(["ns/b"]);
    expect(r.timers.size).toBe(1);
    jest.advanceTimersByTime(7000);
    expect(r.due).toEqual(["ns/b", "ns/b"]);
    expect(r.timers.size).toBe(0);
  });

  it("hands over at once a box whose status lags its rules", () => {
    const r = reaper();
    r.event(box("late", { expiresAt: at(T0 - 1000) }));
    jest.advanceTimersByTime(10);
    expect(r.due).toEqual(["ns/late"]);
  });
});
