import type { kind } from "pepr";
import type { ActionContext } from "../kit/object-actions";
import { applyAction } from "../kit/object-actions";
import { isNamespaceTerminating, NamespaceTerminatingError } from "../kit/api-errors";
import { objectKey } from "../kit/object-key";
import type { WorkQueue } from "../kit/work-queue";
import { LABEL_SEED_OF } from "../manifests/labels";
import { decideSeed } from "./decide";
import { observeSeed } from "./observe";
import { SeedIndex } from "./seed-index";

export type SeedReconcilerDeps = ActionContext & { queue: WorkQueue };

/**
 * Keeps each template's rootfs seed (`rootfs.seed`, decide.ts) and the index of filled seeds that
 * boxes and pools clone new rootfs volumes from. Reconciled on every event of the template, of
 * its seed PVCs and of their fill Pods; a template with no seed and none left costs no request
 * beyond its own events' reads.
 */
export class SeedReconciler {
  readonly index = new SeedIndex();

  constructor(private readonly deps: SeedReconcilerDeps) {}

  /** A template appeared or changed: its seed follows. */
  reconcileSoon(namespace: string, template: string): void {
    this.deps.queue.add(objectKey(namespace, template));
  }

  /** A seed PVC changed or went: the index follows, and its template looks again. */
  onVolumeEvent(pvc: kind.PersistentVolumeClaim, deleted: boolean): void {
    this.index.observe(pvc, deleted);
    this.#wakeTemplate(pvc);
  }

  /** A fill Pod changed or went: its template looks again. */
  onPodEvent(pod: kind.Pod): void {
    this.#wakeTemplate(pod);
  }

  #wakeTemplate(obj: kind.Pod | kind.PersistentVolumeClaim): void {
    const template = obj.metadata?.labels?.[LABEL_SEED_OF];
    if (template) this.reconcileSoon(obj.metadata!.namespace!, template);
  }

  /** One reconcile of a template's seed: observe, decide, apply in order. */
  async reconcile(key: string): Promise<void> {
    const [namespace, name] = key.split("/");
    const o = await observeSeed(this.deps.client, namespace, name);
    try {
      for (const action of decideSeed(o)) await applyAction(this.deps, namespace, name, action);
    } catch (e) {
      // Its objects go with the namespace.
      if (e instanceof NamespaceTerminatingError || isNamespaceTerminating(e)) return;
      throw e;
    }
  }
}
