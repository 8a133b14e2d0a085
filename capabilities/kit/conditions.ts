import type { Condition } from "../api/common";

/** A time as Kubernetes writes it (metav1.Time: RFC 3339, whole seconds, UTC). */
export function kubeTime(at: Date = new Date()): string {
  return at.toISOString().replace(/\.\d+Z$/, "Z");
}

/**
 * The Ready condition of an object: its transition time is kept while its status holds, so that
 * a reconcile that changes nothing writes nothing.
 */
export function readyCondition(
  previous: Condition[] | undefined,
  ready: boolean,
  observedGeneration: number,
  now: string,
  reason: string,
  message: string,
): Condition {
  const status = ready ? "True" : "False";
  const before = previous?.find(c => c.type === "Ready");
  return {
    type: "Ready",
    status,
    observedGeneration,
    lastTransitionTime: before && before.status === status ? before.lastTransitionTime : now,
    reason,
    message,
  };
}
