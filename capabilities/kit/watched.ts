import type { Capability } from "pepr";

/*
 * The module's watches hold every object they deliver: kubernetes-fluent-client's watcher keeps
 * each one, by reference, to tell a relist's changes (by uid and resourceVersion) and deletions
 * (it delivers the kept object again). With 10,000 boxes, whole Pods, PVCs and boxes, with their
 * managedFields, twice over (one watch per binding), were most of the module's heap.
 */

type Watched = {
  metadata?: { managedFields?: unknown; annotations?: Record<string, string> };
  spec?: unknown;
  status?: unknown;
};

/** `kubectl apply` keeps a copy of what was applied here: a second spec, read by nobody here. */
const LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration";

/**
 * Drops, in place, what no callback reads of any object: its managedFields and `kubectl
 * apply`'s copy of the applied object.
 */
export function slim<T extends Watched>(obj: T): T {
  const m = obj.metadata;
  if (m) {
    delete m.managedFields;
    if (m.annotations && LAST_APPLIED in m.annotations) delete m.annotations[LAST_APPLIED];
  }
  return obj;
}

/**
 * Keeps, in place, only the metadata of an object whose callback has read it: what a later
 * relist compares and a deletion found by a relist delivers, which the callbacks that keep only
 * the metadata's news (box Pods, standbys, volumes, the reaper's boxes) then read.
 */
export function keepMetadata(obj: Watched): void {
  slim(obj);
  delete obj.spec;
  delete obj.status;
}

type Binding = Capability["bindings"][number];

/**
 * Registers watches (`register` calls `When(...)...Watch(...)`) for every phase, added, modified
 * and deleted, so that one watch serves both: Pepr's bindings support it (`Event.ANY`, the
 * default before an `Is...` call) but its builder always sets one. Its watch callbacks get the
 * phase. Bindings other than watches (admission, in the admission process) are left as they are.
 */
export function watchEveryPhase(capability: Capability, register: () => void): void {
  const before = capability.bindings.length;
  register();
  for (const b of capability.bindings.slice(before)) {
    if (b.isWatch) b.event = "*" as Binding["event"];
  }
}
