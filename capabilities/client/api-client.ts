import { createSecureContext, type ConnectionOptions } from "node:tls";
import { Agent, request } from "undici";

/** The user agent of every request but the watches (Pepr's and ours use the fluent client). */
export const USER_AGENT = "cubepod";

/**
 * How often credentials are read again from the kubeconfig or the service account, so that a
 * rotated token is picked up. Only new TLS material or a new server closes the open connections.
 */
const REFRESH_MS = 5 * 60_000;

/** Where the API server is and how to authenticate to it. */
export type Credentials = Pick<ConnectionOptions, "ca" | "cert" | "key"> & {
  server: string;
  /** The `Authorization` header (a bearer token), if any. */
  authorization?: string;
};

/** Reads the credentials afresh: called at first use and every few minutes after. */
export type CredentialSource = () => Promise<Credentials>;

/**
 * How an agent connects with these credentials: one TLS context for all its connections. Left to
 * the connector, every new connection would parse the CA, certificate and key again, which costs
 * more than the handshake when a burst of requests opens connections at once.
 */
export function tlsOf({ ca, cert, key }: Credentials): {
  secureContext: ConnectionOptions["secureContext"];
} {
  return { secureContext: createSecureContext({ ca, cert, key }) };
}

type Connection = {
  agent: Agent;
  server: string;
  headers: Record<string, string>;
  credentials: Credentials;
};
type Method = "GET" | "POST" | "PATCH" | "PUT" | "DELETE";

/** An error shaped like the fluent client's (a `status`), so callers handle both alike. */
export class KubeError extends Error {
  constructor(
    readonly status: number,
    readonly data: unknown,
  ) {
    super(`HTTP ${status}: ${(data as { message?: string })?.message ?? "no message"}`);
  }
}

/**
 * The module's client of the API server, for every request but the watches: one keep-alive
 * connection pool. kubernetes-fluent-client builds a new connection for every request (see
 * docs/upstream.md), so each call would pay a TLS handshake. Credentials come from `credentials`
 * (in the module: the default kubeconfig or the in-cluster service account, kubeconfig.ts).
 */
export class ApiClient {
  #connection?: Promise<Connection>;
  #connectedAt = 0;

  /**
   * @param timeoutMs how long a request waits for its answer (headers, then between body
   *   chunks); see `CUBEPOD_API_TIMEOUT_MS` in config.ts.
   */
  /**
   * @param userAgent what the API server's audit log records the requests as sent by (tests that
   *   drive this client directly name themselves, so that the log tells them from the module)
   * @param refreshMs how long credentials are used before they are read again
   */
  constructor(
    private readonly timeoutMs: number,
    private readonly credentials: CredentialSource,
    private readonly userAgent = USER_AGENT,
    private readonly refreshMs = REFRESH_MS,
  ) {}

  /** Sends one request; resolves with the decoded body, throws a {@link KubeError} on >= 400. */
  async request<T = unknown>(
    method: Method,
    path: string,
    body?: unknown,
    contentType = "application/json",
  ): Promise<T> {
    const c = await this.#current();
    const res = await request(`${c.server}${path}`, {
      method,
      dispatcher: c.agent,
      headers: { ...c.headers, Accept: "application/json", "Content-Type": contentType },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.body.text();
    const data = text ? parseBody(text) : undefined;
    if (res.statusCode >= 400) throw new KubeError(res.statusCode, data);
    return data as T;
  }

  /** The object at `path`, or undefined when it does not exist (404). */
  async get<T>(path: string): Promise<T | undefined> {
    try {
      return await this.request<T>("GET", path);
    } catch (e) {
      if (e instanceof KubeError && e.status === 404) return undefined;
      throw e;
    }
  }

  /**
   * The items of a collection, optionally narrowed by a label selector. A consistent list by
   * default; `fromCache` reads the API server's watch cache as it stands (`resourceVersion=0`),
   * which holds every watch event the module has received but may miss its own latest writes.
   */
  async list<T>(path: string, labelSelector?: string, { fromCache = false } = {}): Promise<T[]> {
    const params = new URLSearchParams();
    if (labelSelector) params.set("labelSelector", labelSelector);
    if (fromCache) params.set("resourceVersion", "0");
    const query = params.size > 0 ? `?${params}` : "";
    const list = await this.request<{ items?: T[] }>("GET", `${path}${query}`);
    return list.items ?? [];
  }

  /** Creates an object in a collection; resolves with the stored object. */
  create<T>(path: string, obj: T): Promise<T> {
    return this.request<T>("POST", path, obj);
  }

  /** Deletes an object; with a resourceVersion, only while it is still at it (else 409). */
  delete(path: string, resourceVersion?: string): Promise<unknown> {
    const options = resourceVersion
      ? { apiVersion: "v1", kind: "DeleteOptions", preconditions: { resourceVersion } }
      : undefined;
    return this.request("DELETE", path, options);
  }

  /** A merge patch (RFC 7386) of an object. */
  mergePatch<T = unknown>(path: string, patch: object): Promise<T> {
    return this.request<T>("PATCH", path, patch, "application/merge-patch+json");
  }

  /** A JSON patch (RFC 6902) of an object. */
  jsonPatch<T = unknown>(path: string, ops: object[]): Promise<T> {
    return this.request<T>("PATCH", path, ops, "application/json-patch+json");
  }

  /** A merge patch of an object's status subresource. */
  mergePatchStatus<T>(path: string, status: unknown): Promise<T> {
    return this.request<T>("PATCH", `${path}/status`, { status }, "application/merge-patch+json");
  }

  /**
   * A server-side apply of `obj` by the field manager `cubepod`; `force` takes over the fields
   * another manager changed (of an object only CubePod owns).
   */
  apply<T>(path: string, obj: object, { force = false } = {}): Promise<T> {
    return this.request<T>(
      "PATCH",
      `${path}?fieldManager=${USER_AGENT}${force ? "&force=true" : ""}`,
      obj,
      "application/apply-patch+yaml",
    );
  }

  /** Resolves when the API server reports itself ready (`/readyz`), throws otherwise. */
  async ready(): Promise<void> {
    await this.#getPlain("/readyz");
  }

  /**
   * The API server's clock now, in epoch milliseconds rounded down to its second (the `Date`
   * header of its answer to `/version`), to compare with the timestamps it sets.
   */
  async serverTime(): Promise<number> {
    const date = Date.parse(String((await this.#getPlain("/version")).date));
    if (Number.isNaN(date)) throw new Error("the API server's answer has no Date header");
    return date;
  }

  /** A GET of one of the API server's own paths; resolves with the answer's headers. */
  async #getPlain(path: string) {
    const c = await this.#current();
    const res = await request(`${c.server}${path}`, { dispatcher: c.agent, headers: c.headers });
    const text = await res.body.text();
    if (res.statusCode !== 200) throw new KubeError(res.statusCode, { message: text.trim() });
    return res.headers;
  }

  #current(): Promise<Connection> {
    if (!this.#connection || Date.now() - this.#connectedAt >= this.refreshMs) {
      this.#connectedAt = Date.now();
      this.#connection = this.#connect(this.#connection);
    }
    return this.#connection;
  }

  /**
   * The connection for the credentials read now. The previous one's pool is kept when they reach
   * the same server with the same TLS material (a rotated token changes only the header): a
   * burst after the refresh would otherwise open every connection again. A pool replaced closes
   * once its requests are done.
   */
  async #connect(previous?: Promise<Connection>): Promise<Connection> {
    const credentials = await this.credentials();
    const { server, authorization } = credentials;
    // Audit logs and API priority and fairness see CubePod's own requests under its own name.
    const headers: Record<string, string> = { "User-Agent": this.userAgent };
    if (authorization) headers.Authorization = authorization;
    const old = await previous?.catch(() => undefined);
    if (old && sameEndpoint(old.credentials, credentials)) return { ...old, headers, credentials };
    void old?.agent.close().catch(() => undefined);
    return {
      credentials,
      agent: new Agent({
        keepAliveTimeout: 60_000,
        connections: 16,
        connect: tlsOf(credentials),
        headersTimeout: this.timeoutMs,
        bodyTimeout: this.timeoutMs,
      }),
      server: server.replace(/\/$/, ""),
      headers,
    };
  }
}

/** Whether two credentials reach the same server with the same TLS material. */
export function sameEndpoint(a: Credentials, b: Credentials): boolean {
  const pem = (v: unknown) => [v ?? []].flat().map(String).join("\n");
  return (
    a.server === b.server &&
    pem(a.ca) === pem(b.ca) &&
    pem(a.cert) === pem(b.cert) &&
    pem(a.key) === pem(b.key)
  );
}

/** A response body: JSON, or (an error from a proxy in between) its text as the message. */
function parseBody(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return { message: text.trim() };
  }
}
