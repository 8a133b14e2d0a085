import type { z } from "zod";
import type { CubePodTemplate, PodBox } from "../../capabilities/api/kinds";
import { KubeError } from "../../capabilities/client/api-client";
import { paths } from "../../capabilities/client/paths";
import { ALL_TRAFFIC } from "../../capabilities/api/egress-rules";
import { rfc3339Time } from "../../capabilities/reaper/activity";
import {
  ANNOTATION_AUTO_RESUME,
  ANNOTATION_METADATA,
  ANNOTATION_TEMPLATE,
  ANNOTATION_TIMEOUT,
  ApiError,
  connectSchema,
  DEFAULT_TIMEOUT_SECONDS,
  egressEnforced,
  egressRefused,
  ended,
  endpointOf,
  forkSchema,
  inheritedNetwork,
  listedSandbox,
  matchesMetadata,
  metadataFilter,
  networkSchema,
  networkSpec,
  networkUpdateSchema,
  newSandboxSchema,
  notFound,
  sandbox,
  servesPublicTraffic,
  startedAt,
  stateOf,
  templateIdOf,
  templateOf,
  timeoutSchema,
  updatedEgress,
} from "../e2b";
import { internalError } from "../internal-errors";
import { isSnapshot, snapshotsNamed } from "../snapshots";
import { endAt, type ControlContext } from "./context";
import { limitOf, pageToken, parse } from "./requests";
import type { Answer } from "./routes";
import type { SandboxStarter } from "./start";

/** What a create (from a template or a snapshot) keeps of its request on the box. */
const createdAnnotations = (input: z.infer<typeof newSandboxSchema>) => ({
  [ANNOTATION_TEMPLATE]: input.templateID,
  [ANNOTATION_METADATA]: JSON.stringify(input.metadata ?? {}),
  [ANNOTATION_TIMEOUT]: String(input.timeout ?? DEFAULT_TIMEOUT_SECONDS),
  ...(input.autoResume?.enabled ? { [ANNOTATION_AUTO_RESUME]: "true" } : {}),
});

/** E2B's sandboxes: create, list, get, connect, pause, kill, timeout and fork, over PodBoxes. */
export class SandboxesApi {
  constructor(
    private readonly context: ControlContext,
    private readonly starter: SandboxStarter,
  ) {}

  /** `POST /sandboxes`, `POST /v2/sandboxes`. */
  async create(ns: string, body: unknown): Promise<Answer> {
    const { client, boxes, templates, pools } = this.context;
    const input = parse(newSandboxSchema, body);
    const templateID = input.templateID;
    const snapshot = snapshotsNamed(boxes.inNamespace(ns), templateID, ns)[0];
    if (snapshot) return this.#fromSnapshot(ns, snapshot, input);
    if (!/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(templateID)) {
      throw new ApiError(
        400,
        `template "${templateID}": no snapshot of that name, and no PodTemplate can have it`,
      );
    }
    // The tenant's own template, else the platform's default of that name (E2B's SDKs ask for
    // `base` when given none), which the module copies into the tenant's namespace.
    const read = (where: string) =>
      templates.get(where, templateID) ??
      client.get<CubePodTemplate>(paths.podTemplates(where, templateID));
    const defaults = this.context.config.defaultTemplatesNamespace;
    const template = (await read(ns)) ?? (ns === defaults ? undefined : await read(defaults));
    if (!template) {
      throw new ApiError(
        400,
        `template "${templateID}": no PodTemplate of that name in your namespace, nor a tenant default`,
      );
    }
    const pool = pools
      .inNamespace(ns)
      .filter(p => p.spec?.templateRef === templateID && !p.metadata?.deletionTimestamp)
      .map(p => p.metadata!.name!)
      .sort()[0];
    const spec = {
      ...(pool ? { warmPoolRef: pool } : { templateRef: templateID }),
      // Without internet access the box reaches nothing, whatever its template allows.
      ...networkSpec(input, this.context.config.egressAgent),
    };
    const annotations = createdAnnotations(input);
    const started = await this.starter.make(ns, spec, annotations, input, input.envVars ?? {});
    return { status: 201, body: started };
  }

  /** A sandbox whose box forks a snapshot's, as a fork of a sandbox does. */
  async #fromSnapshot(
    ns: string,
    snapshot: PodBox,
    input: z.infer<typeof newSandboxSchema>,
  ): Promise<Answer> {
    const own = networkSpec(input, this.context.config.egressAgent);
    const spec = {
      templateRef: templateOf(snapshot)!,
      forkFrom: snapshot.metadata!.name!,
      ...inheritedNetwork(snapshot),
      ...own,
    };
    const annotations = createdAnnotations(input);
    const envVars = {
      ...this.context.keptEnvVars(ns, snapshot.metadata!.name!),
      ...input.envVars,
    };
    return { status: 201, body: await this.starter.make(ns, spec, annotations, input, envVars) };
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
    const all = this.context.boxes
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
      body: page.map(b => listedSandbox(b, this.context.templateOf(b))),
      headers,
    };
  }

  /** `GET /sandboxes/{id}`. */
  info(ns: string, id: string): Answer {
    const { config } = this.context;
    const box = this.context.own(ns, id);
    return {
      status: 200,
      body: {
        ...listedSandbox(box, this.context.templateOf(box)),
        envdAccessToken: config.tokenKeys.accessToken(box),
        domain: config.domain,
        allowInternetAccess:
          box.spec?.egress !== "None" && !box.spec?.network?.denyOut?.includes(ALL_TRAFFIC),
        network: {
          allowPublicTraffic: servesPublicTraffic(box),
          ...(box.spec?.network?.maskRequestHost
            ? { maskRequestHost: box.spec.network.maskRequestHost }
            : {}),
          ...(box.spec?.network?.allowOut ? { allowOut: box.spec.network.allowOut } : {}),
          ...(box.spec?.network?.denyOut ? { denyOut: box.spec.network.denyOut } : {}),
        },
        lifecycle: {
          onTimeout: box.spec?.onExpiry === "Pause" ? "pause" : "kill",
          autoResume: box.metadata?.annotations?.[ANNOTATION_AUTO_RESUME] === "true",
        },
      },
    };
  }

  /**
   * `PUT /sandboxes/{id}/network` (`Sandbox.updateNetwork`): E2B's egress settings, replaced
   * whole. With the node egress agent, the box's rules change and the answer (204) waits until
   * its node enforces them; a paused sandbox takes them at its resume. Without the agent, only an
   * update that leaves the sandbox as it is answers 204; any other is refused naming why.
   */
  async updateNetwork(ns: string, id: string, body: unknown): Promise<Answer> {
    const { client, boxes, config } = this.context;
    const { allow_internet_access, ...network } = parse(networkUpdateSchema, body ?? {});
    const createOnly = ["allowPublicTraffic", "maskRequestHost"].filter(f => f in network);
    if (createOnly.length > 0) {
      throw new ApiError(400, `invalid request body: ${createOnly.join(", ")}: set at create only`);
    }
    const input = { allow_internet_access, network: parse(networkSchema, network) };
    const box = this.context.own(ns, id);
    if (!config.egressAgent || box.spec?.egress === "None") {
      const wanted = networkSpec(input, false);
      if ((wanted.egress ?? "") === (box.spec?.egress ?? "")) return { status: 204 };
      const now =
        box.spec?.egress === "None" ? "no internet access (egress: None)" : "internet access";
      throw new ApiError(
        400,
        `network: the sandbox was started with ${now}, which CubePod cannot change while it lives` +
          `${config.egressAgent ? "" : " without the node egress agent"}; refused rather than ignored`,
      );
    }
    const patched = await client.mergePatch<PodBox>(paths.podBoxes(ns, id), {
      spec: { network: updatedEgress(input) },
    });
    if (!endpointOf(box)) return { status: 204 };
    const generation = patched.metadata?.generation ?? 0;
    let now: PodBox | undefined;
    try {
      now = await boxes.waitFor(
        ns,
        id,
        b =>
          !endpointOf(b ?? {}) ||
          egressRefused(b!) !== undefined ||
          ((b!.status?.observedGeneration ?? 0) >= generation &&
            egressEnforced(b!, this.context.templateOf(b!))),
        config.startTimeoutMs,
      );
    } catch {
      throw new ApiError(
        504,
        `sandbox "${id}": its node did not enforce the new network rules within ${config.startTimeoutMs / 1000} s`,
      );
    }
    const refused = now && egressRefused(now);
    if (refused) throw new ApiError(500, `sandbox "${id}": ${refused}`);
    return { status: 204 };
  }

  /** `POST /sandboxes/{id}/connect` (v1, v2, and the older `/resume`). */
  async connect(ns: string, id: string, body: unknown): Promise<Answer> {
    const { config } = this.context;
    const input = parse(connectSchema, body ?? {});
    const box = this.context.own(ns, id);
    if (endpointOf(box)) {
      // A connect only ever lengthens a running sandbox's life.
      if (input.timeout !== undefined && endAt(input.timeout) > (box.spec?.expiresAt ?? "")) {
        await this.context.setEnd(ns, id, input.timeout);
      }
      return {
        status: 200,
        body: sandbox(box, config.tokenKeys.tokens(box), config.domain),
      };
    }
    return { status: 201, body: await this.starter.resume(ns, id, input.timeout) };
  }

  /** `POST /sandboxes/{id}/pause`: 204 once paused; 409 when it already is. */
  async pause(ns: string, id: string): Promise<Answer> {
    const { client, boxes, config } = this.context;
    const box = this.context.own(ns, id);
    if (stateOf(box) === "paused") {
      throw new ApiError(409, `Error pausing sandbox - sandbox '${id}' is already paused`);
    }
    await client.mergePatch(paths.podBoxes(ns, id), { spec: { desiredState: "Paused" } });
    await boxes.waitFor(ns, id, b => !b || b.status?.phase === "Paused", config.startTimeoutMs);
    return { status: 204 };
  }

  /** `DELETE /sandboxes/{id}`: the box and (its reclaim policy being Delete) its volumes. */
  async kill(ns: string, id: string): Promise<Answer> {
    const { client, boxes } = this.context;
    this.context.own(ns, id);
    try {
      await client.delete(paths.podBoxes(ns, id));
    } catch (e) {
      if (e instanceof KubeError && e.status === 404) throw notFound(id);
      throw e;
    }
    // Once this replica's watch shows the deletion, a second kill through it is a 404.
    await boxes
      .waitFor(ns, id, b => !b || Boolean(b.metadata?.deletionTimestamp), 5000)
      .catch(() => undefined);
    return { status: 204 };
  }

  /** `POST /sandboxes/{id}/timeout`. */
  async setTimeout(ns: string, id: string, body: unknown): Promise<Answer> {
    const input = parse(timeoutSchema, body);
    this.context.own(ns, id);
    await this.context.setEnd(ns, id, input.timeout);
    return { status: 204 };
  }

  /**
   * `POST /sandboxes/{id}/fork` (`{timeout, count: 1-20}`): `count` new sandboxes whose boxes fork
   * the parent's two volumes (`forkFrom`), each answered as `{sandbox}` or `{error}`. E2B forks
   * memory too; CubePod forks the rootfs and the workspace, and starts each fork's daemon anew.
   */
  async fork(ns: string, id: string, body: unknown): Promise<Answer> {
    const input = parse(forkSchema, body ?? {});
    const parent = this.context.own(ns, id);
    const templateID = templateOf(parent);
    if (!templateID) throw new ApiError(409, `sandbox "${id}" has no template to fork with yet`);
    const annotations = {
      [ANNOTATION_TEMPLATE]: parent.metadata?.annotations?.[ANNOTATION_TEMPLATE] ?? templateID,
      [ANNOTATION_METADATA]: parent.metadata?.annotations?.[ANNOTATION_METADATA] ?? "{}",
    };
    // A fork's daemon gets its parent's environment, as E2B's fork copies it with the memory.
    const envVars = this.context.keptEnvVars(ns, id);
    // A fork of a sandbox without internet access has none either, and its ports are served
    // as its parent's.
    const spec = { templateRef: templateID, forkFrom: id, ...inheritedNetwork(parent) };
    const forks = await Promise.all(
      Array.from({ length: input.count ?? 1 }, () =>
        this.starter.make(ns, spec, annotations, input, envVars).then(
          sandbox => ({ sandbox }),
          e => ({ error: internalError(e, { call: "fork", namespace: ns, sandbox: id }).body() }),
        ),
      ),
    );
    return { status: 201, body: forks };
  }
}
