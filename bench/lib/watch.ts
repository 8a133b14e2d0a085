import { Kube, Obj } from "../../testkit/kube";
import { now } from "./stats";

/**
 * Resolves per object name when `predicate` first holds for it, from one collection watch; and
 * tells when the watch first showed each object.
 */
export function watcher(kube: Kube, collection: string, predicate: (o: Obj) => boolean) {
  const first = new Map<string, number>();
  const seen = new Map<string, number>();
  const waiting = new Map<string, (t: number) => void>();
  const stop = kube.watchCollection(collection, (type, o) => {
    const name = o.metadata?.name;
    if (type === "DELETED" || !name || seen.has(name)) return;
    const t = now();
    if (!first.has(name)) first.set(name, t);
    if (!predicate(o)) return;
    seen.set(name, t);
    waiting.get(name)?.(t);
  });
  return {
    when: (name: string) =>
      new Promise<number>((resolve, reject) => {
        if (seen.has(name)) return resolve(seen.get(name)!);
        waiting.set(name, resolve);
        setTimeout(() => reject(new Error(`timeout waiting for ${name}`)), 120_000);
      }),
    /** When the watch first showed the object, if it has. */
    firstSeen: (name: string) => first.get(name),
    stop,
  };
}
