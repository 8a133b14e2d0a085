import type { V1Pod } from "@kubernetes/client-node";
import type { PodTemplateSpec } from "../api/podtemplate";
import type { ObjectAction } from "../kit/object-actions";
import { templateOwnerRef } from "../manifests/owner";
import { buildSeed, seedKey, seedName, seedsRootfs } from "../manifests/seed";

/** A template's seed PVC or fill Pod, as the decision needs it. */
export type ObservedSeedObject = {
  name: string;
  /** Its seed key label. */
  key?: string;
  deleting: boolean;
};

/** Everything one reconcile of a template's seed looks at. */
export type SeedObservation = {
  namespace: string;
  /** undefined: the template is gone, being deleted, or its spec is invalid. */
  template?: { name: string; uid: string; spec: PodTemplateSpec };
  /** Its seed PVCs (controlled by it), with whether each is filled. */
  pvcs: (ObservedSeedObject & { filled: boolean })[];
  /** Its fill Pods (controlled by it), with their phase. */
  pods: (ObservedSeedObject & { phase?: string })[];
};

/**
 * Decides what keeps a template's seed as its spec asks (`rootfs.seed`, manifests/seed.ts): one
 * PVC for the current key, filled once by its own Pod, marked filled when that Pod Succeeded,
 * and nothing else. A seed of an older key goes once the current one is filled (clones from it
 * may still be starting until then), or at once when no seed is wanted. Pure and idempotent:
 * a template whose seed is filled and alone gets no action.
 */
export function decideSeed(o: SeedObservation): ObjectAction[] {
  const tpl = o.template;
  const key = tpl && seedsRootfs(tpl.spec) ? seedKey(tpl.spec) : undefined;
  const name = tpl && key ? seedName(tpl.name, key) : undefined;
  const current = o.pvcs.find(p => p.name === name && p.key === key);
  const filled = current?.filled === true && !current.deleting;
  const actions: ObjectAction[] = [];

  for (const pod of o.pods) {
    const needed = current && !current.deleting && !filled && pod.name === name;
    if (!needed && !pod.deleting) actions.push({ type: "deletePod", name: pod.name });
  }
  for (const pvc of o.pvcs) {
    if (pvc === current || pvc.deleting) continue;
    if (!key || filled) actions.push({ type: "deletePVC", name: pvc.name });
  }
  if (!tpl || !key || filled || current?.deleting) return actions;

  const built = buildSeed({
    namespace: o.namespace,
    template: tpl.name,
    spec: tpl.spec,
    key,
    owner: templateOwnerRef(tpl.name, tpl.uid),
  });
  if (!current) return [...actions, { type: "createPVC", pvc: built.pvc }, createPod(built.pod)];
  const pod = o.pods.find(p => p.name === name);
  if (!pod) return [...actions, createPod(built.pod)];
  if (pod.deleting) return actions;
  // The fill is the Pod's only container: Succeeded means the volume is filled and marked so.
  if (pod.phase === "Succeeded") {
    return [...actions, { type: "markSeedFilled", name: current.name }, deletePod(pod.name)];
  }
  // Failed for good (evicted, say): a new Pod starts over once this one is gone.
  if (pod.phase === "Failed") return [...actions, deletePod(pod.name)];
  return actions;
}

const createPod = (pod: V1Pod): ObjectAction => ({ type: "createPod", pod });
const deletePod = (name: string): ObjectAction => ({ type: "deletePod", name });
