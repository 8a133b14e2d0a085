import { ClaimActivity } from "../../../capabilities/claim/claim-activity";
import { DeferredWrites, quietDelay } from "../../../capabilities/kit/deferred-writes";

const OPTS = { quietMs: 100, maxDelayMs: 5000 };

describe("quietDelay", () => {
  it("is 0 when no claim ever started, or claims have been quiet long enough", () => {
    expect(quietDelay(1000, undefined, 1000, OPTS)).toBe(0);
    expect(quietDelay(1000, 900, 950, OPTS)).toBe(0);
  });

  it("waits until claims have been quiet for quietMs", () => {
    expect(quietDelay(1000, 980, 990, OPTS)).toBe(80);
  });

  it("waits no longer than maxDelayMs after the event was recorded, claims or not", () => {
    expect(quietDelay(6600, 6590, 1500, OPTS)).toBe(0);
    expect(quietDelay(6600, 6590, 1600, OPTS)).toBe(0);
    expect(quietDelay(6600, 6590, 1650, OPTS)).toBe(50);
  });
});

describe("DeferredWrites", () => {
  let clock = 0;
  let written: string[];
  let failNext = false;
  let claims: ClaimActivity;
  const sink = (over: Partial<ConstructorParameters<typeof DeferredWrites>[1]> = {}) => {
    const s = new DeferredWrites<{ path: string; event: { reason: string } }>(
      async e => {
        if (failNext) {
          failNext = false;
          throw new Error("HTTP 500");
        }
        written.push(e.event.reason);
      },
      { ...OPTS, concurrency: 2, capacity: 10, ...over },
      claims,
    );
    return Object.assign(s, { claimStarted: () => claims.started() });
  };
  const advance = async (ms: number) => {
    clock += ms;
    await jest.advanceTimersByTimeAsync(ms);
  };

  beforeEach(() => {
    jest.useFakeTimers();
    clock = 0;
    claims = new ClaimActivity(() => clock);
    written = [];
  });
  afterEach(() => jest.useRealTimers());

  it("writes at once when no claim is under way", async () => {
    const s = sink();
    s.record({ path: "/e", event: { reason: "Started" } });
    await advance(0);
    expect(written).toEqual(["Started"]);
  });

  it("holds events while claims keep coming, then writes them in order", async () => {
    const s = sink();
    s.claimStarted();
    s.record({ path: "/e", event: { reason: "A" } });
    await advance(60);
    s.claimStarted();
    s.record({ path: "/e", event: { reason: "B" } });
    s.record({ path: "/e", event: { reason: "C" } });
    await advance(60);
    expect(written).toEqual([]);
    await advance(40);
    expect(written).toEqual(["A", "B", "C"]);
  });

  it("writes an event that has waited maxDelayMs even while claims go on", async () => {
    const s = sink({ maxDelayMs: 300 });
    s.record({ path: "/e", event: { reason: "Old" } });
    for (let t = 0; t < 400; t += 50) {
      s.claimStarted();
      await advance(50);
    }
    expect(written).toEqual(["Old"]);
  });

  it("holds events while a box waits to claim or a claim is in flight, however long ago it started", async () => {
    const s = sink();
    claims.queued("ns/a");
    s.record({ path: "/e", event: { reason: "A" } });
    await advance(500);
    expect(written).toEqual([]);
    let settle!: () => void;
    claims.taken("ns/a");
    const claim = claims.during(() => new Promise<void>(r => (settle = r)));
    await advance(500);
    expect(written).toEqual([]);
    settle();
    await claim;
    await advance(60);
    expect(written).toEqual([]);
    await advance(40);
    expect(written).toEqual(["A"]);
  });

  it("waits no longer than maxDelayMs for a box that waits to claim", async () => {
    const s = sink({ maxDelayMs: 300 });
    claims.queued("ns/a");
    s.record({ path: "/e", event: { reason: "Old" } });
    await advance(300);
    expect(written).toEqual(["Old"]);
  });

  it("goes on after a failed write, and drops the oldest beyond its capacity", async () => {
    const dropped: number[] = [];
    const s = sink({ capacity: 2, onDropped: n => dropped.push(n) });
    s.claimStarted();
    for (const reason of ["A", "B", "C"]) s.record({ path: "/e", event: { reason } });
    failNext = true;
    await advance(100);
    expect(written).toEqual(["C"]);
    expect(dropped).toEqual([1]);
    s.record({ path: "/e", event: { reason: "D" } });
    await advance(0);
    expect(written).toEqual(["C", "D"]);
  });
});

describe("ClaimActivity", () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it("counts a claim in flight until it settles, failed or not, and marks when it started", async () => {
    const clock = new ClaimActivity(() => 42);
    let finish!: () => void;
    const ok = clock.during(() => new Promise<void>(r => (finish = r)));
    const failed = clock.during(() => Promise.reject(new Error("HTTP 422")));
    expect(clock.last).toBe(42);
    expect(new ClaimActivity().last).toBeUndefined();
    let released = false;
    void clock.noneInFlight(60_000).then(() => (released = true));
    await expect(failed).rejects.toThrow("HTTP 422");
    await Promise.resolve();
    // One claim still in flight: the waiter waits.
    expect(released).toBe(false);
    finish();
    await ok;
    await Promise.resolve();
    expect(released).toBe(true);
  });

  it("lets a waiter go once no claim is in flight, or after its longest wait", async () => {
    const clock = new ClaimActivity();
    let released = 0;
    await clock.noneInFlight(1000).then(() => released++);
    expect(released).toBe(1);

    let finish!: () => void;
    const claim = clock.during(() => new Promise<void>(r => (finish = r)));
    void clock.noneInFlight(1000).then(() => released++);
    await jest.advanceTimersByTimeAsync(500);
    expect(released).toBe(1);
    finish();
    await claim;
    await jest.advanceTimersByTimeAsync(0);
    expect(released).toBe(2);

    void clock.during(() => new Promise<void>(() => undefined));
    void clock.noneInFlight(1000).then(() => released++);
    await jest.advanceTimersByTimeAsync(999);
    expect(released).toBe(2);
    await jest.advanceTimersByTimeAsync(1);
    expect(released).toBe(3);
  });
});
