import { Kube, Obj } from "../../hack/lib/kube";
import { now } from "./stats";

/** Resolves per object name when `predicate` first holds for it, from one collection watch. */
export function watcher(kube: Kube, collection: string, predicate: (o: Obj) => boolean) {
  const seen = new Map<string, number>();
  const waiting = new Map<string, (t: number) => void>();
  const stop = kube.watchCollection(collection, (type, o) => {
    const name = o.metadata?.name;
    if (type === "DELETED" || !name || seen.has(name) || !predicate(o)) return;
    const t = now();
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
    stop,
  };
}
