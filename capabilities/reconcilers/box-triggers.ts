import { a, K8s } from "pepr";
import { CubePodTemplate, PodBox, PodWarmPool } from "../api/kinds";
import { LABEL_BOX, LABEL_POOL } from "../manifests/labels";
import { boxKey, boxQueue, enqueueBox, standbyIndex } from "./box-reconciler";
import { poolQueue, REPLENISH_DELAY_MS } from "./pool-reconciler";
import { reaperPass } from "./runtime";

/** Reconcile binding of PodBox: every change of a box goes through its queue lane. */
export async function onBoxChange(box: PodBox): Promise<void> {
  enqueueBox(box);
}

/**
 * Finalize binding of PodBox. Pepr calls it only on MODIFIED events of a box being deleted, which
 * a restarted module may never see; so it only makes sure the box is reconciled, and the
 * reconciler itself removes the finalizer once the API server shows the cleanup done.
 */
export async function onBoxFinalize(box: PodBox): Promise<boolean> {
  boxQueue.add(boxKey(box.metadata!.namespace!, box.metadata!.name!));
  return false;
}

/** Watch of sandbox Pods: a Pod's phase, IP and deletion drive its box. */
export async function onSandboxPod(pod: a.Pod): Promise<void> {
  const box = pod.metadata?.labels?.[LABEL_BOX];
  if (box && pod.metadata?.namespace) boxQueue.add(boxKey(pod.metadata.namespace, box));
}

/** Watch of PodTemplates: its boxes look again, its pools replace their stale standbys. */
export async function onTemplateChange(tpl: CubePodTemplate): Promise<void> {
  const namespace = tpl.metadata!.namespace!;
  const name = tpl.metadata!.name;
  const [boxes, pools] = await Promise.all([
    K8s(PodBox).InNamespace(namespace).Get(),
    K8s(PodWarmPool).InNamespace(namespace).Get(),
  ]);
  for (const box of boxes.items) {
    if (box.spec?.templateRef === name) boxQueue.add(boxKey(namespace, box.metadata!.name!));
  }
  for (const pool of pools.items) {
    if (pool.spec?.templateRef === name) poolQueue.add(boxKey(namespace, pool.metadata!.name!));
  }
}

/** Reconcile binding of PodWarmPool: a new or changed pool is reconciled at once. */
export async function onPoolChange(pool: PodWarmPool): Promise<void> {
  poolQueue.add(boxKey(pool.metadata!.namespace!, pool.metadata!.name!));
}

/** Watch of standby Pods: the index of ready standbys follows them; their pool looks again soon. */
export async function onStandbyPod(pod: a.Pod): Promise<void> {
  standbyIndex.observe(pod);
  wakePool(pod);
}

/** A standby Pod deleted, or claimed (it left the pool's label selection). */
export async function onStandbyPodGone(pod: a.Pod): Promise<void> {
  standbyIndex.observe(pod, true);
  wakePool(pod);
}

function wakePool(pod: a.Pod): void {
  const pool = pod.metadata?.labels?.[LABEL_POOL];
  if (pool) poolQueue.addAfter(boxKey(pod.metadata!.namespace!, pool), REPLENISH_DELAY_MS);
}

/** The reaper's schedule (see runtime.ts). */
export function runReaper(): void {
  void reaperPass();
}
