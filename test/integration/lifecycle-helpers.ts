import { eventsAbout, Kube, Obj, paths } from "../../testkit/kube";
import { podBox } from "../../testkit/objects";

/**
 * Registers the hooks every integration file needs: before its tests, a fresh namespace holding
 * one PodTemplate (`ready` gets the namespace and its helpers); after them, the namespace deleted.
 */
export function useTestNamespace(
  kube: Kube,
  prefix: string,
  template: object,
  ready: (ns: string, h: ReturnType<typeof inNamespace>) => void,
): void {
  let ns = "";
  beforeAll(async () => {
    ns = await kube.namespace(prefix);
    ready(ns, inNamespace(kube, ns));
    await kube.mustCreate(paths.podtemplates(ns), template);
  });
  afterAll(async () => {
    await kube.delete(`/api/v1/namespaces/${ns}`);
    kube.close();
  });
}

/** Helpers bound to one namespace. */
export function inNamespace(kube: Kube, ns: string) {
  const box = (name: string) => paths.podboxes(ns, name);
  return {
    createBox: (name: string, spec: object) =>
      kube.mustCreate(paths.podboxes(ns), podBox(name, spec)),
    /** Patches the box's spec; throws with the API server's message when it refuses. */
    patchBox: async (name: string, spec: object) => {
      const r = await kube.mergePatch(box(name), { spec });
      if (r.status !== 200) throw new Error(`patch ${name}: ${r.status} ${r.body.message}`);
      return r;
    },
    /** Waits until the box's status says `phase` (and, when given, `reason`) for its current generation. */
    waitPhase: (name: string, phase: string, reason?: string, timeoutMs?: number) =>
      kube.waitFor(
        box(name),
        o =>
          o?.status?.phase === phase &&
          (reason === undefined || o.status.reason === reason) &&
          o.status.observedGeneration === o.metadata.generation,
        timeoutMs,
      ) as Promise<Obj>,
    waitGone: (path: string, timeoutMs?: number) =>
      kube.waitFor(path, o => o === undefined, timeoutMs),
    /** Creates a warm pool and waits until all its standbys are ready. */
    readyPool: async (name: string, templateRef: string, replicas: number, timeoutMs?: number) => {
      await kube.mustCreate(paths.podwarmpools(ns), {
        apiVersion: "pod.cubeplex.ai/v1alpha1",
        kind: "PodWarmPool",
        metadata: { name },
        spec: { templateRef, replicas },
      });
      await kube.waitFor(
        paths.podwarmpools(ns, name),
        o => o?.status?.readyReplicas === replicas,
        timeoutMs,
      );
    },
    /** The Pods and PVCs of a box (by its label) in the API server. */
    podsOf: (name: string) => kube.names(paths.pods(ns), `pod.cubeplex.ai/box=${name}`),
    pvcsOf: (key: string) => kube.names(paths.pvcs(ns), `pod.cubeplex.ai/volume-key=${key}`),
    /** Waits until the PVCs of a volume key are exactly `names` (deletions finish asynchronously). */
    waitPVCs: async (key: string, names: string[]) => {
      for (let i = 0; i < 100; i++) {
        const now = await kube.names(paths.pvcs(ns), `pod.cubeplex.ai/volume-key=${key}`);
        if (JSON.stringify(now) === JSON.stringify([...names].sort())) return;
        await new Promise(r => setTimeout(r, 200));
      }
      throw new Error(`PVCs of ${key} never became ${names.join(", ")}`);
    },
    /** Waits for an Event of that reason about the object (Events are written after the fact). */
    waitEvent: (name: string, reason: string) =>
      kube.waitForItems(eventsAbout(ns, name), items => items.some(e => e.reason === reason)),
    events: async (name: string) => {
      const r = await kube.get(eventsAbout(ns, name));
      return (r.body.items as Obj[]).map(e => e.reason as string);
    },
  };
}
