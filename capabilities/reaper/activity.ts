import { timestamp } from "../api/common";
import type { PodBoxSpec, PodBoxStatus } from "../api/podbox";

/**
 * How a client records activity: it sets this annotation on the PodBox to the current time
 * (RFC 3339), e.g. a gateway on each inbound request, at most every few seconds. Metadata, not
 * spec: GitOps tools that own the spec see no drift, and the operator never writes the spec.
 */
export const ANNOTATION_LAST_ACTIVITY = "pod.cubeplex.ai/last-activity";

/** The desired state the operator acts on: the spec's, unless idleness or an expired lease say otherwise. */
export type Effective = {
  desired: PodBoxSpec["desiredState"];
  /** Set when the reaper's rules, not the spec, decide. */
  reason?: "IdlePaused" | "LeaseExpired" | "Expired";
};

/** What the idle and lease rules read of a box. */
export type ActivityInput = {
  spec: PodBoxSpec;
  status: PodBoxStatus;
  /** The last-activity annotation, if any. */
  lastActivityAnnotation?: string;
};

const rfc3339 = timestamp();

/**
 * A time written as RFC 3339 (with its zone), in epoch ms; undefined for anything else. Stricter
 * than `Date.parse`, which also takes `2030` or an RFC 2822 date: such a value copied into
 * `status.lastActivityAt` would make every later status write fail the CRD's `date-time` check.
 */
export function rfc3339Time(t?: string): number | undefined {
  return t !== undefined && rfc3339.safeParse(t).success ? Date.parse(t) : undefined;
}

/** Why an activity annotation is ignored, or undefined when it is absent or valid. */
export function invalidActivity(annotation?: string): string | undefined {
  if (annotation === undefined || rfc3339Time(annotation) !== undefined) return undefined;
  return (
    `annotation ${ANNOTATION_LAST_ACTIVITY}=${JSON.stringify(annotation)} is not an RFC 3339 ` +
    "time such as 2026-12-01T10:00:00Z; it is ignored"
  );
}

/** The box's last activity: the newest of the annotation and the time it last started running. */
export function lastActivity(b: ActivityInput): number | undefined {
  const times = [rfc3339Time(b.lastActivityAnnotation), rfc3339Time(b.status.lastActivityAt)];
  const known = times.filter((t): t is number => t !== undefined);
  return known.length > 0 ? Math.max(...known) : undefined;
}

/** When the box becomes idle (epoch ms), if it has an idle timeout. */
export function idleDeadline(b: ActivityInput): number | undefined {
  const timeout = b.spec.idleTimeoutSeconds ?? 0;
  const last = lastActivity(b);
  return timeout > 0 && last !== undefined ? last + timeout * 1000 : undefined;
}

/** When the lease ends (epoch ms), if there is one. */
export function leaseDeadline(b: ActivityInput): number | undefined {
  return rfc3339Time(b.spec.leaseExpiresAt);
}

/** When the box expires (epoch ms), if it has an expiry. */
export function expiryDeadline(b: ActivityInput): number | undefined {
  return rfc3339Time(b.spec.expiresAt);
}

/**
 * The reaper's rules, applied at `now`: a box meant to run past its `expiresAt` is terminated, or
 * paused with `onExpiry: Pause`, whatever its activity or lease (E2B's sandbox timeout); a box meant to run that is idle past its timeout and has
 * no live lease is paused (IdlePaused); a paused box (paused by its spec, or already idle-paused)
 * whose lease has expired is terminated (LeaseExpired), so an idle box whose lease ran out is
 * paused first and terminated on a later pass. New activity (a newer annotation) ends an idle
 * pause.
 */
export function effectiveState(b: ActivityInput, now: number): Effective {
  const desired = b.spec.desiredState;
  if (desired === "Terminated") return { desired };
  const expiry = expiryDeadline(b);
  // A box paused by its spec keeps until it is resumed or ended, as a paused E2B sandbox does.
  if (desired === "Running" && expiry !== undefined && expiry <= now) {
    return { desired: b.spec.onExpiry === "Pause" ? "Paused" : "Terminated", reason: "Expired" };
  }
  const lease = leaseDeadline(b);
  const leaseLive = lease !== undefined && lease > now;
  const leaseExpired = lease !== undefined && lease <= now;
  const idle = desired === "Running" && !leaseLive && (idleDeadline(b) ?? Infinity) <= now;
  const wasPaused = b.status.phase === "Paused" || b.status.phase === "Terminated";
  // Ended by its lease, a box stays ended until a new lease: late activity does not revive it.
  const ended = b.status.reason === "LeaseExpired";
  if ((desired === "Paused" || ended || (idle && wasPaused)) && leaseExpired) {
    return { desired: "Terminated", reason: "LeaseExpired" };
  }
  if (idle) return { desired: "Paused", reason: "IdlePaused" };
  return { desired };
}

/** Every later time (epoch ms) the reaper's rules could change the box's effective state, in order. */
export function deadlines(b: ActivityInput, now: number): number[] {
  return [idleDeadline(b), leaseDeadline(b), expiryDeadline(b)]
    .filter((t): t is number => t !== undefined && t > now)
    .sort((x, y) => x - y);
}

/** The next time (epoch ms) the reaper's rules could change the box's effective state. */
export function nextDeadline(b: ActivityInput, now: number): number | undefined {
  return deadlines(b, now)[0];
}
