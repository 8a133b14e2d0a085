import type { PodTemplateSpec } from "../api/podtemplate";
import { templateHash } from "../manifests/template-hash";

/**
 * The PodTemplate specs the mutate webhook has read, one per template, with their hash. Every
 * sandbox Pod CubePod builds carries the hash of the spec it was built from (label
 * `pod.cubeplex.ai/template-hash`). A cached spec with that hash is that very spec, so it is
 * injected without reading the template again, and no watch is needed to keep the cache right:
 * a changed template has another hash, which misses and is read. Pods without the label (declared
 * by hand) always read the template.
 */
export class TemplateSpecCache {
  private readonly entries = new Map<string, { hash: string; spec: PodTemplateSpec }>();

  /** @param max templates kept; the least recently used one goes first. */
  constructor(private readonly max = 1024) {}

  /** The cached spec of the template when it has `hash`, else undefined. */
  get(namespace: string, name: string, hash: string | undefined): PodTemplateSpec | undefined {
    if (!hash) return undefined;
    const key = `${namespace}/${name}`;
    const entry = this.entries.get(key);
    if (entry?.hash !== hash) return undefined;
    this.entries.delete(key);
    this.entries.set(key, entry);
    return entry.spec;
  }

  /** Keeps a spec just read (validated, defaults applied) as the template's cached version. */
  put(namespace: string, name: string, spec: PodTemplateSpec): void {
    const key = `${namespace}/${name}`;
    this.entries.delete(key);
    this.entries.set(key, { hash: templateHash(spec), spec });
    if (this.entries.size > this.max) this.entries.delete(this.entries.keys().next().value!);
  }
}
