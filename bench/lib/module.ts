import { execFileSync } from "node:child_process";
import { auditLines } from "../../testkit/audit-log";

export function moduleRSSMiB(): number {
  const out = execFileSync("ps", ["-eo", "rss=,args="], { encoding: "utf8" });
  const line = out.split("\n").find(l => l.includes("pepr-cubepod.js"));
  return line ? Math.round(Number(line.trim().split(/\s+/)[0]) / 1024) : NaN;
}

export async function metric(name: string): Promise<string[]> {
  const text = await fetch("http://127.0.0.1:8081/metrics").then(r => r.text());
  return text.split("\n").filter(l => l.startsWith(name));
}

/**
 * Counts claims whose standby index had none ready until `done`: how many a read of the pool
 * served (the index lagged), and how many found the pool empty.
 */
export async function indexMissesDuring(done: () => Promise<void>) {
  const read = async () => {
    const lines = await metric("cubepod_claim_index_misses_total");
    const count = (found: string) =>
      Number(lines.find(l => l.includes(`found="${found}"`))?.split(" ")[1] ?? 0);
    return { servedByRead: count("standby"), poolEmpty: count("none") };
  };
  const before = await read();
  await done();
  const after = await read();
  return {
    servedByRead: after.servedByRead - before.servedByRead,
    poolEmpty: after.poolEmpty - before.poolEmpty,
  };
}

/** A byte-valued metric of the module, in MiB. */
export async function metricMiB(name: string): Promise<number> {
  const line = (await metric(name)).find(l => l.startsWith(`${name} `));
  return line ? Math.round(Number(line.split(" ")[1]) / 1048576) : NaN;
}

/**
 * Requests the module sent to the API server, from the audit log: its own client's user agent,
 * and the fluent client's (Pepr's watches and store, the module's own watch). Pepr's store
 * (`peprstores`, where OnSchedule records each run) is counted apart: it is per module, not per box.
 */
export function moduleRequests(): { store: number; other: number } {
  const lines = auditLines().filter(
    l =>
      l.includes('"userAgent":"kubernetes-fluent-client"') || l.includes('"userAgent":"cubepod"'),
  );
  const store = lines.filter(l => l.includes('"resource":"peprstores"')).length;
  return { store, other: lines.length - store };
}
