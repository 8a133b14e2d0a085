import { Counter, Gauge, Histogram, Registry } from "prom-client";

/**
 * CubePod's own Prometheus registry. Pepr's metricsCollector has a private registry, no labels
 * and no histograms, and serves over HTTPS on the admission port; operator metrics need their own.
 */
export const registry = new Registry();

/** Filled at scrape time from the watch-fed box cache and standby index (no API calls). */
export const activeSandboxes = new Gauge({
  name: "cubepod_active_sandboxes",
  help: "PodBoxes in phase Running",
  registers: [registry],
});
export const pausedSandboxes = new Gauge({
  name: "cubepod_paused_sandboxes",
  help: "PodBoxes in phase Paused",
  registers: [registry],
});
export const warmPoolReady = new Gauge({
  name: "cubepod_warmpool_ready",
  help: "Ready, unclaimed standbys per warm pool",
  labelNames: ["namespace", "pool"],
  registers: [registry],
});

export const workqueueDepth = new Gauge({
  name: "cubepod_workqueue_depth",
  help: "Keys in a reconcile queue, by state: waiting, running, or delayed (a retry or requeue timer)",
  labelNames: ["queue", "state"],
  registers: [registry],
});

export const warmClaims = new Counter({
  name: "cubepod_warm_claims_total",
  help: "PodBoxes started by claiming a warm standby",
  labelNames: ["namespace", "pool"],
  registers: [registry],
});
export const claimIndexMisses = new Counter({
  name: "cubepod_claim_index_misses_total",
  help:
    "Warm claims that found no ready standby in the watch-fed index and read the pool; " +
    "found: whether the read had one (the index lagged) or not (the pool was empty)",
  labelNames: ["found"],
  registers: [registry],
});
export const coldStarts = new Counter({
  name: "cubepod_cold_starts_total",
  help: "PodBoxes started on new volumes (no standby)",
  registers: [registry],
});
export const forks = new Counter({
  name: "cubepod_forks_total",
  help: "PodBoxes started on volumes cloned from another box",
  registers: [registry],
});
export const rootfsResets = new Counter({
  name: "cubepod_rootfs_resets_total",
  help: "Rootfs resets (rootfsGeneration increased)",
  registers: [registry],
});
export const idlePauses = new Counter({
  name: "cubepod_idle_pauses_total",
  help: "PodBoxes paused by the reaper for idleness",
  registers: [registry],
});
export const terminations = new Counter({
  name: "cubepod_terminations_total",
  help: "PodBoxes terminated (by the spec or an expired lease)",
  labelNames: ["reason"],
  registers: [registry],
});
export const reconcileErrors = new Counter({
  name: "cubepod_reconcile_errors_total",
  help: "Reconcile runs that failed (retried with backoff) or ended in Failed",
  labelNames: ["kind", "permanent"],
  registers: [registry],
});

export const claimDuration = new Histogram({
  name: "cubepod_claim_duration_seconds",
  help: "From the PodBox's watch event to its Running status written, for warm claims",
  buckets: [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1],
  registers: [registry],
});
export const reaperPassDuration = new Gauge({
  name: "cubepod_reaper_last_pass_seconds",
  help: "Duration of the last reaper pass (scans the watch-fed cache, no API calls)",
  registers: [registry],
});
export const reaperBoxes = new Gauge({
  name: "cubepod_reaper_last_pass_boxes",
  help: "Boxes the last reaper pass looked at",
  registers: [registry],
});
export const shardHeld = new Gauge({
  name: "cubepod_shard_held",
  help: "1 for each shard this watcher replica holds (sharded watchers only)",
  labelNames: ["shard", "replica"],
  registers: [registry],
});
export const shardNamespaces = new Gauge({
  name: "cubepod_shard_namespace",
  help: "1 for each namespace with CubePod objects that this watcher replica serves, by shard",
  labelNames: ["shard", "namespace"],
  registers: [registry],
});
export const reconcileDuration = new Histogram({
  name: "cubepod_reconcile_duration_seconds",
  help: "Duration of one reconcile run",
  labelNames: ["kind"],
  buckets: [0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
  registers: [registry],
});

/** Counts a transition the reconciler just wrote, by its reason. */
export function countTransition(
  reason: string,
  labels: { namespace: string; pool?: string },
): void {
  switch (reason) {
    case "WarmPoolClaimed":
      warmClaims.inc({ namespace: labels.namespace, pool: labels.pool ?? "" });
      break;
    case "Started":
      coldStarts.inc();
      break;
    case "ForkCloned":
      forks.inc();
      break;
    case "RootFSReset":
      rootfsResets.inc();
      break;
    case "IdlePaused":
      idlePauses.inc();
      break;
    case "Terminated":
    case "LeaseExpired":
      terminations.inc({ reason });
      break;
  }
}
