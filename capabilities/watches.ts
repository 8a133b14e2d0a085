import { a } from "pepr";
import type { GenericClass, KubernetesObject } from "kubernetes-fluent-client";
import { CubePodTemplate } from "./api/kinds";
import type { CubePodTemplate as Template } from "./api/kinds";
import { keepMetadata, slim } from "./kit/watched";
import {
  LABEL_BOX,
  LABEL_MANAGED_BY,
  LABEL_POOL,
  LABEL_SEED_OF,
  LABEL_VOLUME_KEY,
  MANAGED_BY,
} from "./manifests/labels";
import { templateOfPolicy } from "./network/reconciler";
import type { Operator } from "./operator";

/**
 * A watch of the module's, with what its events do: the same list serves Pepr's bindings (one
 * watcher) and each shard's own watches (several). Every one serves all phases and keeps only
 * what the callbacks read (kit/watched.ts).
 */
export type ModuleWatch = {
  model: GenericClass;
  /** A label the objects carry, and its value if it must be one. */
  label?: [string, string?];
  handle(op: Operator, obj: KubernetesObject, deleted: boolean): void;
};

export const MODULE_WATCHES: ModuleWatch[] = [
  // Sandbox Pods (labelled with their box) report readiness, IP and deletion to their box: a
  // deleted one lets its box move on (pause, reset, resume, cleanup).
  {
    model: a.Pod,
    label: [LABEL_BOX],
    handle: (op, pod, deleted) => {
      op.boxes.onPodEvent(pod as a.Pod, deleted);
      keepMetadata(pod);
    },
  },
  // The NetworkPolicies CubePod owns are applied again when someone changes or deletes them.
  {
    model: a.NetworkPolicy,
    label: [LABEL_MANAGED_BY, MANAGED_BY],
    handle: (op, np) => {
      const { namespace, name, labels } = np.metadata ?? {};
      op.network.onPolicyEvent(namespace!, name!, templateOfPolicy(labels));
      keepMetadata(np);
    },
  },
  // A PodTemplate that appears, changes or goes wakes the boxes and pools that use it (they report
  // a missing one), and its sandboxes' NetworkPolicies follow it.
  {
    model: CubePodTemplate,
    handle: (op, tpl) => void op.onTemplateEvent(slim(tpl as Template)),
  },
  // CubePod's PVCs wake the boxes that wait for them (volumes to re-attach, or to finish going).
  {
    model: a.PersistentVolumeClaim,
    label: [LABEL_VOLUME_KEY],
    handle: (op, pvc) => {
      op.onVolumeEvent(pvc as a.PersistentVolumeClaim);
      keepMetadata(pvc);
    },
  },
  // Templates' seed PVCs feed the index of filled seeds that new rootfs volumes are cloned from;
  // they and their fill Pods bring their template's seed reconcile back.
  {
    model: a.PersistentVolumeClaim,
    label: [LABEL_SEED_OF],
    handle: (op, pvc, deleted) => {
      op.seeds.onVolumeEvent(pvc as a.PersistentVolumeClaim, deleted);
      keepMetadata(pvc);
    },
  },
  {
    model: a.Pod,
    label: [LABEL_SEED_OF],
    handle: (op, pod, deleted) => {
      op.seeds.onPodEvent(pod as a.Pod, deleted);
      keepMetadata(pod);
    },
  },
  // Standby Pods feed the index of ready standbys that claims pick from; their pool looks again. A
  // standby that is deleted or claimed leaves the index and its pool replenishes; a claimed one
  // keeps these labels until its claim's finish, and tells its box meanwhile.
  {
    model: a.Pod,
    label: [LABEL_POOL],
    handle: (op, pod, deleted) => {
      op.onStandbyEvent(pod as a.Pod, deleted);
      keepMetadata(pod);
    },
  },
];
