import { auditEvents } from "../../testkit/audit-log";
import { Obj } from "../../testkit/kube";
import { stats } from "./stats";

/** An audit timestamp (RFC 3339 with microseconds) in epoch milliseconds, fraction kept. */
export const auditMs = (t: string) =>
  Date.parse(t.slice(0, 19) + "Z") + Number(`0${t.slice(19, -1)}`) * 1000;

/**
 * Splits each claim's latency into the time the API server spent inside its three writes (the
 * client's create, the claim's conditional Pod patch, the box status patch; from the audit log:
 * request received to response complete) and the rest (watch delivery to the module and to the
 * client, the module, the network). The first is what this machine's API server costs; the
 * operator's part is in the second.
 */
export function apiServerShare(ns: string, boxes: Map<string, Obj>) {
  const writes = claimWrites(auditWrites(ns), boxes);
  return (claims: [string, number][]) => {
    const api: number[] = [];
    const rest: number[] = [];
    for (const [name, total] of claims) {
      const mine = writes.get(name);
      if (!mine) continue;
      const sum = mine.reduce((t, w) => t + (w.to - w.from), 0);
      api.push(sum);
      rest.push(total - sum);
    }
    if (api.length === 0) return {};
    const { p50, p95 } = stats(api);
    return { insideApiServerP50: p50, insideApiServerP95: p95, restP50: stats(rest).p50 };
  };
}

/** A write from the audit log: received by the API server at `from`, answered at `to` (ms). */
export type AuditWrite = { e: Obj; from: number; to: number };

/** The writes in `ns` that the audit log holds. */
export function auditWrites(ns: string): AuditWrite[] {
  return auditEvents(`"namespace":"${ns}"`, '"stage":"ResponseComplete"')
    .filter(e => ["create", "update", "patch", "delete"].includes(e.verb))
    .map(e => ({ e, from: auditMs(e.requestReceivedTimestamp), to: auditMs(e.stageTimestamp) }));
}

/**
 * Each claimed box's own three writes, for the boxes the log has all three of: the client's
 * create, the module's conditional patch of the standby Pod, and the module's status patch. Each
 * is the first of its kind: the claim's own come before any later change of the box.
 */
export function claimWrites(
  writes: AuditWrite[],
  boxes: Map<string, Obj>,
): Map<string, AuditWrite[]> {
  const first = new Map<string, AuditWrite>();
  for (const w of writes) {
    const { e } = w;
    const o = e.objectRef ?? {};
    const ours = e.userAgent === "cubepod";
    const key =
      o.resource === "podboxes" && e.verb === "create"
        ? `create/${o.name}`
        : o.resource === "podboxes" && o.subresource === "status" && e.verb === "patch" && ours
          ? `status/${o.name}`
          : o.resource === "pods" && !o.subresource && e.verb === "patch" && ours
            ? `pod/${o.name}`
            : undefined;
    if (key && !first.has(key)) first.set(key, w);
  }
  const claims = new Map<string, AuditWrite[]>();
  for (const [name, box] of boxes) {
    const keys = [`create/${name}`, `pod/${box.status?.podName}`, `status/${name}`];
    const mine = keys.map(k => first.get(k));
    if (mine.every(w => w !== undefined)) claims.set(name, mine as AuditWrite[]);
  }
  return claims;
}
