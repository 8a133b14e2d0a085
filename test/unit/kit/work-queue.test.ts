import { backoff, WorkQueue } from "../../../capabilities/kit/work-queue";

const tick = (ms = 0) => new Promise(r => setTimeout(r, ms));
const opts = { concurrency: 2, baseDelayMs: 5, maxDelayMs: 20 };

/** Resolves when `predicate` holds, checking after each macrotask (bounded). */
async function until(predicate: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !predicate(); i++) await tick(2);
  expect(predicate()).toBe(true);
}

describe("WorkQueue", () => {
  it("runs one key at a time, and once more for what arrived during a run", async () => {
    const runs: string[] = [];
    let release!: () => void;
    const q = new WorkQueue(async key => {
      runs.push(key);
      if (runs.length === 1) await new Promise<void>(r => (release = r));
    }, opts);
    q.add("a");
    await tick();
    q.add("a");
    q.add("a");
    q.add("a");
    expect(runs).toEqual(["a"]);
    release();
    await until(() => runs.length === 2);
    await tick(5);
    expect(runs).toEqual(["a", "a"]);
  });

  it("merges requests for a key that waits", async () => {
    const runs: string[] = [];
    const q = new WorkQueue(async key => void runs.push(key), { ...opts, concurrency: 1 });
    q.add("a");
    q.add("b");
    q.add("b");
    q.add("b");
    await until(() => runs.length === 2);
    await tick(5);
    expect(runs).toEqual(["a", "b"]);
  });

  it("never runs more keys at once than its concurrency", async () => {
    let active = 0;
    let most = 0;
    let done = 0;
    const q = new WorkQueue(async () => {
      active++;
      most = Math.max(most, active);
      await tick(2);
      active--;
      done++;
    }, opts);
    for (let i = 0; i < 10; i++) q.add(`k${i}`);
    await until(() => done === 10);
    expect(most).toBe(2);
  });

  it("gives keys added first the urgent slots when the regular ones are busy", async () => {
    const started: string[] = [];
    const releases: (() => void)[] = [];
    const q = new WorkQueue(
      async key => {
        started.push(key);
        await new Promise<void>(r => releases.push(r));
      },
      { ...opts, concurrency: 1, urgentConcurrency: 2 },
    );
    q.add("cold-1");
    q.add("cold-2");
    q.addFirst("claim-1");
    q.addFirst("claim-2");
    q.addFirst("claim-3");
    await tick();
    // One regular slot (cold-1), two urgent ones; cold-2 and claim-3 wait.
    expect(started).toEqual(["cold-1", "claim-1", "claim-2"]);
    releases.shift()!();
    await tick();
    expect(started).toEqual(["cold-1", "claim-1", "claim-2", "claim-3"]);
    while (releases.length > 0) {
      releases.shift()!();
      await tick();
    }
    expect(started).toHaveLength(5);
  });

  it("runs a key once after a burst of quiet-requests, and no later than the longest wait", async () => {
    // On the fake clock, so that the quiet time is exact and no timer drift can fail the test.
    jest.useFakeTimers();
    try {
      const runs: number[] = [];
      const start = Date.now();
      const q = new WorkQueue(async () => void runs.push(Date.now() - start), opts);
      for (let i = 0; i < 4; i++) {
        q.addWhenQuiet("pool", 30, 1000);
        await jest.advanceTimersByTimeAsync(10);
      }
      // Quiet 30 ms after the last of four requests 10 ms apart: at 60, not before.
      await jest.advanceTimersByTimeAsync(19);
      expect(runs).toEqual([]);
      await jest.advanceTimersByTimeAsync(1);
      expect(runs).toEqual([60]);
      // Requests that never go quiet still get a run within the longest wait.
      for (let i = 0; i < 12; i++) {
        q.addWhenQuiet("capped", 30, 50);
        await jest.advanceTimersByTimeAsync(10);
      }
      expect(runs[1]).toBe(110);
    } finally {
      jest.useRealTimers();
    }
  });

  it("retries a failing key with growing delays until it succeeds", async () => {
    const attempts: number[] = [];
    let calls = 0;
    const q = new WorkQueue(
      async () => {
        calls++;
        if (calls < 4) throw new Error("HTTP 503");
      },
      { ...opts, onError: (_k, _e, attempt) => attempts.push(attempt) },
    );
    q.add("a");
    await until(() => calls === 4);
    expect(attempts).toEqual([1, 2, 3]);
  });

  it("runs a key again when the worker asks for a requeue", async () => {
    let calls = 0;
    const q = new WorkQueue(async () => (++calls < 3 ? { requeueAfterMs: 3 } : undefined), opts);
    q.add("a");
    await until(() => calls === 3);
    expect(q.stats()).toEqual({ waiting: 0, running: 0, delayed: 0 });
  });

  it("runs a delayed key at once when an event asks for it", async () => {
    let calls = 0;
    const q = new WorkQueue(async () => void calls++, opts);
    q.addAfter("a", 60_000);
    expect(q.stats().delayed).toBe(1);
    q.add("a");
    await until(() => calls === 1);
    expect(q.stats().delayed).toBe(0);
  });
});

describe("backoff", () => {
  it("doubles per attempt up to the cap, with at most 20% jitter below", () => {
    const none = () => 1;
    expect([1, 2, 3, 4, 5, 9].map(n => backoff(n, 200, 3000, none))).toEqual([
      200, 400, 800, 1600, 3000, 3000,
    ]);
    expect(backoff(1, 200, 3000, () => 0)).toBe(160);
  });
});
