import type { a } from "pepr";
import type { CubePodTemplate, PodBox, PodWarmPool } from "../api/kinds";
import { listObjects, paths } from "../client/resources";
import { LABEL_BOX, LABEL_POOL } from "../manifests/labels";
import { enqueueBox, enqueueBoxOfPod, reconcileBoxSoon, standbyIndex } from "./box-reconciler";
import { standbyWatchLags } from "./failpoint";
import { objectKey } from "./keys";
import { enqueuePool, poolQueue, replenishSoon } from "./pool-reconciler";
import { reaperPass } from "./runtime";

/** Reconcile binding of PodBox: every change of a box goes through its queue lane. */
export async function onBoxChange(box: PodBox): Promise<void> {
  enqueueBox(box);
}

/** Watch of sandbox Pods: a Pod's phase, IP and deletion drive its box. */
export async function onSandboxPod(pod: a.Pod, phase?: string): Promise<void> {
  const box = pod.metadata?.labels?.[LABEL_BOX];
  if (box && pod.metadata?.namespace)
    enqueueBoxOfPod(pod.metadata.namespace, box, pod, phase === "DELETED");
}

/** Watch of PodTemplates: its boxes look again, its pools replace their stale standbys. */
export async function onTemplateChange(tpl: CubePodTemplate): Promise<void> {
  const namespace = tpl.metadata!.namespace!;
  const name = tpl.metadata!.name;
  const [boxes, pools] = await Promise.all([
    listObjects<PodBox>(paths.podBoxes(namespace)),
    listObjects<PodWarmPool>(paths.podWarmPools(namespace)),
  ]);
  for (const box of boxes) {
    if (box.spec?.templateRef === name) reconcileBoxSoon(objectKey(namespace, box.metadata!.name!));
  }
  for (const pool of pools) {
    if (pool.spec?.templateRef === name) poolQueue.add(objectKey(namespace, pool.metadata!.name!));
  }
}

/** Reconcile binding of PodWarmPool: a new or changed pool is reconciled at once. */
export async function onPoolChange(pool: PodWarmPool): Promise<void> {
  enqueuePool(pool);
}

/** Watch of standby Pods: the index of ready standbys follows them; their pool looks again soon. */
export async function onStandbyPod(pod: a.Pod): Promise<void> {
  if (!standbyWatchLags) standbyIndex.observe(pod);
  wakePool(pod);
}

/** A standby Pod deleted, or claimed (it left the pool's label selection). */
export async function onStandbyPodGone(pod: a.Pod): Promise<void> {
  if (!standbyWatchLags) standbyIndex.observe(pod, true);
  wakePool(pod);
}

function wakePool(pod: a.Pod): void {
  const pool = pod.metadata?.labels?.[LABEL_POOL];
  if (pool) replenishSoon(objectKey(pod.metadata!.namespace!, pool));
}

/** The reaper's schedule (see runtime.ts). */
export function runReaper(): void {
  void reaperPass();
}
