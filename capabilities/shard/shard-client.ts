import { ApiClient, type CredentialSource } from "../client/api-client";
import { withShardLabel } from "./shard-of";

/** A write refused because this replica no longer serves the shard. */
export class NotShardHolderError extends Error {}

const NAMESPACED = /\/namespaces\/([^/]+)\/[^/]+/;

/**
 * The API client of one shard's operator (and of admission, with sharded watchers). Every write
 * is fenced: refused unless this replica holds the shard's Lease now ({@link fence}; admission
 * holds none). Everything it creates carries its namespace's shard label, so that the replica
 * holding that shard watches it. Its writes in flight are counted, so that a shard given up is
 * released only once they are done.
 */
export class ShardClient extends ApiClient {
  #inFlight = 0;
  #idle: (() => void)[] = [];

  constructor(
    timeoutMs: number,
    credentials: CredentialSource,
    userAgent: string,
    private readonly shards: number,
    private readonly fence: () => boolean = () => true,
  ) {
    super(timeoutMs, credentials, userAgent);
  }

  override async request<T = unknown>(
    method: "GET" | "POST" | "PATCH" | "PUT" | "DELETE",
    path: string,
    body?: unknown,
    contentType?: string,
  ): Promise<T> {
    if (method === "GET") return super.request<T>(method, path, body, contentType);
    if (!this.fence())
      throw new NotShardHolderError(`not the holder of this shard: ${method} ${path}`);
    this.#inFlight++;
    try {
      return await super.request<T>(method, path, body, contentType);
    } finally {
      if (--this.#inFlight === 0) for (const done of this.#idle.splice(0)) done();
    }
  }

  override create<T>(path: string, obj: T): Promise<T> {
    return super.create(path, this.#stamped(path, obj));
  }

  override apply<T>(path: string, obj: object, opts?: { force?: boolean }): Promise<T> {
    return super.apply<T>(path, this.#stamped(path, obj), opts);
  }

  /** Resolves once no write is in flight. */
  settled(): Promise<void> {
    if (this.#inFlight === 0) return Promise.resolve();
    return new Promise(resolve => this.#idle.push(resolve));
  }

  #stamped<T>(path: string, obj: T): T {
    const namespace = NAMESPACED.exec(path)?.[1];
    const o = obj as { metadata?: { labels?: Record<string, string> } };
    if (!namespace || !o?.metadata) return obj;
    return {
      ...obj,
      metadata: {
        ...o.metadata,
        labels: withShardLabel(o.metadata.labels, namespace, this.shards),
      },
    };
  }
}
