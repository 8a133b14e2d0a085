import { Agent as HttpsAgent } from "node:https";
import { KubeConfig } from "@kubernetes/client-node";
import { Agent, Headers, request } from "undici";

/**
 * A minimal API client with one keep-alive connection pool, used for every request the module
 * makes (Pepr's and our watches aside). kubernetes-fluent-client 3.11.6 reads the kubeconfig and
 * builds a new undici Agent for every request, so each call pays a TLS handshake: measured here
 * at 15-25 ms per write against 3-10 ms spent in the API server, and the handshakes' CPU slowed
 * everything else on the machine. Credentials come from the same kubeconfig or in-cluster
 * service account, re-read every 5 minutes so that a rotated token is picked up.
 */
type Connection = { agent: Agent; server: string; headers: Record<string, string> };

const REFRESH_MS = 5 * 60_000;
/**
 * How long a request may wait for its answer (headers, then between body chunks). The API server
 * ends ordinary requests itself at 60 s, so only a dead connection or a hung server reaches this;
 * undici's own default (300 s) would hold a box's events that long (they wait while a write of
 * ours to it is in flight), and the queue retries a timed-out write like any failed one.
 */
const TIMEOUT_MS = Number(process.env.CUBEPOD_API_TIMEOUT_MS ?? 65_000);
/** The user agent of every request but the watches (Pepr's and ours use the fluent client). */
export const USER_AGENT = "cubepod";
let connection: Promise<Connection> | undefined;
let connectionAt = 0;

async function connect(): Promise<Connection> {
  const kc = new KubeConfig();
  kc.loadFromDefault();
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error("no current cluster in the kubeconfig");
  const opts = (await kc.applyToFetchOptions({})) as {
    agent?: unknown;
    headers?: unknown;
  };
  const tls =
    opts.agent instanceof HttpsAgent
      ? { ca: opts.agent.options.ca, cert: opts.agent.options.cert, key: opts.agent.options.key }
      : {};
  // Audit logs and API priority and fairness see CubePod's own requests under its own name.
  const headers: Record<string, string> = { "User-Agent": USER_AGENT };
  const auth = new Headers(opts.headers as ConstructorParameters<typeof Headers>[0]).get(
    "Authorization",
  );
  if (auth) headers.Authorization = auth;
  return {
    agent: new Agent({
      keepAliveTimeout: 60_000,
      connections: 16,
      connect: tls,
      headersTimeout: TIMEOUT_MS,
      bodyTimeout: TIMEOUT_MS,
    }),
    server: cluster.server.replace(/\/$/, ""),
    headers,
  };
}

function current(): Promise<Connection> {
  if (!connection || Date.now() - connectionAt > REFRESH_MS) {
    const previous = connection;
    connectionAt = Date.now();
    connection = connect();
    // The old pool closes once its requests are done.
    void previous?.then(c => c.agent.close()).catch(() => undefined);
  }
  return connection;
}

/** An error shaped like the fluent client's (a `status`), so callers handle both alike. */
export class KubeError extends Error {
  constructor(
    readonly status: number,
    readonly data: unknown,
  ) {
    super(`HTTP ${status}: ${(data as { message?: string })?.message ?? "no message"}`);
  }
}

/** Sends one request; resolves with the decoded body, throws a {@link KubeError} on >= 400. */
export async function kubeRequest<T = unknown>(
  method: "GET" | "POST" | "PATCH" | "PUT" | "DELETE",
  path: string,
  body?: unknown,
  contentType = "application/json",
): Promise<T> {
  const c = await current();
  const res = await request(`${c.server}${path}`, {
    method,
    dispatcher: c.agent,
    headers: { ...c.headers, Accept: "application/json", "Content-Type": contentType },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.body.text();
  const data = text ? JSON.parse(text) : undefined;
  if (res.statusCode >= 400) throw new KubeError(res.statusCode, data);
  return data as T;
}

/** A JSON patch (RFC 6902) of one object. */
export const jsonPatch = <T = unknown>(path: string, ops: object[]) =>
  kubeRequest<T>("PATCH", path, ops, "application/json-patch+json");

/** A merge patch of an object's status subresource. */
export const mergePatchStatus = <T>(path: string, status: unknown) =>
  kubeRequest<T>("PATCH", `${path}/status`, { status }, "application/merge-patch+json");
