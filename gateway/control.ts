import { request } from "undici";
import { z } from "zod";
import { API_VERSION, DEFAULT_SANDBOX_USER } from "../capabilities/api/common";
import type { CubePodTemplate, PodBox, PodWarmPool } from "../capabilities/api/kinds";
import { KubeError, type ApiClient } from "../capabilities/client/api-client";
import { paths } from "../capabilities/client/paths";
import { kubeTime } from "../capabilities/kit/conditions";
import { ANNOTATION_LAST_ACTIVITY, rfc3339Time } from "../capabilities/reaper/activity";
import type { GatewayConfig } from "./config";
import { sandboxStart } from "./metrics";
import {
  accessToken,
  ANNOTATION_AUTO_RESUME,
  ANNOTATION_METADATA,
  ANNOTATION_STARTED,
  ANNOTATION_TEMPLATE,
  ANNOTATION_TIMEOUT,
  ApiError,
  connectSchema,
  forkSchema,
  DEFAULT_TIMEOUT_SECONDS,
  ended,
  endpointOf,
  invalidBody,
  listedSandbox,
  matchesMetadata,
  metadataFilter,
  newSandboxId,
  newSandboxSchema,
  notFound,
  sandbox,
  startedAt,
  stateOf,
  templateIdOf,
  templateOf,
  timeoutSchema,
  ENV_VARS_SECRET_TYPE,
  envVarsOf,
  envVarsSecretName,
} from "./e2b";
import { CONTROL_HEADER } from "./podd-control";
import {
  ANNOTATION_SNAPSHOT_NAME,
  ANNOTATION_SNAPSHOT_OF,
  formatName,
  isSnapshot,
  LABEL_SNAPSHOT,
  parseSnapshotName,
  snapshotIdOf,
  snapshotInfo,
  snapshotsNamed,
} from "./snapshots";
import type { NamespacedCache, SandboxIndex } from "./sandboxes";

/** Where a list's next page starts: the last listed sandbox's sort key, opaque to the client. */
const pageToken = {
  write: (k: { at: number; name: string }) =>
    Buffer.from(JSON.stringify([k.at, k.name])).toString("base64url"),
  read(token: string): { at: number; name: string } {
    try {
      const [at, name] = JSON.parse(Buffer.from(token, "base64url").toString()) as unknown[];
      if (typeof at === "number" && typeof name === "string") return { at, name };
    } catch {
      // answered below
    }
    throw new ApiError(400, `nextToken: "${token}" is not a token this API gave`);
  },
};

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

/** A list's `limit`: 1 to 100, 100 when not given. */
function limitOf(query: URLSearchParams): number {
  const raw = query.get("limit") ?? "100";
  const limit = /^\d+$/.test(raw) ? Number(raw) : NaN;
  if (!(limit >= 1 && limit <= 100)) {
    throw new ApiError(400, `limit: expected an integer from 1 to 100, got "${raw}"`);
  }
  return limit;
}

const snapshotSchema = z.looseObject({ name: z.string().min(1).optional() });

/** The start stamp every box the gateway makes carries (lists sort by it). */
const startedNow = () => ({ [ANNOTATION_STARTED]: new Date().toISOString() });

/** What a create (from a template or a snapshot) keeps of its request on the box. */
const createdAnnotations = (input: z.infer<typeof newSandboxSchema>) => ({
  [ANNOTATION_TEMPLATE]: input.templateID,
  [ANNOTATION_METADATA]: JSON.stringify(input.metadata ?? {}),
  [ANNOTATION_TIMEOUT]: String(input.timeout ?? DEFAULT_TIMEOUT_SECONDS),
  ...(input.autoResume?.enabled ? { [ANNOTATION_AUTO_RESUME]: "true" } : {}),
});

/** The `Sandbox` a create, connect or resume answers. */
type StartedSandbox = ReturnType<typeof sandbox>;

/** What a handler answers: a status and a JSON body (none for 204), and extra headers. */
export type Answer = { status: number; body?: unknown; headers?: Record<string, string> };

/** How late a start may leave a sandbox's end before it is set again from the start. */
const START_SLACK_MS = 1000;

const endAt = (seconds: number) => new Date(Date.now() + seconds * 1000).toISOString();

/**
 * E2B's control API over PodBoxes, for one tenant: every handler acts in the namespace the
 * request's API key names, and a sandbox of another namespace does not exist for it (404).
 */
export class ControlApi {
  readonly #resuming = new Map<string, Promise<StartedSandbox>>();

  /**
   * @param templates, pools watch-fed caches: a create reads neither from the API server (a
   *   template the cache has not seen yet is read once, as GitOps may apply it a moment before)
   */
  constructor(
    private readonly client: ApiClient,
    private readonly boxes: SandboxIndex,
    private readonly templates: NamespacedCache<CubePodTemplate>,
    private readonly pools: NamespacedCache<PodWarmPool>,
    private readonly config: GatewayConfig,
  ) {}

  /** `POST /sandboxes`, `POST /v2/sandboxes`. */
  async create(ns: string, body: unknown): Promise<Answer> {
    const input = parse(newSandboxSchema, body);
    const templateID = input.templateID;
    const snapshot = snapshotsNamed(this.boxes.inNamespace(ns), templateID, ns)[0];
    if (snapshot) return this.#fromSnapshot(ns, snapshot, input);
    if (!/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(templateID)) {
      throw new ApiError(
        400,
        `template "${templateID}": no snapshot of that name, and no PodTemplate can have it`,
      );
    }
    const template =
      this.templates.get(ns, templateID) ??
      (await this.client.get<CubePodTemplate>(paths.podTemplates(ns, templateID)));
    if (!template) {
      throw new ApiError(
        400,
        `template "${templateID}": no PodTemplate of that name in your namespace`,
      );
    }
    const pool = this.pools
      .inNamespace(ns)
      .filter(p => p.spec?.templateRef === templateID && !p.metadata?.deletionTimestamp)
      .map(p => p.metadata!.name!)
      .sort()[0];
    const spec: Record<string, string> = pool ? { warmPoolRef: pool } : { templateRef: templateID };
    // The box then reaches nothing, whatever its template allows.
    if (input.allow_internet_access === false) spec.egress = "None";
    const annotations = createdAnnotations(input);
    const started = await this.#make(ns, spec, annotations, input, input.envVars ?? {});
    return { status: 201, body: started };
  }

  /** A sandbox whose box forks a snapshot's, as a fork of a sandbox does. */
  async #fromSnapshot(
    ns: string,
    snapshot: PodBox,
    input: z.infer<typeof newSandboxSchema>,
  ): Promise<Answer> {
    const spec: Record<string, string> = {
      templateRef: templateOf(snapshot)!,
      forkFrom: snapshot.metadata!.name!,
      ...(snapshot.spec?.egress ? { egress: snapshot.spec.egress } : {}),
    };
    if (input.allow_internet_access === false) spec.egress = "None";
    const annotations = createdAnnotations(input);
    const envVars = {
      ...(await this.#keptEnvVars(ns, snapshot.metadata!.name!)),
      ...input.envVars,
    };
    return { status: 201, body: await this.#make(ns, spec, annotations, input, envVars) };
  }

  /**
   * `POST /sandboxes/{id}/snapshots` (`{name?}`): a paused box forked from the sandbox's two
   * volumes, kept until deleted; the sandbox runs on. Answered once the copy is made.
   */
  async snapshot(ns: string, id: string, body: unknown): Promise<Answer> {
    const input = parse(snapshotSchema, body ?? {});
    const source = this.#own(ns, id);
    const templateRef = templateOf(source);
    if (!templateRef) throw new ApiError(409, `sandbox "${id}" has no template to snapshot yet`);
    const name = input.name === undefined ? undefined : parseSnapshotName(input.name, ns);
    const boxName = newSandboxId();
    const box = {
      apiVersion: API_VERSION,
      kind: "PodBox",
      metadata: {
        name: boxName,
        labels: { [LABEL_SNAPSHOT]: "true" },
        annotations: {
          ...startedNow(),
          [ANNOTATION_SNAPSHOT_OF]: id,
          [ANNOTATION_TEMPLATE]: templateIdOf(source),
          ...(name ? { [ANNOTATION_SNAPSHOT_NAME]: formatName(name) } : {}),
        },
      },
      spec: {
        templateRef,
        forkFrom: id,
        ...(source.spec?.egress ? { egress: source.spec.egress } : {}),
      },
    };
    const created = await this.client.create<PodBox>(paths.podBoxes(ns), box as unknown as PodBox);
    try {
      // The copy is made when the fork first starts; it is paused straight after.
      const running = await this.boxes.waitFor(
        ns,
        boxName,
        // The watch may not show the new box yet: only its phase ends the wait.
        b => b?.status?.phase === "Running" || b?.status?.phase === "Failed",
        this.config.startTimeoutMs,
      );
      if (running?.status?.phase !== "Running") {
        throw new ApiError(
          502,
          `snapshot of "${id}" failed: ${running?.status?.message ?? "gone"}`,
        );
      }
      await this.client.mergePatch(paths.podBoxes(ns, boxName), {
        spec: { desiredState: "Paused" },
      });
      await this.#keepEnvVars(created, await this.#keptEnvVars(ns, id));
    } catch (e) {
      await this.client.delete(paths.podBoxes(ns, boxName)).catch(() => undefined);
      if (e instanceof ApiError) throw e;
      throw new ApiError(504, `snapshot of "${id}" did not complete: ${(e as Error).message}`);
    }
    return { status: 201, body: snapshotInfo(created) };
  }

  /**
   * `GET /snapshots` (`sandboxID`, `name`, `limit`, `nextToken`): the namespace's snapshots,
   * newest first, one per name.
   */
  listSnapshots(ns: string, query: URLSearchParams): Answer {
    const limit = limitOf(query);
    const name = query.get("name");
    const source = query.get("sandboxID");
    if (name) parseSnapshotName(name, ns);
    // Newest first, by name the other way on a tie, as the page token reads them.
    const everyOne = this.boxes
      .inNamespace(ns)
      .filter(isSnapshot)
      .sort(
        (a, b) =>
          startedAt(b) - startedAt(a) ||
          (b.metadata?.name ?? "").localeCompare(a.metadata?.name ?? ""),
      );
    let all = name ? snapshotsNamed(everyOne, name, ns) : everyOne;
    if (source) all = all.filter(b => b.metadata?.annotations?.[ANNOTATION_SNAPSHOT_OF] === source);
    const seen = new Set<string>();
    all = all
      .filter(b => !b.metadata?.deletionTimestamp)
      .filter(b => {
        const id = snapshotIdOf(b);
        return !seen.has(id) && Boolean(seen.add(id));
      });
    const key = (b: PodBox) => ({ at: startedAt(b), name: b.metadata?.name ?? "" });
    const token = query.get("nextToken");
    const after = token ? pageToken.read(token) : undefined;
    const from = after
      ? all.findIndex(
          b => key(b).at < after.at || (key(b).at === after.at && key(b).name < after.name),
        )
      : 0;
    const page = from < 0 ? [] : all.slice(from, from + limit);
    const more = from >= 0 && from + limit < all.length;
    return {
      status: 200,
      body: page.map(snapshotInfo),
      headers: more ? { "X-Next-Token": pageToken.write(key(page[page.length - 1])) } : {},
    };
  }

  /**
   * `DELETE /templates/{id}`, as the SDKs delete a snapshot: every tag of it, and its volumes.
   * CubePod's templates are PodTemplates, which this API does not delete.
   */
  async deleteTemplate(ns: string, rawId: string): Promise<Answer> {
    let id: string;
    try {
      id = decodeURIComponent(rawId);
    } catch {
      throw new ApiError(400, `template ID "${rawId}" is not percent-encoded`);
    }
    const named = snapshotsNamed(this.boxes.inNamespace(ns), id.replace(/:[^/:]*$/, ""), ns);
    if (named.length === 0) {
      if (this.templates.get(ns, id)) {
        throw new ApiError(
          400,
          `template "${id}" is a PodTemplate: delete it with the Kubernetes API`,
        );
      }
      throw new ApiError(404, `snapshot "${id}" not found`);
    }
    await Promise.all(
      named.map(b =>
        this.client.delete(paths.podBoxes(ns, b.metadata!.name!)).catch(e => {
          if (!(e instanceof KubeError && e.status === 404)) throw e;
        }),
      ),
    );
    await Promise.all(
      named.map(b =>
        this.boxes
          .waitFor(ns, b.metadata!.name!, x => !x || Boolean(x.metadata?.deletionTimestamp), 5000)
          .catch(() => undefined),
      ),
    );
    return { status: 204 };
  }

  /**
   * `POST /sandboxes/{id}/fork` (`{timeout, count: 1-20}`): `count` new sandboxes whose boxes fork
   * the parent's two volumes (`forkFrom`), each answered as `{sandbox}` or `{error}`. E2B forks
   * memory too; CubePod forks the rootfs and the workspace, and starts each fork's daemon anew.
   */
  async fork(ns: string, id: string, body: unknown): Promise<Answer> {
    const input = parse(forkSchema, body ?? {});
    const parent = this.#own(ns, id);
    const templateID = templateOf(parent);
    if (!templateID) throw new ApiError(409, `sandbox "${id}" has no template to fork with yet`);
    const annotations = {
      [ANNOTATION_TEMPLATE]: parent.metadata?.annotations?.[ANNOTATION_TEMPLATE] ?? templateID,
      [ANNOTATION_METADATA]: parent.metadata?.annotations?.[ANNOTATION_METADATA] ?? "{}",
    };
    // A fork's daemon gets its parent's environment, as E2B's fork copies it with the memory.
    const envVars = await this.#keptEnvVars(ns, id);
    // A fork of a sandbox without internet access has none either.
    const spec = {
      templateRef: templateID,
      forkFrom: id,
      ...(parent.spec?.egress ? { egress: parent.spec.egress } : {}),
    };
    const forks = await Promise.all(
      Array.from({ length: input.count ?? 1 }, () =>
        this.#make(ns, spec, annotations, input, envVars).then(
          sandbox => ({ sandbox }),
          e => ({ error: (e instanceof ApiError ? e : new ApiError(500, String(e))).body() }),
        ),
      ),
    );
    return { status: 201, body: forks };
  }

  /**
   * Creates a sandbox's box and waits until it serves ({@link #start}); one that does not start
   * leaves nothing behind: its box, Pod and volumes go. The timeout is the box's own
   * (`spec.expiresAt`): the operator ends or pauses it with no gateway running.
   */
  async #make(
    ns: string,
    spec: Record<string, string>,
    annotations: Record<string, string>,
    lifetime: { timeout?: number; autoPause?: boolean },
    envVars: Record<string, string>,
  ) {
    const id = newSandboxId();
    const timeout = lifetime.timeout ?? DEFAULT_TIMEOUT_SECONDS;
    // A sandbox's timeout counts from its start, as E2B's does: a box waiting for a standby or
    // starting cold must not expire first. A short timeout is set again once it runs, as is any
    // after a start that took long.
    const whileStarting = Math.max(timeout, Math.ceil(this.config.startTimeoutMs / 1000));
    const box = {
      apiVersion: API_VERSION,
      kind: "PodBox",
      metadata: { name: id, annotations: { ...annotations, ...startedNow() } },
      spec: {
        ...spec,
        expiresAt: endAt(whileStarting),
        ...(lifetime.autoPause ? { onExpiry: "Pause" } : {}),
      },
    };
    const since = Date.now();
    const written = sandboxStart.startTimer({ step: "write" });
    const created = await this.client.create<PodBox>(paths.podBoxes(ns), box as unknown as PodBox);
    written();
    try {
      const [started] = await Promise.all([
        this.#start(ns, id, envVars),
        this.#keepEnvVars(created, envVars),
      ]);
      if (whileStarting !== timeout || Date.now() - since > START_SLACK_MS) {
        await this.#setEnd(ns, id, timeout);
      }
      return started;
    } catch (e) {
      await this.client.delete(paths.podBoxes(ns, id)).catch(() => undefined);
      throw e;
    }
  }

  /** `POST /sandboxes/{id}/connect` (v1, v2, and the older `/resume`). */
  async connect(ns: string, id: string, body: unknown): Promise<Answer> {
    const input = parse(connectSchema, body ?? {});
    const box = this.#own(ns, id);
    if (endpointOf(box)) {
      // A connect only ever lengthens a running sandbox's life.
      if (input.timeout !== undefined && endAt(input.timeout) > (box.spec?.expiresAt ?? "")) {
        await this.#setEnd(ns, id, input.timeout);
      }
      return {
        status: 200,
        body: sandbox(box, accessToken(this.config.tokenKey, box), this.config.domain),
      };
    }
    return { status: 201, body: await this.resume(ns, id, input.timeout) };
  }

  /**
   * Resumes a paused sandbox and waits until it serves: the spec says run, with a new expiry
   * (`timeout`, else the one it was created with), and (for a box the reaper paused) new activity
   * says so too. Concurrent resumes of one box (a burst of traffic) share one.
   */
  resume(ns: string, id: string, timeout?: number): Promise<StartedSandbox> {
    const key = `${ns}/${id}`;
    const pending = this.#resuming.get(key);
    if (pending) return pending;
    const seconds =
      timeout ??
      Number(
        this.boxes.get(ns, id)?.metadata?.annotations?.[ANNOTATION_TIMEOUT] ??
          DEFAULT_TIMEOUT_SECONDS,
      );
    // Its timeout counts from when it serves again, as a create's does (#make).
    const whileStarting = Math.max(seconds, Math.ceil(this.config.startTimeoutMs / 1000));
    const run = (async () => {
      const since = Date.now();
      const written = sandboxStart.startTimer({ step: "write" });
      const patched = await this.client.mergePatch<PodBox>(paths.podBoxes(ns, id), {
        metadata: { annotations: { [ANNOTATION_LAST_ACTIVITY]: kubeTime(new Date()) } },
        spec: { desiredState: "Running", expiresAt: endAt(whileStarting) },
      });
      written();
      // The operator may be pausing it still (its expiry came): only a status that answers
      // this write says where it runs.
      const generation = patched.metadata?.generation ?? 0;
      const started = await this.#start(ns, id, await this.#keptEnvVars(ns, id), generation);
      if (whileStarting !== seconds || Date.now() - since > START_SLACK_MS) {
        await this.#setEnd(ns, id, seconds);
      }
      return started;
    })().finally(() => this.#resuming.delete(key));
    this.#resuming.set(key, run);
    return run;
  }

  /** `POST /sandboxes/{id}/pause`: 204 once paused; 409 when it already is. */
  async pause(ns: string, id: string): Promise<Answer> {
    const box = this.#own(ns, id);
    if (stateOf(box) === "paused") {
      throw new ApiError(409, `Error pausing sandbox - sandbox '${id}' is already paused`);
    }
    await this.client.mergePatch(paths.podBoxes(ns, id), { spec: { desiredState: "Paused" } });
    await this.boxes.waitFor(
      ns,
      id,
      b => !b || b.status?.phase === "Paused",
      this.config.startTimeoutMs,
    );
    return { status: 204 };
  }

  /** `DELETE /sandboxes/{id}`: the box and (its reclaim policy being Delete) its volumes. */
  async kill(ns: string, id: string): Promise<Answer> {
    this.#own(ns, id);
    try {
      await this.client.delete(paths.podBoxes(ns, id));
    } catch (e) {
      if (e instanceof KubeError && e.status === 404) throw notFound(id);
      throw e;
    }
    // Once this replica's watch shows the deletion, a second kill through it is a 404.
    await this.boxes
      .waitFor(ns, id, b => !b || Boolean(b.metadata?.deletionTimestamp), 5000)
      .catch(() => undefined);
    return { status: 204 };
  }

  /** `POST /sandboxes/{id}/timeout`. */
  async setTimeout(ns: string, id: string, body: unknown): Promise<Answer> {
    const input = parse(timeoutSchema, body);
    this.#own(ns, id);
    await this.#setEnd(ns, id, input.timeout);
    return { status: 204 };
  }

  /** `GET /sandboxes/{id}`. */
  info(ns: string, id: string): Answer {
    const box = this.#own(ns, id);
    return {
      status: 200,
      body: {
        ...listedSandbox(box, this.#templateOf(box)),
        envdAccessToken: accessToken(this.config.tokenKey, box),
        domain: this.config.domain,
        allowInternetAccess: box.spec?.egress !== "None",
        lifecycle: {
          onTimeout: box.spec?.onExpiry === "Pause" ? "pause" : "kill",
          autoResume: box.metadata?.annotations?.[ANNOTATION_AUTO_RESUME] === "true",
        },
      },
    };
  }

  /**
   * `GET /sandboxes/{id}/metrics` (`start`, `end` in Unix seconds): the sandbox's CPU, memory and
   * disk, as its daemon samples its cgroup now. CubePod keeps no history: the answer is that one
   * sample when the range holds it (its end taken to the collection bucket, as E2B's are), none
   * for a paused sandbox.
   */
  async metrics(ns: string, id: string, query: URLSearchParams): Promise<Answer> {
    const box = this.#own(ns, id);
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
  async metricsOf(ns: string, query: URLSearchParams): Promise<Answer> {
    const ids = [...new Set((query.get("sandbox_ids") ?? "").split(",").filter(Boolean))];
    if (ids.length === 0 || ids.length > 100) {
      throw new ApiError(400, `sandbox_ids: expected 1 to 100 sandbox IDs, got ${ids.length}`);
    }
    const sandboxes: Record<string, SandboxMetric> = {};
    await Promise.all(
      ids.map(async id => {
        const box = this.boxes.get(ns, id);
        const sample = box && !ended(box) ? await this.#sample(box) : undefined;
        if (sample) sandboxes[id] = sample;
      }),
    );
    return { status: 200, body: { sandboxes } };
  }

  /** The daemon's `GET /metrics` of a running box, in E2B's form; undefined when it is not running. */
  async #sample(box: PodBox): Promise<SandboxMetric | undefined> {
    const at = endpointOf(box);
    if (!at || stateOf(box) !== "running") return undefined;
    const id = box.metadata!.name!;
    let res;
    try {
      res = await request(`http://${at.ip}:${at.envdPort}/metrics`, {
        headers: {
          [CONTROL_HEADER]: this.config.control.credential(box)!,
          "X-Access-Token": accessToken(this.config.tokenKey, box),
        },
        headersTimeout: 5000,
        bodyTimeout: 5000,
      });
    } catch (e) {
      throw new ApiError(502, `sandbox "${id}": its daemon did not answer /metrics: ${e}`);
    }
    const text = await res.body.text();
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

  /**
   * `GET /sandboxes` and `GET /v2/sandboxes`: the namespace's sandboxes, filtered by state,
   * metadata, `template` and `startedAfter` (inclusive), sorted by start time (`order`, newest
   * first by default), `limit` at a time (at most 100). `X-Next-Token` names where the next page
   * starts; `X-Total-Running` counts the running matches when running ones were asked for.
   */
  list(ns: string, query: URLSearchParams, v2: boolean): Answer {
    const states = (query.get("state") ?? (v2 ? "running,paused" : "running")).split(",");
    const bad = states.filter(s => s !== "running" && s !== "paused");
    if (bad.length > 0) {
      throw new ApiError(400, `state: expected running or paused, got "${bad.join(",")}"`);
    }
    const filter = metadataFilter(query.get("metadata"));
    const limit = limitOf(query);
    const order = query.get("order") ?? "desc";
    if (order !== "asc" && order !== "desc") {
      throw new ApiError(400, `order: expected asc or desc, got "${order}"`);
    }
    const afterRaw = query.get("startedAfter");
    const after = afterRaw === null ? -Infinity : rfc3339Time(afterRaw);
    if (after === undefined) {
      throw new ApiError(400, `startedAfter: expected an RFC 3339 time, got "${afterRaw}"`);
    }
    const template = query.get("template");
    const sign = order === "asc" ? 1 : -1;
    const key = (b: PodBox) => ({ at: startedAt(b), name: b.metadata?.name ?? "" });
    const compare = (a: { at: number; name: string }, b: { at: number; name: string }) =>
      sign * (a.at - b.at || a.name.localeCompare(b.name));
    const all = this.boxes
      .inNamespace(ns)
      .filter(b => !ended(b) && !isSnapshot(b))
      .filter(b => states.includes(stateOf(b)) && matchesMetadata(b, filter))
      .filter(b => (!template || templateIdOf(b) === template) && startedAt(b) >= after)
      .sort((a, b) => compare(key(a), key(b)));
    const token = query.get("nextToken");
    const from = token ? all.findIndex(b => compare(key(b), pageToken.read(token)) > 0) : 0;
    const page = from < 0 ? [] : all.slice(from, from + limit);
    const more = from >= 0 && from + limit < all.length;
    const headers: Record<string, string> = {};
    if (states.includes("running")) {
      headers["X-Total-Running"] = String(all.filter(b => stateOf(b) === "running").length);
    }
    if (more) headers["X-Next-Token"] = pageToken.write(key(page[page.length - 1]));
    return {
      status: 200,
      body: page.map(b => listedSandbox(b, this.#templateOf(b))),
      headers,
    };
  }

  /**
   * Keeps a create's envVars for the daemon of every resume, which starts anew: in a Secret (they
   * often carry credentials), owned by the box so that it goes with it.
   */
  async #keepEnvVars(box: PodBox, envVars: Record<string, string>): Promise<void> {
    if (Object.keys(envVars).length === 0) return;
    const { namespace, name, uid } = box.metadata!;
    await this.client.create(paths.secrets(namespace!), {
      apiVersion: "v1",
      kind: "Secret",
      metadata: {
        name: envVarsSecretName(name!),
        ownerReferences: [{ apiVersion: API_VERSION, kind: "PodBox", name: name!, uid: uid! }],
      },
      type: ENV_VARS_SECRET_TYPE,
      data: { envVars: Buffer.from(JSON.stringify(envVars)).toString("base64") },
    });
  }

  /** The envVars a create kept for the box now named `id` (its own: owned by its UID). */
  async #keptEnvVars(ns: string, id: string): Promise<Record<string, string>> {
    type Kept = { metadata?: { ownerReferences?: { uid: string }[] }; data?: { envVars?: string } };
    const kept = await this.client.get<Kept>(paths.secrets(ns, envVarsSecretName(id)));
    const uid = this.boxes.get(ns, id)?.metadata?.uid;
    if (!kept?.data?.envVars || !kept.metadata?.ownerReferences?.some(o => o.uid === uid)) {
      return {};
    }
    return envVarsOf(Buffer.from(kept.data.envVars, "base64").toString("utf8"));
  }

  #templateOf(box: PodBox): CubePodTemplate | undefined {
    const name = templateOf(box);
    return name ? this.templates.get(box.metadata!.namespace!, name) : undefined;
  }

  /** The box of that ID in the key's namespace, as the watch last showed it; else 404. */
  #own(ns: string, id: string): PodBox {
    const box = this.boxes.get(ns, id);
    if (!box || ended(box) || isSnapshot(box)) throw notFound(id);
    return box;
  }

  /**
   * Sets the box's expiry, and returns once the watch shows the write, so that the caller's next
   * read (a getInfo) sees it: every answer comes from the watch-fed cache.
   */
  async #setEnd(ns: string, id: string, seconds: number): Promise<void> {
    const written = await this.client.mergePatch<PodBox>(paths.podBoxes(ns, id), {
      spec: { expiresAt: endAt(seconds) },
    });
    const version = BigInt(written.metadata?.resourceVersion ?? "0");
    await this.boxes
      .waitFor(ns, id, b => !b || BigInt(b.metadata?.resourceVersion ?? "0") >= version, 5000)
      .catch(() => undefined);
  }

  /**
   * Waits (on the box's watch events) until the box runs, then hands its daemon its environment
   * and access token (`POST /init`, after `GET /health` answers when it does not yet), as E2B's
   * orchestrator does; answers the `Sandbox` the SDK gets.
   */
  async #start(
    ns: string,
    id: string,
    envVars: Record<string, string>,
    generation = 0,
  ): Promise<StartedSandbox> {
    const deadline = Date.now() + this.config.startTimeoutMs;
    const running = sandboxStart.startTimer({ step: "run" });
    let box: PodBox | undefined;
    try {
      box = await this.boxes.waitFor(
        ns,
        id,
        b =>
          b !== undefined &&
          (b.status?.observedGeneration ?? 0) >= generation &&
          (endpointOf(b) !== undefined || b.status?.phase === "Failed"),
        this.config.startTimeoutMs,
      );
    } catch {
      throw new ApiError(
        504,
        `sandbox "${id}" did not start in ${this.config.startTimeoutMs / 1000} s`,
      );
    }
    if (!box || box.status?.phase === "Failed") {
      throw new ApiError(
        500,
        `sandbox "${id}" failed to start: ${box?.status?.message ?? box?.status?.reason}`,
      );
    }
    running();
    const initialized = sandboxStart.startTimer({ step: "init" });
    const url = box.status!.poddURL!;
    const token = accessToken(this.config.tokenKey, box);
    const credential = this.config.control.credential(box)!;
    const body = JSON.stringify({
      envVars,
      accessToken: token,
      defaultUser: this.#templateOf(box)?.spec?.user ?? DEFAULT_SANDBOX_USER,
      timestamp: new Date().toISOString(),
    });
    // A claimed standby's daemon has long been serving: /init first, and only when nothing
    // answers yet, wait for `GET /health` and send it again.
    let status = await init(url, body, credential);
    while (status === undefined) {
      if (Date.now() > deadline) {
        throw new ApiError(
          504,
          `sandbox "${id}" runs, but its daemon did not answer ${url}/health`,
        );
      }
      await new Promise(r => setTimeout(r, 100));
      if (await healthy(url)) status = await init(url, body, credential);
    }
    if (status.status >= 300) {
      throw new ApiError(
        502,
        `sandbox "${id}": its daemon refused /init (HTTP ${status.status}): ${status.why}`,
      );
    }
    initialized();
    return sandbox(box, token, this.config.domain);
  }
}

/** `POST /init`'s status and, when refused, why; undefined when the daemon does not answer. */
async function init(
  url: string,
  body: string,
  credential: string,
): Promise<{ status: number; why: string } | undefined> {
  try {
    const res = await request(`${url}/init`, {
      method: "POST",
      headers: { "Content-Type": "application/json", [CONTROL_HEADER]: credential },
      body,
      headersTimeout: 5000,
      bodyTimeout: 5000,
    });
    if (res.statusCode < 300) {
      await res.body.dump();
      return { status: res.statusCode, why: "" };
    }
    const text = await res.body.text();
    let why = text;
    try {
      why = (JSON.parse(text) as { message?: string }).message ?? text;
    } catch {
      // not JSON: the text as it came
    }
    return { status: res.statusCode, why: why.slice(0, 500) };
  } catch {
    return undefined;
  }
}

async function healthy(url: string): Promise<boolean> {
  try {
    const res = await request(`${url}/health`, { headersTimeout: 2000, bodyTimeout: 2000 });
    await res.body.dump();
    return res.statusCode < 300;
  } catch {
    return false;
  }
}

function parse<S extends z.ZodType>(schema: S, body: unknown): z.infer<S> {
  const parsed = schema.safeParse(body);
  if (!parsed.success) throw invalidBody(parsed.error);
  return parsed.data;
}
