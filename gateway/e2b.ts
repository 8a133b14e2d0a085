import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { z } from "zod";
import { GROUP } from "../capabilities/api/common";
import type { CubePodTemplate, PodBox } from "../capabilities/api/kinds";
import { quantityValue } from "../capabilities/api/quantity";
import {
  ALL_TRAFFIC,
  checkEgressRules,
  type EgressRules,
  MAX_EGRESS_ENTRIES,
} from "../capabilities/api/egress-rules";
import { EGRESS_CONDITION, egressRulesOf } from "../capabilities/network/egress-agent";

/**
 * E2B's wire format, as the SDKs use it (../shared/notes/e2b.md): request bodies, the sandbox
 * objects the API answers with, and its errors. Pure.
 */

/** The client ID E2B's API reports for every sandbox (deprecated, still required by the schema). */
export const CLIENT_ID = "6532622b";
/** The envd API level podd implements: the SDK picks its behaviour by this version. */
export const ENVD_VERSION = "0.6.13";
/** E2B's default sandbox lifetime, when a create gives no `timeout`. */
export const DEFAULT_TIMEOUT_SECONDS = 300;

/** Where the gateway keeps E2B's facts about a sandbox on its PodBox (metadata, never spec). */
export const ANNOTATION_METADATA = `${GROUP}/sandbox-metadata`;
export const ANNOTATION_TEMPLATE = `${GROUP}/sandbox-template`;
/** Present on the box of a sandbox created with `autoResume`: its traffic resumes it when paused. */
export const ANNOTATION_AUTO_RESUME = `${GROUP}/sandbox-auto-resume`;
/** The sandbox's timeout in seconds, as created: the lifetime an auto-resume gives it again. */
export const ANNOTATION_TIMEOUT = `${GROUP}/sandbox-timeout`;
/**
 * When the gateway created the sandbox, to the millisecond: lists sort by it, and a box's own
 * `creationTimestamp` has whole seconds only, too coarse for sandboxes created one after another.
 */
export const ANNOTATION_STARTED = `${GROUP}/sandbox-started-at`;

/** Kept envVars, read back; anything but a map of strings reads as none. */
export function envVarsOf(json: string): Record<string, string> {
  try {
    const parsed = z.record(z.string(), z.string()).safeParse(JSON.parse(json));
    return parsed.success ? parsed.data : {};
  } catch {
    return {};
  }
}

/** A sandbox ID as E2B writes them: lowercase letters and digits. */
export const SANDBOX_ID = /^[a-z0-9]+$/;

/** A new sandbox ID: a letter, then 19 letters or digits (about 98 bits of randomness). */
export function newSandboxId(): string {
  const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789";
  const bytes = randomBytes(20);
  return [...bytes].map((b, i) => alphabet[b % (i === 0 ? 26 : 36)]).join("");
}

/**
 * The ID a request names: E2B also accepts `<id>-<clientID>`. Undefined when it is not an ID.
 */
export function sandboxIdOf(raw: string): string | undefined {
  const id = raw.split("-")[0];
  return SANDBOX_ID.test(id) && id.length <= 63 ? id : undefined;
}

/**
 * A sandbox's access token, derived from the gateway's key and the box's identity (its UID
 * included, so that a box made again under the same name gets a new one): every replica derives
 * the same, and none is stored.
 */
export function accessToken(key: string, box: PodBox): string {
  const { namespace, name, uid } = box.metadata ?? {};
  return createHmac("sha256", key).update(`${namespace}/${name}/${uid}`).digest("hex");
}

/**
 * The token a sandbox's own ports take when it serves no public traffic (E2B's
 * `trafficAccessToken`), derived as its access token is, apart from it: it opens the sandbox's
 * ports, not its daemon.
 */
export function trafficAccessToken(key: string, box: PodBox): string {
  const { namespace, name, uid } = box.metadata ?? {};
  return createHmac("sha256", key)
    .update(`sandbox-traffic/${namespace}/${name}/${uid}`)
    .digest("hex");
}

/** The header E2B's proxy reads the traffic token from, as its SDK users send it. */
export const TRAFFIC_TOKEN_HEADER = "e2b-traffic-access-token";

/** Whether anyone who knows a sandbox's address may call its own ports (E2B's default). */
export const servesPublicTraffic = (box: PodBox) => box.spec?.network?.allowPublicTraffic !== false;

/** Whether a request's token is the sandbox's: compared in constant time, whatever it is. */
export function sameToken(given: unknown, expected: string): boolean {
  if (typeof given !== "string") return false;
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

const stringMap = z.record(z.string(), z.string());
const seconds = z.int().min(0).max(31_536_000);

/**
 * E2B's `network` fields CubePod does not enforce yet (docs/gateway.md, Network): a sandbox that
 * asks for them is refused naming them, never started with them ignored.
 */
const UNENFORCED_NETWORK = ["rules", "egressProxy", "httpsPorts", "dnsServers"];

/**
 * `SandboxNetworkConfig`: the gateway serves `allowPublicTraffic` and `maskRequestHost` (the
 * sandbox's ports); `allowOut` and `denyOut` go to the box for the node egress agent, checked as
 * E2B's API checks them. Any other field is refused by name.
 */
export const networkSchema = z
  .looseObject({
    allowPublicTraffic: z.boolean().nullish(),
    maskRequestHost: z
      .string()
      .max(253)
      .regex(/^[\x21-\x7e]+$/, { error: "must be host[:port], ASCII, with an optional ${PORT}" })
      .nullish(),
    allowOut: z.array(z.string()).max(MAX_EGRESS_ENTRIES).nullish(),
    denyOut: z.array(z.string()).max(MAX_EGRESS_ENTRIES).nullish(),
  })
  .superRefine((network, ctx) => {
    for (const field of Object.keys(network)) {
      const value = (network as Record<string, unknown>)[field];
      const empty =
        value === null || value === undefined || (Array.isArray(value) && value.length === 0);
      if (field in networkSchema.shape || empty) continue;
      ctx.addIssue({
        code: "custom",
        path: [field],
        message: UNENFORCED_NETWORK.includes(field)
          ? "not enforced by CubePod yet; refused rather than ignored"
          : "not a field of E2B's network",
      });
    }
    checkEgressRules(
      { allowOut: network.allowOut ?? undefined, denyOut: network.denyOut ?? undefined },
      ctx,
    );
  });

/**
 * The egress rules a create or update asks for, as E2B's API makes them: `allow_internet_access:
 * false` denies all traffic, whatever `denyOut` said (`allowOut` still allows); undefined when it
 * asks for none (the template's then hold).
 */
function egressOf(input: {
  allow_internet_access?: boolean;
  network?: z.infer<typeof networkSchema> | null;
}): EgressRules | undefined {
  const n = input.network ?? {};
  const denyOut = input.allow_internet_access === false ? [ALL_TRAFFIC] : (n.denyOut ?? undefined);
  const allowOut = n.allowOut ?? undefined;
  if (allowOut === undefined && denyOut === undefined) return undefined;
  return { ...(allowOut ? { allowOut } : {}), ...(denyOut ? { denyOut } : {}) };
}

/**
 * What a box keeps of E2B's `allow_internet_access` and `network`: how the gateway serves its
 * ports, and its egress. Where the cluster runs the node egress agent, egress is the box's
 * `allowOut`/`denyOut`, which the agent enforces and `PUT /network` changes. Without it, only no
 * internet access can be had (`egress: None`, the template's policy taken off the Pod), and any
 * other rule is refused by name rather than ignored.
 */
export function networkSpec(
  input: {
    allow_internet_access?: boolean;
    network?: z.infer<typeof networkSchema> | null;
  },
  egressAgent: boolean,
): Pick<NonNullable<PodBox["spec"]>, "egress" | "network"> {
  const n = input.network ?? {};
  const egress = egressOf(input);
  const ports = {
    ...(n.allowPublicTraffic === false ? { allowPublicTraffic: false } : {}),
    ...(n.maskRequestHost ? { maskRequestHost: n.maskRequestHost } : {}),
  };
  if (egressAgent) {
    const network = { ...ports, ...egress };
    return Object.keys(network).length > 0 ? { network } : {};
  }
  const unenforceable = [
    ...(egress?.allowOut?.length ? ["allowOut"] : []),
    ...(egress?.denyOut?.some(d => d !== ALL_TRAFFIC) ? ["denyOut"] : []),
  ];
  if (unenforceable.length > 0) throw noEgressAgent(unenforceable);
  return {
    ...(egress?.denyOut?.includes(ALL_TRAFFIC) ? { egress: "None" as const } : {}),
    ...(Object.keys(ports).length > 0 ? { network: ports } : {}),
  };
}

/** The refusal of rules that only the node egress agent could enforce. */
export const noEgressAgent = (fields: string[]) =>
  new ApiError(
    400,
    `network: ${fields.join(", ")}: enforced by the node egress agent, which this cluster does not run ` +
      `(CUBEPOD_GATEWAY_EGRESS_AGENT); only allow_internet_access: false (denyOut: ["${ALL_TRAFFIC}"]) ` +
      `can be had; refused rather than ignored`,
  );

/** The egress rules `PUT /network` sets: E2B's full replace, nothing given allowing all. */
export function updatedEgress(input: {
  allow_internet_access?: boolean;
  network?: z.infer<typeof networkSchema> | null;
}): Required<EgressRules> {
  const e = egressOf(input);
  return { allowOut: e?.allowOut ?? [], denyOut: e?.denyOut ?? [] };
}

/** Why the node's egress agent refused a box's rules, when it did (the sandbox reaches nothing). */
export function egressRefused(box: PodBox): string | undefined {
  const c = box.status?.conditions?.find(c => c.type === EGRESS_CONDITION);
  return c?.reason === "RefusedByAgent" ? c.message : undefined;
}

/**
 * Whether the node a box's Pod runs on enforces its egress rules (its own or its template's):
 * the operator's `EgressApplied` condition, for its current generation. True for a box with none.
 */
export function egressEnforced(box: PodBox, template?: CubePodTemplate): boolean {
  const c = box.status?.conditions?.find(c => c.type === EGRESS_CONDITION);
  if (!c && !egressRulesOf(box.spec, template?.spec)) return true;
  return c?.status === "True" && (c.observedGeneration ?? 0) >= (box.metadata?.generation ?? 0);
}

/** What a fork or snapshot keeps of its source's network: its egress, and how its ports are served. */
export const inheritedNetwork = (box: PodBox) => ({
  ...(box.spec?.egress ? { egress: box.spec.egress } : {}),
  ...(box.spec?.network ? { network: box.spec.network } : {}),
});

/** `SandboxNetworkUpdateConfig`: the egress fields, and `allow_internet_access`. */
export const networkUpdateSchema = z.looseObject({
  allow_internet_access: z
    .boolean()
    .nullish()
    .transform(v => v ?? undefined),
});

/** `NewSandbox` (v1) and `NewSandboxV2`: the fields CubePod acts on; others are accepted. */
export const newSandboxSchema = z.looseObject({
  // A PodTemplate's name, or a snapshot's ID or name (`<id>:default`, `<namespace>/<name>:<tag>`).
  templateID: z.string().regex(/^[a-z0-9][-a-z0-9._]*(\/[a-z0-9_-]+)?(:[a-z0-9_.-]+)?$/i, {
    error: "must name a PodTemplate in your namespace, or a snapshot",
  }),
  timeout: seconds.optional(),
  metadata: stringMap.optional(),
  envVars: stringMap.optional(),
  autoPause: z.boolean().optional(),
  autoResume: z.looseObject({ enabled: z.boolean() }).optional(),
  allow_internet_access: z.boolean().optional(),
  network: networkSchema.nullish(),
});
export const connectSchema = z.looseObject({ timeout: seconds.optional() });
export const forkSchema = z.looseObject({
  timeout: seconds.optional(),
  count: z.int().min(1).max(20).optional(),
});
export const timeoutSchema = z.looseObject({ timeout: seconds });

/** An E2B error: the SDK reads `code` from the body, so it always equals the HTTP status. */
export class ApiError extends Error {
  /** @param headers sent with the error's answer (a 429's `Retry-After`) */
  constructor(
    readonly code: number,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
  body() {
    return { code: this.code, message: this.message };
  }
}

export const notFound = (id: string) =>
  new ApiError(404, `Sandbox "${id}" doesn't exist or you don't have access to it`);

/** The zod error of a body, as one line naming each field. */
export function invalidBody(error: z.ZodError): ApiError {
  const fields = error.issues.map(i => `${i.path.join(".") || "body"}: ${i.message}`);
  return new ApiError(400, `invalid request body: ${fields.join("; ")}`);
}

/** True for a paused sandbox that its own traffic resumes. */
export const resumesOnTraffic = (box: PodBox) =>
  box.metadata?.annotations?.[ANNOTATION_AUTO_RESUME] === "true" && stateOf(box) === "paused";

/** E2B's two states: a box that is paused, or meant to be, is paused; any other runs. */
export function stateOf(box: PodBox, now = Date.now()): "running" | "paused" {
  return box.status?.phase === "Paused" ||
    box.spec?.desiredState === "Paused" ||
    (expired(box, now) && box.spec?.onExpiry === "Pause")
    ? "paused"
    : "running";
}

/**
 * True once a box meant to run is past its `expiresAt`. The API answers by the clock, as E2B's
 * does, in the moment before the operator has paused or ended the box.
 */
export function expired(box: PodBox, now = Date.now()): boolean {
  const at = box.spec?.expiresAt ? Date.parse(box.spec.expiresAt) : NaN;
  return (box.spec?.desiredState ?? "Running") === "Running" && at <= now;
}

function metadataOf(box: PodBox): Record<string, string> {
  try {
    const parsed = stringMap.safeParse(
      JSON.parse(box.metadata?.annotations?.[ANNOTATION_METADATA] ?? "{}"),
    );
    return parsed.success ? parsed.data : {};
  } catch {
    return {};
  }
}

const iso = (t: unknown) => new Date(t as string).toISOString();

/** The template a sandbox was created from, as E2B names it. */
export const templateIdOf = (box: PodBox): string =>
  box.metadata?.annotations?.[ANNOTATION_TEMPLATE] ?? box.spec?.templateRef ?? "";

/**
 * When the sandbox started (epoch ms): the gateway's stamp, else the box's creation (a box made
 * without the gateway, by GitOps say).
 */
export function startedAt(box: PodBox): number {
  const stamped = Date.parse(box.metadata?.annotations?.[ANNOTATION_STARTED] ?? "");
  if (!Number.isNaN(stamped)) return stamped;
  const created = new Date(String(box.metadata?.creationTimestamp)).getTime();
  return Number.isNaN(created) ? Date.now() : created;
}

/** True for a box that ended (terminated by its spec or its expiry): no sandbox any more. */
export function ended(box: PodBox, now = Date.now()): boolean {
  return (
    Boolean(box.metadata?.deletionTimestamp) ||
    box.spec?.desiredState === "Terminated" ||
    box.status?.phase === "Terminated" ||
    ((box.status?.reason === "Expired" || expired(box, now)) && box.spec?.onExpiry !== "Pause")
  );
}

/**
 * Where a serving sandbox is: its Pod's IP and its daemon's port (from `status.poddURL`);
 * undefined unless the box runs, and is meant to.
 */
export function endpointOf(box: PodBox): { ip: string; envdPort: number } | undefined {
  const { phase, podIP, poddURL, podUID } = box.status ?? {};
  // The Pod's UID too: the daemon takes only a credential that names it.
  if (phase !== "Running" || !podIP || !poddURL || !podUID) return undefined;
  if (ended(box) || stateOf(box) === "paused") return undefined;
  return { ip: podIP, envdPort: Number(new URL(poddURL).port) };
}

/** The PodTemplate a sandbox's box was made from (its pool's, for a warm claim). */
export function templateOf(box: PodBox): string | undefined {
  return (
    box.spec?.templateRef ??
    box.status?.templateName ??
    box.metadata?.annotations?.[ANNOTATION_TEMPLATE]
  );
}

/**
 * What E2B reports of a sandbox's size, from its template: whole CPUs (the limit, else the
 * request, rounded up), memory in MiB (likewise), and its two volumes together in MiB; 0 for
 * what the template leaves unset.
 */
export function resourcesOf(template: CubePodTemplate | undefined) {
  const spec = template?.spec;
  const amount = (name: string) =>
    quantityValue(spec?.resources?.limits?.[name] ?? spec?.resources?.requests?.[name] ?? "0") ?? 0;
  const mib = (q: string | undefined) => (quantityValue(q ?? "0") ?? 0) / 2 ** 20;
  return {
    cpuCount: Math.ceil(amount("cpu")),
    memoryMB: Math.ceil(amount("memory") / 2 ** 20),
    diskSizeMB: Math.ceil(mib(spec?.rootfs?.size) + mib(spec?.workspace?.size)),
  };
}

/** The fields `ListedSandbox` and `SandboxDetail` share. */
export function listedSandbox(box: PodBox, template?: CubePodTemplate) {
  const started = startedAt(box);
  const endAt =
    box.spec?.expiresAt ?? new Date(started + DEFAULT_TIMEOUT_SECONDS * 1000).toISOString();
  return {
    sandboxID: box.metadata!.name!,
    templateID: templateIdOf(box),
    clientID: CLIENT_ID,
    startedAt: iso(started),
    endAt: iso(endAt),
    state: stateOf(box),
    metadata: metadataOf(box),
    ...resourcesOf(template),
    envdVersion: ENVD_VERSION,
  };
}

/** `Sandbox`: what a create or connect answers. */
export function sandbox(
  box: PodBox,
  tokens: { access: string; traffic: string | null },
  domain: string,
) {
  return {
    sandboxID: box.metadata!.name!,
    templateID: templateIdOf(box),
    clientID: CLIENT_ID,
    envdVersion: ENVD_VERSION,
    envdAccessToken: tokens.access,
    trafficAccessToken: tokens.traffic,
    domain,
  };
}

/** The `metadata` filter of a list: `k=v&k2=v2`, URL-encoded as one query parameter. */
export function metadataFilter(raw: string | null): Record<string, string> {
  return raw ? Object.fromEntries(new URLSearchParams(raw)) : {};
}

/** True when the box's metadata holds every pair of the filter. */
export function matchesMetadata(box: PodBox, filter: Record<string, string>): boolean {
  const m = metadataOf(box);
  return Object.entries(filter).every(([k, v]) => m[k] === v);
}
