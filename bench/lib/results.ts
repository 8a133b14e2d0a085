import { mkdirSync, writeFileSync } from "node:fs";
import * as os from "node:os";
import { join } from "node:path";
import { Kube, ROOT } from "../../testkit/kube";

/** The machine a run was taken on, as read from it. */
export function machine() {
  const cpus = os.cpus();
  return {
    cpus: cpus.length,
    cpuModel: cpus[0]?.model ?? "unknown",
    memoryGiB: Math.round(os.totalmem() / 2 ** 30),
    kernel: os.release(),
  };
}

/** Saves this run's figures under bench/results/ (git-ignored); returns the file. */
export function saveResults(): string {
  const dir = join(ROOT, "bench", "results");
  mkdirSync(dir, { recursive: true });
  const date = new Date().toISOString();
  const file = join(dir, `${date.replace(/[:.]/g, "-")}.json`);
  writeFileSync(file, JSON.stringify({ date, machine: machine(), results }, null, 2) + "\n");
  return file;
}

/** The figures of this run, by benchmark; each scenario adds its own. */
export const results: Record<string, unknown> = {};

/** The command that reruns each result. */
export const RERUN: Record<string, string> = {
  apiServerBaseline: "npm run bench (taken before any of them)",
  wakeUp: "npm run bench (taken before any of them)",
  warmClaim: "npm run bench -- warm",
  warmClaimFloor: "npm run bench -- floor",
  warmClaimStream: "npm run bench -- stream",
  coldStart: "npm run bench -- cold",
  admission: "npm run bench -- admission",
  gateway: "npm run bench -- gateway",
  flood: "npm run bench -- flood",
  tls: "npm run bench -- tls",
  egress: "npm run bench -- egress",
  realNode: "npm run bench -- real",
  sandbox: "npm run bench -- sandbox",
  envd: "npm run bench -- envd",
  scale: "npm run bench -- scale",
  scale10k: "npm run bench -- scale10k",
  claimSaturation: "npm run bench -- saturation",
  claimSaturationCost: "npm run bench -- saturation",
  shardedKill: "npm run bench -- sharded",
  shardedSaturation: "npm run bench -- sharded",
  shardedScale10k: "npm run bench -- sharded10k",
};

/** One line per figure: benchmark, measure, value. Each claim's figure (`samples`): JSON only. */
export function printTable(): void {
  const rows: [string, string, string][] = [];
  const walk = (prefix: string, v: unknown) => {
    if (v && typeof v === "object" && !Array.isArray(v)) {
      for (const [k, x] of Object.entries(v))
        if (k !== "what" && k !== "samples") walk(prefix ? `${prefix}.${k}` : k, x);
    } else rows.push([prefix.split(".")[0], prefix.split(".").slice(1).join("."), String(v)]);
  };
  walk("", results);
  const w = [0, 1, 2].map(i => Math.max(...rows.map(r => r[i].length), 9));
  const line = (r: string[]) => r.map((c, i) => c.padEnd(w[i])).join("  ");
  console.log(line(["benchmark", "measure", "value"]));
  console.log(line(w.map(n => "-".repeat(n))));
  rows.forEach(r => console.log(line(r)));
  for (const [k, v] of Object.entries(results)) {
    console.log(`${k}: ${(v as { what?: string }).what ?? ""}`);
    console.log(`  rerun: ${RERUN[k] ?? `npm run bench -- ${k}`}`);
  }
}

/**
 * Waits until no benchmark namespace is left (an earlier run's, or this run's previous step's,
 * whose deletion takes a while): its teardown would compete with the figures being taken.
 */
export async function noBenchNamespaces(kube: Kube) {
  await kube.waitForItems(
    "/api/v1/namespaces",
    items => !items.some(n => String(n.metadata.name).startsWith("bench")),
    600_000,
  );
}
