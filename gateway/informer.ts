import { Agent, request } from "undici";
import { tlsOf, type CredentialSource } from "../capabilities/client/api-client";

type Meta = { metadata?: { namespace?: string; name?: string; resourceVersion?: string } };
type WatchEvent<T> = { type: string; object: T & { code?: number } };

const keyOf = (o: Meta) => `${o.metadata?.namespace ?? ""}/${o.metadata?.name ?? ""}`;

/**
 * A list-then-watch cache feed of one collection, as client-go's informers do: every object is
 * delivered once at start (`start` resolves then), then every change; an expired watch (410) or a
 * broken connection lists again, and objects gone meanwhile are delivered as deleted. The gateway
 * reads only what this delivers: an idle gateway sends no request but its watches.
 */
export class Informer<T extends Meta> {
  readonly #known = new Map<string, T>();
  #resourceVersion = "";
  #stopped = false;
  #agent?: Agent;
  #server = "";
  #headers: Record<string, string> = {};

  /**
   * @param path the collection, e.g. `/api/v1/secrets`
   * @param query extra query parameters (a field or label selector)
   */
  constructor(
    private readonly credentials: CredentialSource,
    private readonly path: string,
    private readonly query: Record<string, string>,
    private readonly onEvent: (obj: T, deleted: boolean) => void,
  ) {}

  /** Lists, delivers, and keeps watching in the background; resolves after the first list. */
  async start(): Promise<void> {
    const credentials = await this.credentials();
    const { server, authorization } = credentials;
    this.#agent = new Agent({
      connect: tlsOf(credentials),
      bodyTimeout: 0,
      headersTimeout: 30_000,
    });
    this.#server = server.replace(/\/$/, "");
    this.#headers = {
      "User-Agent": "cubepod-gateway",
      ...(authorization ? { Authorization: authorization } : {}),
    };
    await this.#list();
    void this.#loop();
  }

  stop(): void {
    this.#stopped = true;
    void this.#agent?.destroy();
  }

  #url(extra: Record<string, string>): string {
    return `${this.#server}${this.path}?${new URLSearchParams({ ...this.query, ...extra })}`;
  }

  async #list(): Promise<void> {
    const res = await request(this.#url({}), { dispatcher: this.#agent, headers: this.#headers });
    const body = (await res.body.json()) as {
      items?: T[];
      metadata?: { resourceVersion?: string };
    };
    if (res.statusCode !== 200) throw new Error(`list ${this.path}: HTTP ${res.statusCode}`);
    const seen = new Set<string>();
    for (const item of body.items ?? []) {
      seen.add(keyOf(item));
      this.#deliver(item, false);
    }
    for (const [key, old] of this.#known) if (!seen.has(key)) this.#deliver(old, true);
    this.#resourceVersion = body.metadata?.resourceVersion ?? "";
  }

  #deliver(obj: T, deleted: boolean): void {
    // Who wrote which field is read by nothing here, and is often most of an object's size.
    if (obj.metadata) delete (obj.metadata as { managedFields?: unknown }).managedFields;
    if (deleted) this.#known.delete(keyOf(obj));
    else this.#known.set(keyOf(obj), obj);
    this.onEvent(obj, deleted);
  }

  async #loop(): Promise<void> {
    while (!this.#stopped) {
      try {
        if (!(await this.#watch())) await this.#list();
      } catch {
        if (this.#stopped) return;
        await new Promise(r => setTimeout(r, 1000));
        await this.#list().catch(() => undefined);
      }
    }
  }

  /** One watch request; false when the server says the version is too old (relist). */
  async #watch(): Promise<boolean> {
    const res = await request(
      this.#url({
        watch: "1",
        resourceVersion: this.#resourceVersion,
        allowWatchBookmarks: "true",
        timeoutSeconds: "300",
      }),
      { dispatcher: this.#agent, headers: this.#headers },
    );
    if (res.statusCode !== 200) {
      await res.body.dump();
      if (res.statusCode === 410) return false;
      throw new Error(`watch ${this.path}: HTTP ${res.statusCode}`);
    }
    let buffered = "";
    for await (const chunk of res.body) {
      buffered += chunk.toString();
      let nl: number;
      while ((nl = buffered.indexOf("\n")) >= 0) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        if (!line.trim()) continue;
        const event = JSON.parse(line) as WatchEvent<T>;
        if (event.type === "ERROR") return event.object.code !== 410;
        this.#resourceVersion = event.object.metadata?.resourceVersion ?? this.#resourceVersion;
        if (event.type === "BOOKMARK") continue;
        this.#deliver(event.object, event.type === "DELETED");
      }
    }
    return true;
  }
}
