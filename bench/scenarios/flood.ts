import { randomBytes } from "node:crypto";
import type { ChildProcess } from "node:child_process";
import { Agent, request } from "node:http";
import { join } from "node:path";
import { Kube, paths, ROOT } from "../../testkit/kube";
import { podAPIKey, podBox, podTemplate, TEMPLATE } from "../../testkit/objects";
import { type AnswerSummary, AnswerCounts } from "../lib/answer-counts";
import { openLoop, poissonSeconds } from "../lib/arrivals";
import { killGroup, ownProcess } from "../lib/own-process";
import { cpuBetween, cpuByRole, machineQuiet } from "../lib/process-cpu";
import { results } from "../lib/results";
import { GATEWAY } from "../lib/sdk";
import { hundredths, now, ratios, sleep, stats } from "../lib/stats";

/** How long the victim is measured in each phase, alone and during the flood. */
const PHASE_S = 25;
/**
 * The victim's calls a second: well under a tenant's rate limit (docs/gateway.md, Limits), so
 * that any 429 it meets is another tenant's flood spending its budget.
 */
const VICTIM_PER_S = 20;
/** The flooder's connections, each a closed loop of calls: the load it can make. */
const FLOOD_CONNECTIONS = 256;
/**
 * The flooder's place in the CPUs' queue, behind the gateway and the victim: a real flood comes
 * from other machines, so its sender's CPU is no part of what the gateway is measured on. The
 * flooder keeps its connections busy while a call costs it less CPU than the gateway's answer;
 * the CPU each process used in the phase shows whether it did.
 */
const FLOOD_NICENESS = 10;
/**
 * How long the flood runs before the victim is measured: its burst allowance spent and its
 * connections busy, so that the victim meets the flood as it lasts, not as it starts.
 */
const FLOOD_SETTLE_S = 2;
/** A victim call unanswered this long counts as an error, not as a latency. */
const CALL_TIMEOUT_MS = 10_000;
/** The victim's sandbox: a cold box on kwok, made once, read by `GET /sandboxes/{id}`. */
const BOX = "victim";
/** Where the least rate-limited server (floor-limits.ts) listens. */
const FLOOR_PORT = 18185;
/** The victim's calls in turn: its list, and its one sandbox; neither creates anything. */
const VICTIM_CALLS = ["/sandboxes", `/sandboxes/${BOX}`];

/**
 * One tenant flooding the gateway's control API, another's latency alongside. The victim sends
 * `GET /sandboxes` and `GET /sandboxes/{id}` in turn at a steady rate from independent clients
 * (Poisson arrivals, open loop: late answers do not slow its sending), first alone (the floor),
 * then with the same arrivals while the flooder (flood-client.ts, a process of its own) sends
 * `GET /sandboxes` over hundreds of connections as fast as it is answered. Per-tenant limits hold
 * when the victim meets no 429 and its percentiles stay near the floor's, while the flooder is
 * held to its rate (its 2xx a second) and told when to retry.
 */
export async function benchFlood(kube: Kube) {
  const victim = await tenant(kube, "bench-flood-victim");
  const flooder = await tenant(kube, "bench-flood-flooder");
  await kube.mustCreate(paths.podtemplates(victim.ns), podTemplate("python", TEMPLATE));
  await kube.mustCreate(paths.podboxes(victim.ns), podBox(BOX, { templateRef: "python" }));
  // The gateway learns keys and boxes from its watches: each is served before anything is timed.
  await untilServed(`/sandboxes/${BOX}`, victim.key);
  await untilServed("/sandboxes", flooder.key);
  if (!(await machineQuiet())) console.log("flood: the machine was not quiet before the floor");
  // The same arrivals in both phases, so that they differ only by the flood.
  const arrivals = poissonSeconds(VICTIM_PER_S, PHASE_S, 1);
  const alone = await victimPhase(arrivals, victim.key);
  const flooded = await floodedPhase(arrivals, GATEWAY, victim.key, flooder.key);
  // The same flood and victim against the least rate-limited server (floor-limits.ts): what a
  // one-process gateway on this machine cannot keep from the victim.
  const floor = await ownProcess(
    [
      join(ROOT, "bench", "scenarios", "floor-limits.ts"),
      String(FLOOR_PORT),
      victim.key,
      flooder.key,
    ],
    "ready",
  );
  let floorFlooded: Awaited<ReturnType<typeof floodedPhase>>;
  try {
    floorFlooded = await floodedPhase(
      arrivals,
      `http://127.0.0.1:${FLOOR_PORT}`,
      victim.key,
      flooder.key,
    );
  } finally {
    killGroup(floor);
  }
  await kube.delete(`/api/v1/namespaces/${victim.ns}`);
  await kube.delete(`/api/v1/namespaces/${flooder.ns}`);
  const answers = (p: Phase) => ({
    sentPerS: p.sentPerS,
    ok: p.answers.ok,
    tooMany: p.answers.tooMany,
    otherAnswers: p.answers.otherAnswers,
    errors: p.answers.errors,
  });
  results.flood = {
    what: `one tenant's control API calls (GET /sandboxes and GET /sandboxes/{id} in turn, ${VICTIM_PER_S}/s from independent clients, ${PHASE_S} s) alone and while another tenant floods the gateway (GET /sandboxes over ${FLOOD_CONNECTIONS} connections, each call sent when the last is answered, at niceness ${FLOOD_NICENESS}) (ms), and the same flood against the least rate-limited server (floor-limits.ts); the flooded percentiles over the victim's alone and over the floor's flooded; each tenant's answers (tooMany: 429); each process's CPU in cores`,
    victimAlone: alone.latency,
    victimFlooded: flooded.latency,
    victimFloodedOverAlone: ratios(flooded.latency, alone.latency),
    victimFloorFlooded: floorFlooded.latency,
    victimFloodedOverFloor: ratios(flooded.latency, floorFlooded.latency),
    victimAnswers: {
      alone: answers(alone),
      flooded: answers(flooded),
      floorFlooded: answers(floorFlooded),
    },
    flooder: { connections: FLOOD_CONNECTIONS, ...flooded.flooding },
    flooderAtFloor: { connections: FLOOD_CONNECTIONS, ...floorFlooded.flooding },
    cpuCores: { alone: alone.cores, flooded: flooded.cores, floorFlooded: floorFlooded.cores },
  };
  const refused = alone.answers.tooMany + flooded.answers.tooMany;
  if (refused > 0)
    console.log(`flood: the victim was refused ${refused} calls (429) under its rate`);
}

/**
 * The victim's calls at `arrivals` to `base` while the flooder (flood-client.ts, a process of its
 * own) floods it: on this event loop its thousands of answers a second would queue before the
 * victim's timers and reads, and the victim's latency would measure the flooder's client rather
 * than the server.
 */
async function floodedPhase(
  arrivals: number[],
  base: string,
  victimKey: string,
  flooderKey: string,
) {
  const flood = await ownProcess(
    [
      join(ROOT, "bench", "scenarios", "flood-client.ts"),
      base,
      flooderKey,
      String(FLOOD_CONNECTIONS),
      String(FLOOD_NICENESS),
    ],
    "ready",
    true,
  );
  try {
    await sleep(FLOOD_SETTLE_S * 1000);
    const counted = lineStarting(flood, "counts ");
    flood.stdin!.write("mark\n");
    const phase = await victimPhase(arrivals, victimKey, base);
    flood.stdin!.write("stop\n");
    return { ...phase, flooding: JSON.parse(await counted) as AnswerSummary };
  } finally {
    killGroup(flood);
  }
}

/** A tenant of the gateway: a namespace of its own and an API key. */
async function tenant(kube: Kube, prefix: string) {
  const ns = await kube.namespace(prefix);
  const key = `e2b_${randomBytes(20).toString("hex")}`;
  await kube.mustCreate(paths.podapikeys(ns), podAPIKey(`${prefix}-agents`, key));
  return { ns, key };
}

/** A control API call's answer: its time to the end of the body; no status when none came. */
type Answer = { ms: number; status?: number; retryAfter: boolean };

const keepAlive = new Agent({ keepAlive: true });

/** One GET of the control API with `key`, timed from the request to the end of the answer. */
function call(path: string, key: string, base = GATEWAY): Promise<Answer> {
  return new Promise(resolve => {
    const t0 = now();
    const req = request(
      new URL(path, base),
      { headers: { "X-API-Key": key }, agent: keepAlive },
      res => {
        res.resume();
        res.on("end", () =>
          resolve({
            ms: now() - t0,
            status: res.statusCode,
            retryAfter: res.headers["retry-after"] !== undefined,
          }),
        );
      },
    );
    req.setTimeout(CALL_TIMEOUT_MS, () => req.destroy(new Error("timed out")));
    req.on("error", () => resolve({ ms: now() - t0, retryAfter: false }));
    req.end();
  });
}

/** Waits until the gateway answers `path` with `key` 200: it knows the key and what it names. */
async function untilServed(path: string, key: string, timeoutMs = 60_000) {
  const end = Date.now() + timeoutMs;
  let last: Answer;
  do {
    last = await call(path, key);
    if (last.status === 200) return;
    await sleep(200);
  } while (Date.now() < end);
  throw new Error(`the gateway never served ${path} (last answer: ${last.status ?? "none"})`);
}

type Phase = {
  latency: ReturnType<typeof stats>;
  sentPerS: number;
  answers: AnswerSummary;
  cores: Record<string, number>;
};

/** The victim's calls at `arrivals`: their latencies, their answers and each role's CPU. */
async function victimPhase(arrivals: number[], key: string, base = GATEWAY): Promise<Phase> {
  const counts = new AnswerCounts(now());
  const [cpuBefore, t0] = [cpuByRole(roleOf), now()];
  const { results: answers, rate } = await openLoop(arrivals, i =>
    call(VICTIM_CALLS[i % VICTIM_CALLS.length], key, base),
  );
  const [cpuAfter, t1] = [cpuByRole(roleOf), now()];
  for (const a of answers) {
    if (a.status === undefined) counts.failed();
    else counts.answered(a.status, a.retryAfter);
  }
  const cpu = cpuBetween(cpuBefore, cpuAfter);
  return {
    latency: stats(answers.filter(a => a.status !== undefined).map(a => a.ms)),
    sentPerS: hundredths(rate),
    answers: counts.summary(t1),
    cores: Object.fromEntries(
      [...cpu]
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([r, ms]) => [r, hundredths(ms / (t1 - t0))]),
    ),
  };
}

/** The machine's processes by their part in the flood; the API server and the rest are `other`. */
function roleOf(pid: number, command: string): string {
  if (pid === process.pid) return "victim";
  if (command.includes("flood-client.ts")) return "flooder";
  if (command.includes("floor-limits.ts")) return "floor";
  if (command.includes("gateway/main.ts")) return "gateway";
  return "other";
}

/** The text after `prefix` of the first whole line of the process's output that starts so. */
function lineStarting(proc: ChildProcess, prefix: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = "";
    proc.stdout!.on("data", d => {
      text += String(d);
      const line = text.split("\n").find(l => l.startsWith(prefix));
      if (line !== undefined && text.includes(`${line}\n`)) resolve(line.slice(prefix.length));
    });
    proc.on("close", code =>
      reject(new Error(`flood-client.ts ended (${code}) before its counts`)),
    );
  });
}
