/**
 * The flooding tenant of the `flood` benchmark: `GET /sandboxes` with one API key over
 * `<connections>` kept-alive connections, each sending its next call as soon as its last is
 * answered (a closed loop), as fast as the gateway answers. A process of its own, so that its
 * event loop, busy with thousands of answers a second, does not delay the timers and the reads
 * of the tenant whose latency is measured; undici's pool sends with the least CPU per call Node
 * offers, which leaves the more of the machine to the gateway under test.
 * Usage: tsx bench/scenarios/flood-client.ts <gateway URL> <API key> <connections> <niceness>;
 * prints "ready" once every connection has been answered, then reads commands on stdin: `mark`
 * counts afresh from now, `stop` ends the flood and prints the counts since the mark as
 * `counts <JSON>` (bench/lib/answer-counts.ts).
 */
import { setPriority } from "node:os";
import { createInterface } from "node:readline";
import { Pool } from "undici";
import { AnswerCounts } from "../lib/answer-counts";
import { now } from "../lib/stats";

const [url, key, connectionsArg, nicenessArg] = process.argv.slice(2);
const connections = Number(connectionsArg);
const niceness = Number(nicenessArg);
if (!url || !key || !(connections >= 1) || !Number.isInteger(niceness)) {
  console.error("usage: flood-client.ts <gateway URL> <API key> <connections> <niceness>");
  process.exit(2);
}
setPriority(niceness);
const pool = new Pool(url, { connections, pipelining: 1 });
let counts = new AnswerCounts(now());
let flooding = true;

/** One call, counted; a call that fails is counted and the loop goes on. */
async function call(): Promise<void> {
  try {
    const { statusCode, headers, body } = await pool.request({
      path: "/sandboxes",
      method: "GET",
      headers: { "x-api-key": key },
      headersTimeout: 30_000,
      bodyTimeout: 30_000,
    });
    await body.dump();
    counts.answered(statusCode, headers["retry-after"] !== undefined);
  } catch {
    counts.failed();
  }
}

async function loop(): Promise<void> {
  while (flooding) await call();
}

async function main(): Promise<void> {
  // Every connection opened and answered once before the flood is measured.
  await Promise.all(Array.from({ length: connections }, call));
  const loops = Array.from({ length: connections }, loop);
  console.log("ready");
  for await (const line of createInterface({ input: process.stdin })) {
    if (line === "mark") counts = new AnswerCounts(now());
    if (line !== "stop") continue;
    counts.stop(now());
    flooding = false;
    await Promise.all(loops);
    console.log(`counts ${JSON.stringify(counts.summary(now()))}`);
    await pool.close();
    process.exit(0);
  }
  // stdin closed without a stop: the benchmark is gone, and so goes the flood.
  process.exit(0);
}

main().catch(e => {
  console.error(e);
  process.exit(1);
});
