import type { V1Pod } from "@kubernetes/client-node";

/** True when the Pod's Ready condition is True (kubelet's readiness, probes included). */
export const isPodReady = (pod: Pick<V1Pod, "status">): boolean =>
  (pod.status?.conditions ?? []).some(c => c.type === "Ready" && c.status === "True");
