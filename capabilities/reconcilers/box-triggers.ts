import { a, K8s } from "pepr";
import { CubePodTemplate, PodBox } from "../api/kinds";
import { LABEL_BOX } from "../manifests/labels";
import { boxKey, boxQueue, enqueueBox } from "./box-reconciler";

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

/** Watch of PodTemplates: boxes waiting for (or running without) their template look again. */
export async function onTemplateChange(tpl: CubePodTemplate): Promise<void> {
  const namespace = tpl.metadata!.namespace!;
  const boxes = await K8s(PodBox).InNamespace(namespace).Get();
  for (const box of boxes.items) {
    if (box.spec?.templateRef === tpl.metadata!.name)
      boxQueue.add(boxKey(namespace, box.metadata!.name!));
  }
}
