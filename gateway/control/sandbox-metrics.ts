import { request } from "undici";
import { z } from "zod";
import type { PodBox } from "../../capabilities/api/kinds";
import { AnswerTooLarge, MAX_DAEMON_ANSWER_BYTES, readBoundedText } from "../bounded-read";
import { ApiError, ended, endpointOf, stateOf } from "../e2b";
import { CONTROL_HEADER } from "../podd-control";
import type { ControlContext } from "./context";
import type { Answer } from "./routes";

/** What podd's (envd's) `GET /metrics` answers. */
const poddMetricsSchema = z.object({
  ts: z.number().int(),
  cpu_count: z.number().int(),
  cpu_used_pct: z.number(),
  mem_used: z.number().int(),
  mem_total: z.number().int(),
  mem_cache: z.number().int(),
  disk_used: z.number().int(),
  disk_total: z.number().int(),
});

/** E2B's `SandboxMetric`. */
type SandboxMetric = {
  timestamp: string;
  timestampUnix: number;
  cpuCount: number;
  cpuUsedPct: number;
  memUsed: number;
  memTotal: number;
  memCache: number;
  diskUsed: number;
  diskTotal: number;
};

const safeJson = (text: string): unknown => {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
};

/**
 * E2B's sandbox metrics, as each sandbox's daemon samples them (not the gateway's own Prometheus
 * metrics, ../metrics.ts).
 */
export class SandboxMetricsApi {
  constructor(private readonly context: ControlContext) {}

  /**
   * `GET /sandboxes/{id}/metrics` (`start`, `end` in Unix seconds): the sandbox's CPU, memory and
   * disk, as its daemon samples its cgroup now. CubePod keeps no history: the answer is that one
   * sample when the range holds it (its end taken to the collection bucket, as E2B's are), none
   * for a paused sandbox.
   */
  async ofSandbox(ns: string, id: string, query: URLSearchParams): Promise<Answer> {
    const box = this.context.own(ns, id);
    const seconds = (name: string, fallback: number) => {
      const raw = query.get(name);
      if (raw === null || raw === "") return fallback;
      if (!/^\d+$/.test(raw)) {
        throw new ApiError(400, `${name}: expected Unix seconds, got "${raw}"`);
      }
      return Number(raw);
    };
    const now = Math.floor(Date.now() / 1000);
    const start = seconds("start", 0);
    const end = seconds("end", now);
    if (start > end) throw new ApiError(400, `start (${start}) is after end (${end})`);
    const sample = await this.#sample(box);
    const inRange = sample && sample.timestampUnix >= start && sample.timestampUnix <= end + 5;
    return { status: 200, body: inRange ? [sample] : [] };
  }

  /** `GET /sandboxes/metrics?sandbox_ids=a,b`: a sample of each running sandbox named. */
  async ofSandboxes(ns: string, query: URLSearchParams): Promise<Answer> {
    const ids = [...new Set((query.get("sandbox_ids") ?? "").split(",").filter(Boolean))];
    if (ids.length === 0 || ids.length > 100) {
      throw new ApiError(400, `sandbox_ids: expected 1 to 100 sandbox IDs, got ${ids.length}`);
    }
    const sandboxes: Record<string, SandboxMetric> = {};
    await Promise.all(
      ids.map(async id => {
        const box = this.context.boxes.get(ns, id);
        const sample = box && !ended(box) ? await this.#sample(box) : undefined;
        if (sample) sandboxes[id] = sample;
      }),
    );
    return { status: 200, body: { sandboxes } };
  }

  /** The daemon's `GET /metrics` of a running box, in E2B's form; undefined when it is not running. */
  async #sample(box: PodBox): Promise<SandboxMetric | undefined> {
    const { config } = this.context;
    const at = endpointOf(box);
    if (!at || stateOf(box) !== "running") return undefined;
    const id = box.metadata!.name!;
    let res;
    try {
      res = await request(`http://${at.ip}:${at.envdPort}/metrics`, {
        headers: {
          [CONTROL_HEADER]: config.tokenKeys.credential(box)!,
          "X-Access-Token": config.tokenKeys.accessToken(box),
        },
        headersTimeout: 5000,
        bodyTimeout: 5000,
      });
    } catch (e) {
      // The error's text names the Pod's address, which is the cluster's, not the tenant's.
      const why = (e as { code?: string }).code ?? (e as Error).name;
      throw new ApiError(502, `sandbox "${id}": its daemon did not answer /metrics (${why})`);
    }
    let text: string;
    try {
      text = await readBoundedText(res.body, MAX_DAEMON_ANSWER_BYTES);
    } catch (e) {
      const why = e instanceof AnswerTooLarge ? e.message : "its answer broke off";
      throw new ApiError(502, `sandbox "${id}": its daemon's /metrics failed: ${why}`);
    }
    const parsed = poddMetricsSchema.safeParse(res.statusCode === 200 ? safeJson(text) : null);
    if (!parsed.success) {
      throw new ApiError(502, `sandbox "${id}": its daemon's /metrics answered ${res.statusCode}`);
    }
    const m = parsed.data;
    return {
      timestamp: new Date(m.ts * 1000).toISOString(),
      timestampUnix: m.ts,
      cpuCount: m.cpu_count,
      cpuUsedPct: m.cpu_used_pct,
      memUsed: m.mem_used,
      memTotal: m.mem_total,
      memCache: m.mem_cache,
      diskUsed: m.disk_used,
      diskTotal: m.disk_total,
    };
  }
}
