import { readdirSync, readFileSync } from "node:fs";
import { shardName } from "../capabilities/shard/shard-of";
import { MODULE_NAMESPACE } from "./deployed-module";
import type { Kube, Obj } from "./kube";

/* The sharded watchers of a deployed module (deployed-module.ts): their Leases and Pods. */

export const WATCHER = "pepr-cubepod-watcher";
export const LEASES = `/apis/coordination.k8s.io/v1/namespaces/${MODULE_NAMESPACE}/leases`;
export const shardLease = (shard: number, count: number) =>
  `${LEASES}/cubepod-shard-${shardName(shard, count)}`;
const sleep = (ms: number) => new Promise(r => setTimeout(r, ms));

/** The holder of each shard's Lease ("" when free). */
export async function shardHolders(kube: Kube, count: number): Promise<string[]> {
  const r = await kube.get(LEASES);
  const byName = new Map<string, string>(
    r.body.items.map((l: Obj) => [l.metadata.name, l.spec?.holderIdentity ?? ""]),
  );
  return Array.from(
    { length: count },
    (_, i) => byName.get(`cubepod-shard-${shardName(i, count)}`) ?? "",
  );
}

/** Waits until the shards' holders satisfy `ok`; resolves with them. */
export async function waitShardHolders(
  kube: Kube,
  count: number,
  ok: (holders: string[]) => boolean,
  timeoutMs: number,
): Promise<string[]> {
  const deadline = Date.now() + timeoutMs;
  let last: string[] = [];
  while (Date.now() < deadline) {
    last = await shardHolders(kube, count);
    if (ok(last)) return last;
    await sleep(250);
  }
  throw new Error(`shard holders never settled: ${JSON.stringify(last)}`);
}

/** Every shard held, by `replicas` distinct replicas. */
export const heldBy = (replicas: number) => (holders: string[]) =>
  holders.every(Boolean) && new Set(holders).size === replicas;

/**
 * Waits until every shard is held by a replica running now (not one of an earlier install whose
 * Lease has yet to expire), by `replicas` distinct ones.
 */
export async function waitLiveHolders(
  kube: Kube,
  count: number,
  replicas: number,
  timeoutMs: number,
): Promise<string[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const holders = await waitShardHolders(kube, count, heldBy(replicas), deadline - Date.now());
    const pods = await watcherPods(kube);
    if (holders.every(h => podOfReplica(pods, h))) return holders;
    if (Date.now() > deadline) throw new Error(`shards held by gone replicas: ${holders}`);
    await sleep(250);
  }
}

/** The watcher's running Pods. */
export async function watcherPods(kube: Kube): Promise<Obj[]> {
  const r = await kube.get(
    `/api/v1/namespaces/${MODULE_NAMESPACE}/pods?labelSelector=app=${WATCHER}`,
  );
  return (r.body.items as Obj[]).filter(
    p => !p.metadata.deletionTimestamp && p.status?.phase === "Running",
  );
}

/** The Pod a replica runs in: a replica's identity is its Pod's name and a nonce. */
export const podOfReplica = (pods: Obj[], identity: string) =>
  pods.find(p => identity.startsWith(`${p.metadata.name}-`));

export async function scaleWatcher(kube: Kube, replicas: number): Promise<void> {
  const r = await kube.mergePatch(
    `/apis/apps/v1/namespaces/${MODULE_NAMESPACE}/deployments/${WATCHER}/scale`,
    { spec: { replicas } },
  );
  if (r.status !== 200) throw new Error(`scale ${WATCHER}: ${r.status} ${r.body.message}`);
}

/**
 * SIGKILL to the module's process in a Pod of the real node, from this host, as an OOM kill or a
 * crash would end it. Returns how many processes it killed.
 */
export function killModuleProcess(pod: Obj): number {
  const uid = pod.metadata.uid as string;
  const read = (file: string) => {
    try {
      return readFileSync(file, "utf8");
    } catch {
      return "";
    }
  };
  const pids = readdirSync("/proc").filter(pid => {
    if (!/^\d+$/.test(pid)) return false;
    const cgroup = read(`/proc/${pid}/cgroup`);
    const inPod = cgroup.includes(uid) || cgroup.includes(uid.replace(/-/g, "_"));
    return inPod && read(`/proc/${pid}/cmdline`).includes("controller.js");
  });
  for (const pid of pids) process.kill(Number(pid), "SIGKILL");
  return pids.length;
}

/** A replica's figures from its /metrics: resident memory and V8 heap in use (MiB), namespaces. */
export async function replicaFigures(pod: Obj) {
  const text = await fetch(`http://${pod.status.podIP}:8081/metrics`).then(r => r.text());
  const value = (name: string) => {
    const line = text.split("\n").find(l => l.startsWith(`${name} `));
    return line ? Number(line.split(" ")[1]) : NaN;
  };
  const mib = (bytes: number) => Math.round(bytes / 1048576);
  return {
    rssMiB: mib(value("process_resident_memory_bytes")),
    heapUsedMiB: mib(value("nodejs_heap_size_used_bytes")),
    namespaces: text.split("\n").filter(l => l.startsWith("cubepod_shard_namespace{")).length,
    activeSandboxes: value("cubepod_active_sandboxes"),
  };
}

/** `count` namespace names, the i-th in shard i. */
export function namespacesPerShard(prefix: string, count: number, of: (ns: string) => number) {
  const names: string[] = [];
  for (let n = 0; names.filter(Boolean).length < count; n++) {
    const name = `${prefix}-${n}`;
    names[of(name)] ??= name;
  }
  return names;
}
