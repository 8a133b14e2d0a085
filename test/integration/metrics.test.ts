import { readFileSync } from "node:fs";
import { get } from "node:http";
import { join } from "node:path";
import { cluster, CLUSTER_DIR, Kube, paths } from "../../testkit/kube";
import { podTemplate } from "../../testkit/objects";
import { inNamespace, useTestNamespace } from "./lifecycle-helpers";

const kube = new Kube();
let ns: string;
let h: ReturnType<typeof inNamespace>;
const BASE = "http://127.0.0.1:8081";

useTestNamespace(kube, "it-metrics", podTemplate("python"), (n, helpers) => {
  ns = n;
  h = helpers;
});

async function scrape(): Promise<Map<string, number>> {
  const text = await (await fetch(`${BASE}/metrics`)).text();
  const values = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (!line.startsWith("cubepod_")) continue;
    const i = line.lastIndexOf(" ");
    values.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  return values;
}
/**
 * Scrapes until `check` holds: the gauges follow a watch, a moment behind the API server, and a
 * pool's count waits for its new standby (its claims bound at the first consumer, then started).
 */
async function eventually(
  check: (m: Map<string, number>) => boolean,
): Promise<Map<string, number>> {
  for (let i = 0; i < 600; i++) {
    const m = await scrape();
    if (check(m)) return m;
    await new Promise(r => setTimeout(r, 100));
  }
  throw new Error(
    `metrics never matched; last: ${JSON.stringify([...(await scrape()).entries()].slice(0, 40))}`,
  );
}
const v = (m: Map<string, number>, name: string) => m.get(name) ?? 0;

/** The gauges equal what the API server holds (boxes of other tests included). */
async function gaugesMatchAPI(): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const boxes = (await kube.get("/apis/pod.cubeplex.ai/v1alpha1/podboxes")).body.items as {
      status?: { phase?: string };
    }[];
    const count = (phase: string) => boxes.filter(b => b.status?.phase === phase).length;
    const m = await scrape();
    if (
      v(m, "cubepod_active_sandboxes") === count("Running") &&
      v(m, "cubepod_paused_sandboxes") === count("Paused")
    ) {
      return;
    }
    await new Promise(r => setTimeout(r, 100));
  }
  throw new Error("the gauges never matched the API server");
}

describe("metrics and health on :8081 (plain HTTP)", () => {
  it("/healthz answers ok while the watch works", async () => {
    const r = await fetch(`${BASE}/healthz`);
    expect(r.status).toBe(200);
    expect(await r.text()).toBe("ok: watching PodBoxes\n");
  });

  it("/metrics has every CubePod metric, and the process's own", async () => {
    const text = await (await fetch(`${BASE}/metrics`)).text();
    for (const name of [
      "process_resident_memory_bytes",
      "nodejs_heap_size_used_bytes",
      "nodejs_eventloop_lag_p99_seconds",
      "cubepod_active_sandboxes",
      "cubepod_paused_sandboxes",
      "cubepod_warmpool_ready",
      "cubepod_warm_claims_total",
      "cubepod_cold_starts_total",
      "cubepod_claim_index_misses_total",
      "cubepod_forks_total",
      "cubepod_rootfs_resets_total",
      "cubepod_idle_pauses_total",
      "cubepod_terminations_total",
      "cubepod_reconcile_errors_total",
      "cubepod_claim_duration_seconds",
      "cubepod_reconcile_duration_seconds",
      "cubepod_workqueue_depth",
    ]) {
      expect(text).toContain(`# TYPE ${name} `);
    }
    expect(text).toMatch(/^cubepod_workqueue_depth\{queue="PodBox",state="waiting"\} \d+$/m);
  });

  it("moves as boxes start, fork, reset, pause and terminate", async () => {
    const m0 = await scrape();
    await h.createBox("m1", { templateRef: "python" });
    await h.waitPhase("m1", "Running");
    await gaugesMatchAPI();
    await h.createBox("m1-fork", { templateRef: "python", forkFrom: "m1" });
    await h.waitPhase("m1-fork", "Running", "ForkCloned");
    await h.patchBox("m1", { rootfsGeneration: 2 });
    await h.waitPhase("m1", "Running", "RootFSReset");
    await h.patchBox("m1-fork", { desiredState: "Paused" });
    await h.waitPhase("m1-fork", "Paused");
    await h.patchBox("m1", { desiredState: "Terminated" });
    await h.waitPhase("m1", "Terminated");
    await gaugesMatchAPI();
    const m = await eventually(
      m => v(m, "cubepod_forks_total") === v(m0, "cubepod_forks_total") + 1,
    );
    expect(v(m, "cubepod_cold_starts_total")).toBe(v(m0, "cubepod_cold_starts_total") + 1);
    expect(v(m, "cubepod_forks_total")).toBe(v(m0, "cubepod_forks_total") + 1);
    expect(v(m, "cubepod_rootfs_resets_total")).toBe(v(m0, "cubepod_rootfs_resets_total") + 1);
    const term = 'cubepod_terminations_total{reason="Terminated"}';
    expect(v(m, term)).toBe(v(m0, term) + 1);
  });

  it("counts warm claims, their latency, and the ready standbys per pool", async () => {
    await kube.mustCreate(paths.podwarmpools(ns), {
      apiVersion: "pod.cubeplex.ai/v1alpha1",
      kind: "PodWarmPool",
      metadata: { name: "mp" },
      spec: { templateRef: "python", replicas: 2 },
    });
    const ready = `cubepod_warmpool_ready{namespace="${ns}",pool="mp"}`;
    const claims = `cubepod_warm_claims_total{namespace="${ns}",pool="mp"}`;
    await eventually(m => v(m, ready) === 2);
    const before = await scrape();
    await h.createBox("mc", { warmPoolRef: "mp" });
    await h.waitPhase("mc", "Running", "WarmPoolClaimed");
    const m = await eventually(m => v(m, claims) === 1 && v(m, ready) === 2);
    expect(v(m, "cubepod_claim_duration_seconds_count")).toBe(
      v(before, "cubepod_claim_duration_seconds_count") + 1,
    );
  });

  it("/healthz fails while the API server (and so the watch) is gone, and recovers with it", async () => {
    // A new connection per probe, as a kubelet's: \`cluster()\` blocks this process for longer
    // than the server keeps an idle connection, and a pooled one would then be reused closed.
    const health = () =>
      new Promise<number>((resolve, reject) =>
        get(`${BASE}/healthz`, { agent: false }, res => {
          res.resume();
          resolve(res.statusCode ?? 0);
        }).on("error", reject),
      );
    const until = async (code: number) => {
      for (let i = 0; i < 150 && (await health()) !== code; i++)
        await new Promise(r => setTimeout(r, 200));
      return health();
    };
    expect(await health()).toBe(200);
    // As a crash would: no graceful shutdown.
    process.kill(
      Number(readFileSync(join(CLUSTER_DIR, "pids", "kube-apiserver.pid"), "utf8")),
      "SIGKILL",
    );
    expect(await until(503)).toBe(503);
    cluster("up", "--no-module");
    expect(await until(200)).toBe(200);
  });
});
