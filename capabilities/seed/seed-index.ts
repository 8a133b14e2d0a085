import type { kind } from "pepr";
import { objectKey } from "../kit/object-key";
import {
  LABEL_MANAGED_BY,
  LABEL_SEED,
  LABEL_SEED_FILLED,
  LABEL_SEED_OF,
  MANAGED_BY,
} from "../manifests/labels";
import { seedKey, seedsRootfs } from "../manifests/seed";
import type { TemplateRef } from "../manifests/types";

/**
 * The filled seed PVCs, from their watch: what a box's or standby's new rootfs is cloned from.
 * Only a seed the operator made (its marks cannot be forged, admission/provenance-policy.ts),
 * controlled by its template and not being deleted, counts.
 */
export class SeedIndex {
  /** namespace/template/key: the filled seed PVC's name. */
  readonly #filled = new Map<string, string>();
  /** namespace/PVC name: its entry above. */
  readonly #entries = new Map<string, string>();

  /** A seed PVC appeared, changed or went. */
  observe(pvc: kind.PersistentVolumeClaim, deleted: boolean): void {
    const meta = pvc.metadata ?? {};
    const labels = meta.labels ?? {};
    const name = objectKey(meta.namespace!, meta.name!);
    const old = this.#entries.get(name);
    if (old) this.#filled.delete(old);
    this.#entries.delete(name);
    const template = labels[LABEL_SEED_OF];
    const controller = meta.ownerReferences?.find(r => r.controller);
    const usable =
      !deleted &&
      !meta.deletionTimestamp &&
      template !== undefined &&
      labels[LABEL_SEED] !== undefined &&
      labels[LABEL_SEED_FILLED] === "true" &&
      labels[LABEL_MANAGED_BY] === MANAGED_BY &&
      controller?.kind === "PodTemplate" &&
      controller.name === template;
    if (!usable) return;
    const entry = `${meta.namespace}/${template}/${labels[LABEL_SEED]}`;
    this.#filled.set(entry, meta.name!);
    this.#entries.set(name, entry);
  }

  /** The template with its filled seed for this very spec, when it keeps seeds and one is. */
  withSeed(namespace: string, template: TemplateRef): TemplateRef {
    const bare = { name: template.name, spec: template.spec };
    if (!seedsRootfs(template.spec)) return bare;
    const pvcName = this.#filled.get(`${namespace}/${template.name}/${seedKey(template.spec)}`);
    return pvcName ? { ...bare, seed: { pvcName } } : bare;
  }
}
