import { K8s, Log } from "pepr";
import { WatchEvent } from "kubernetes-fluent-client";
import { PodBox } from "../api/kinds";
import {
  activeSandboxes,
  pausedSandboxes,
  reaperBoxes,
  reaperPassDuration,
  warmPoolReady,
} from "../metrics/registry";
import { startMetricsServer } from "../metrics/server";
import { BoxCache } from "./box-cache";
import { KubeError } from "../client/fast-client";
import { getObject, paths } from "../client/resources";
import { reconcileBoxSoon, standbyIndex } from "./box-reconciler";

/** What the reaper and the gauges read of every box; fed by {@link startRuntime}'s watch. */
export const boxCache = new BoxCache();

const watchState = { connected: false, detail: "not started" };
let reaping = false;

/**
 * One reaper pass (Pepr OnSchedule): every box whose idle or lease deadline has passed is
 * reconciled; the decision itself (pause, terminate) is the reconciler's. Reads only the cache,
 * so idle boxes cost no API call. Pepr does not await `run` nor catch its errors: this never
 * throws, and a pass still running makes the next one a no-op.
 */
export async function reaperPass(now = Date.now()): Promise<number> {
  if (reaping) return 0;
  reaping = true;
  const started = performance.now();
  try {
    const due = boxCache.due(now);
    due.forEach(key => reconcileBoxSoon(key));
    reaperPassDuration.set((performance.now() - started) / 1000);
    reaperBoxes.set(boxCache.size);
    return due.length;
  } catch (e) {
    Log.error({ error: String(e) }, "reaper pass failed");
    return 0;
  } finally {
    reaping = false;
  }
}

/**
 * /healthz: the watch reported no failure since it connected, and the API server it streams from
 * answers now. The second check is needed because a watch whose server went away can stay silent
 * until the client's last-seen limit (minutes); one cheap GET per probe (a 404 is an answer).
 */
async function watchHealth(): Promise<{ ok: boolean; detail: string }> {
  if (!watchState.connected) return { ok: false, detail: watchState.detail };
  try {
    // Any HTTP answer (a 404 here) shows the API server is there.
    const probe = getObject(paths.podBoxes("kube-system", "cubepod-healthz"));
    await Promise.race([
      probe.catch(e => {
        if (!(e instanceof KubeError)) throw e;
      }),
      new Promise((_, reject) => setTimeout(() => reject(new Error("no answer in 2 s")), 2000)),
    ]);
    return { ok: true, detail: watchState.detail };
  } catch (e) {
    return { ok: false, detail: `API server unreachable: ${(e as Error).message ?? e}` };
  }
}

/** True in the process that runs watches and schedules (Pepr's watcher, or `pepr dev`). */
export const isWatcher = () =>
  process.env.PEPR_WATCH_MODE === "true" || process.env.PEPR_MODE === "dev";

/**
 * Starts, in the watcher only: a watch of all PodBoxes that keeps the box cache and tells
 * /healthz whether watching works, and the metrics server (/metrics, /healthz on :8081).
 */
export function startRuntime(): void {
  if (!isWatcher()) return;
  const watcher = K8s(PodBox).Watch((box, phase) => {
    if (phase === "DELETED") boxCache.remove(box.metadata!.namespace!, box.metadata!.name!);
    else boxCache.update(box);
  });
  const set = (connected: boolean, detail: string) =>
    Object.assign(watchState, { connected, detail });
  watcher.events.on(WatchEvent.CONNECT, () => set(true, "watching PodBoxes"));
  watcher.events.on(WatchEvent.NETWORK_ERROR, (e: Error) =>
    set(false, `watch network error: ${e.message}`),
  );
  watcher.events.on(WatchEvent.RECONNECT, () => set(false, "watch reconnecting"));
  watcher.events.on(WatchEvent.GIVE_UP, (e: Error) => set(false, `watch gave up: ${e.message}`));
  watcher.events.on(WatchEvent.ABORT, (e: Error) => set(false, `watch aborted: ${e.message}`));
  watcher.start().catch(e => set(false, `watch failed to start: ${String(e)}`));

  startMetricsServer(watchHealth, () => {
    const phases = boxCache.phases();
    activeSandboxes.set(phases.Running ?? 0);
    pausedSandboxes.set(phases.Paused ?? 0);
    warmPoolReady.reset();
    for (const c of standbyIndex.counts())
      warmPoolReady.set({ namespace: c.namespace, pool: c.pool }, c.ready);
  });
}
