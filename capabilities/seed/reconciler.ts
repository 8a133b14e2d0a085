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
 * boxes and pools clone new rootfs volumes from. Reconciled on every event of its seed PVCs and
 * fill Pods, and of a template that asks for a seed or has seed objects: a template with neither
 * costs no request.
 */
export class SeedReconciler {
  readonly index = new SeedIndex();
  /** The seed PVCs and fill Pods the watches have shown, by namespace/template. */
  readonly #objects = new Map<string, Set<string>>();

  constructor(private readonly deps: SeedReconcilerDeps) {}

  /**
   * A template appeared, changed or went: its seed follows, if it asks for one or has seed
   * objects to remove. A seed object the watch shows later brings its template back itself.
   */
  onTemplateEvent(namespace: string, template: string, spec: unknown): void {
    const asks = (spec as { rootfs?: { seed?: unknown } } | undefined)?.rootfs?.seed === true;
    if (asks || this.#objects.has(objectKey(namespace, template))) {
      this.deps.queue.add(objectKey(namespace, template));
    }
  }

  /** A seed PVC changed or went: the index follows, and its template looks again. */
  onVolumeEvent(pvc: kind.PersistentVolumeClaim, deleted: boolean): void {
    this.index.observe(pvc, deleted);
    this.#seen(pvc, "PersistentVolumeClaim", deleted);
  }

  /** A fill Pod changed or went: its template looks again. */
  onPodEvent(pod: kind.Pod, deleted: boolean): void {
    this.#seen(pod, "Pod", deleted);
  }

  #seen(obj: kind.Pod | kind.PersistentVolumeClaim, kind: string, deleted: boolean): void {
    const template = obj.metadata?.labels?.[LABEL_SEED_OF];
    if (!template) return;
    const key = objectKey(obj.metadata!.namespace!, template);
    const objects = this.#objects.get(key) ?? new Set<string>();
    const name = `${kind}/${obj.metadata!.name}`;
    if (deleted) objects.delete(name);
    else objects.add(name);
    if (objects.size > 0) this.#objects.set(key, objects);
    else this.#objects.delete(key);
    this.deps.queue.add(key);
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
