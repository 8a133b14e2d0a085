import { request } from "undici";
import type { z } from "zod";
import { API_VERSION } from "../capabilities/api/common";
import type { CubePodTemplate, PodBox, PodWarmPool } from "../capabilities/api/kinds";
import { KubeError, type ApiClient } from "../capabilities/client/api-client";
import { paths } from "../capabilities/client/paths";
import { kubeTime } from "../capabilities/kit/conditions";
import { ANNOTATION_LAST_ACTIVITY } from "../capabilities/reaper/activity";
import type { GatewayConfig } from "./config";
import { sandboxStart } from "./metrics";
import {
  accessToken,
  ANNOTATION_AUTO_RESUME,
  ANNOTATION_METADATA,
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
  stateOf,
  templateOf,
  timeoutSchema,
  ENV_VARS_SECRET_TYPE,
  envVarsOf,
  envVarsSecretName,
} from "./e2b";
import type { NamespacedCache, SandboxIndex } from "./sandboxes";

/** The `Sandbox` a create, connect or resume answers. */
type StartedSandbox = ReturnType<typeof sandbox>;

/** What a handler answers: a status and a JSON body (none for 204), and extra headers. */
export type Answer = { status: number; body?: unknown; headers?: Record<string, string> };

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
    const annotations = {
      [ANNOTATION_TEMPLATE]: templateID,
      [ANNOTATION_METADATA]: JSON.stringify(input.metadata ?? {}),
      [ANNOTATION_TIMEOUT]: String(input.timeout ?? DEFAULT_TIMEOUT_SECONDS),
      ...(input.autoResume?.enabled ? { [ANNOTATION_AUTO_RESUME]: "true" } : {}),
    };
    const started = await this.#make(ns, spec, annotations, input, input.envVars ?? {});
    return { status: 201, body: started };
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
    const forks = await Promise.all(
      Array.from({ length: input.count ?? 1 }, () =>
        this.#make(ns, { templateRef: templateID, forkFrom: id }, annotations, input, envVars).then(
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
    const box = {
      apiVersion: API_VERSION,
      kind: "PodBox",
      metadata: { name: id, annotations },
      spec: {
        ...spec,
        expiresAt: endAt(lifetime.timeout ?? DEFAULT_TIMEOUT_SECONDS),
        ...(lifetime.autoPause ? { onExpiry: "Pause" } : {}),
      },
    };
    const written = sandboxStart.startTimer({ step: "write" });
    const created = await this.client.create<PodBox>(paths.podBoxes(ns), box as PodBox);
    written();
    try {
      const [started] = await Promise.all([
        this.#start(ns, id, envVars),
        this.#keepEnvVars(created, envVars),
      ]);
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
    const run = (async () => {
      const written = sandboxStart.startTimer({ step: "write" });
      await this.client.mergePatch(paths.podBoxes(ns, id), {
        metadata: { annotations: { [ANNOTATION_LAST_ACTIVITY]: kubeTime(new Date()) } },
        spec: { desiredState: "Running", expiresAt: endAt(seconds) },
      });
      written();
      return this.#start(ns, id, await this.#keptEnvVars(ns, id));
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
        lifecycle: {
          onTimeout: box.spec?.onExpiry === "Pause" ? "pause" : "kill",
          autoResume: box.metadata?.annotations?.[ANNOTATION_AUTO_RESUME] === "true",
        },
      },
    };
  }

  /** `GET /sandboxes/{id}/metrics`: CubePod reports none yet. */
  metrics(ns: string, id: string): Answer {
    this.#own(ns, id);
    return { status: 200, body: [] };
  }

  /**
   * `GET /sandboxes` and `GET /v2/sandboxes`: the namespace's sandboxes, oldest first, filtered by
   * state and metadata, `limit` at a time (at most 100); `X-Next-Token` names where the next page
   * starts.
   */
  list(ns: string, query: URLSearchParams, v2: boolean): Answer {
    const states = (query.get("state") ?? (v2 ? "running,paused" : "running")).split(",");
    const filter = metadataFilter(query.get("metadata"));
    const limitRaw = query.get("limit") ?? "100";
    const limit = /^\d+$/.test(limitRaw) ? Number(limitRaw) : NaN;
    if (!(limit >= 1 && limit <= 100)) {
      throw new ApiError(400, `limit: expected an integer from 1 to 100, got "${limitRaw}"`);
    }
    const order = (b: PodBox) =>
      `${new Date(b.metadata?.creationTimestamp ?? 0).toISOString()}/${b.metadata?.name}`;
    const all = this.boxes
      .inNamespace(ns)
      .filter(b => !ended(b))
      .filter(b => states.includes(stateOf(b)) && matchesMetadata(b, filter))
      .sort((a, b) => order(a).localeCompare(order(b)));
    const after = query.get("nextToken");
    const from = after
      ? all.findIndex(b => order(b) > Buffer.from(after, "base64url").toString())
      : 0;
    const page = from < 0 ? [] : all.slice(from, from + limit);
    const more = from >= 0 && from + limit < all.length;
    return {
      status: 200,
      body: page.map(b => listedSandbox(b, this.#templateOf(b))),
      headers: more
        ? { "X-Next-Token": Buffer.from(order(page[page.length - 1])).toString("base64url") }
        : {},
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
    if (!box || ended(box)) throw notFound(id);
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
  async #start(ns: string, id: string, envVars: Record<string, string>): Promise<StartedSandbox> {
    const deadline = Date.now() + this.config.startTimeoutMs;
    const running = sandboxStart.startTimer({ step: "run" });
    let box: PodBox | undefined;
    try {
      box = await this.boxes.waitFor(
        ns,
        id,
        b => b !== undefined && (endpointOf(b) !== undefined || b.status?.phase === "Failed"),
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
    const body = JSON.stringify({
      envVars,
      accessToken: token,
      timestamp: new Date().toISOString(),
    });
    // A claimed standby's daemon has long been serving: /init first, and only when nothing
    // answers yet, wait for `GET /health` and send it again.
    let status = await init(url, body);
    while (status === undefined) {
      if (Date.now() > deadline) {
        throw new ApiError(
          504,
          `sandbox "${id}" runs, but its daemon did not answer ${url}/health`,
        );
      }
      await new Promise(r => setTimeout(r, 100));
      if (await healthy(url)) status = await init(url, body);
    }
    if (status >= 300) {
      throw new ApiError(502, `sandbox "${id}": its daemon refused /init (HTTP ${status})`);
    }
    initialized();
    return sandbox(box, token, this.config.domain);
  }
}

/** `POST /init`'s status, or undefined when the daemon does not answer. */
async function init(url: string, body: string): Promise<number | undefined> {
  try {
    const res = await request(`${url}/init`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body,
      headersTimeout: 5000,
      bodyTimeout: 5000,
    });
    await res.body.dump();
    return res.statusCode;
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
