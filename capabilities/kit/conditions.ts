import type { Condition } from "../api/common";

/** A time as Kubernetes writes it (metav1.Time: RFC 3339, whole seconds, UTC). */
export function kubeTime(at: Date = new Date()): string {
  return at.toISOString().replace(/\.\d+Z$/, "Z");
}

/**
 * A condition of an object: its transition time is kept while its status holds, so that a
 * reconcile that changes nothing writes nothing.
 */
export function condition(
  previous: Condition[] | undefined,
  c: { type: string; status: Condition["status"]; reason: string; message: string },
  observedGeneration: number,
  now: string,
): Condition {
  const before = previous?.find(p => p.type === c.type);
  return {
    type: c.type,
    status: c.status,
    observedGeneration,
    lastTransitionTime: before && before.status === c.status ? before.lastTransitionTime : now,
    reason: c.reason,
    message: c.message,
  };
}

/** The Ready condition of an object (see {@link condition}). */
export function readyCondition(
  previous: Condition[] | undefined,
  ready: boolean,
  observedGeneration: number,
  now: string,
  reason: string,
  message: string,
): Condition {
  const status = ready ? "True" : "False";
  return condition(previous, { type: "Ready", status, reason, message }, observedGeneration, now);
}
