import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { CLUSTER_DIR, Obj } from "./kube";

/**
 * The local API server's audit log lines (this log and its rotated predecessor) that contain every
 * `needle`: who sent which request (local-cluster/manifests/audit-policy.yaml).
 */
export function auditLines(...needles: string[]): string[] {
  const dir = join(CLUSTER_DIR, "logs");
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter(f => f.startsWith("audit") && f.endsWith(".log"))
    .flatMap(f => readFileSync(join(dir, f), "utf8").split("\n"))
    .filter(l => l !== "" && needles.every(n => l.includes(n)));
}

/** The audit events of {@link auditLines}, decoded. */
export const auditEvents = (...needles: string[]): Obj[] =>
  auditLines(...needles).map(l => JSON.parse(l) as Obj);
