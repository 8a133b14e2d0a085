import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { Agent, request as httpsRequest } from "node:https";
import { join } from "node:path";
import { parse } from "yaml";

export const ROOT = join(__dirname, "..");
export const CLUSTER_DIR = process.env.CUBEPOD_CLUSTER_DIR ?? join(ROOT, ".cluster");
export const KUBECONFIG = join(CLUSTER_DIR, "kubeconfig");
/** The local registry the real node pulls every image from (local-cluster/env.sh). */
export const REGISTRY = `127.0.0.1:${process.env.CUBEPOD_REGISTRY_PORT ?? 5000}`;
/** Where the set-up keeps what it builds and downloads, outside the work tree. */
export const CACHE_DIR =
  process.env.CUBEPOD_CACHE ?? join(process.env.HOME ?? "/root", ".cache", "cubepod");
/** The binaries `npm run up` builds (kubectl, helm, the control plane), as local-cluster/versions.sh places them. */
export const BIN_DIR = join(CACHE_DIR, "bin");
export const GROUP_PATH = "/apis/pod.cubeplex.ai/v1alpha1";
/** The Events about one object of a namespace, by its name. */
export const eventsAbout = (ns: string, name: string) =>
  `/api/v1/namespaces/${ns}/events?fieldSelector=${encodeURIComponent(`involvedObject.name=${name}`)}`;

/** The server and admin client certificate of a kubeconfig, as the module's ApiClient takes them. */
export function credentialsOf(kubeconfig = KUBECONFIG) {
  const cfg = parse(readFileSync(kubeconfig, "utf8"));
  const b64 = (s: string) => Buffer.from(s, "base64");
  return {
    server: cfg.clusters[0].cluster.server as string,
    ca: b64(cfg.clusters[0].cluster["certificate-authority-data"]),
    cert: b64(cfg.users[0].user["client-certificate-data"]),
    key: b64(cfg.users[0].user["client-key-data"]),
  };
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Obj = Record<string, any>;
export type Response = { status: number; body: Obj };

/**
 * A minimal client of the real API server for tests, authenticated with the admin client
 * certificate of .cluster/kubeconfig. Tests assert on HTTP status codes and messages, which the
 * fluent client hides.
 */
export class Kube {
  private readonly server: URL;
  private readonly agent: Agent;

  /**
   * @param impersonate a user (and groups) to act as, through the admin's right to impersonate:
   *   how tests act as restricted tenants
   */
  constructor(
    kubeconfig = KUBECONFIG,
    private readonly impersonate?: { user: string; groups?: string[] },
  ) {
    const { server, ca, cert, key } = credentialsOf(kubeconfig);
    this.server = new URL(server);
    this.agent = new Agent({ ca, cert, key, keepAlive: true });
  }

  /**
   * One request. An idempotent one whose kept-alive connection the API server had just closed
   * (ECONNRESET on a reused socket, before any answer) is sent once more on a new connection, as
   * Node's documentation advises: the server did not read it. The benchmark met this twice as a
   * bare "socket hang up" on the DELETE of its namespace after a long run.
   */
  async request(
    method: string,
    path: string,
    body?: unknown,
    contentType = "application/json",
  ): Promise<Response> {
    try {
      return await this.send(method, path, body, contentType);
    } catch (e) {
      const stale = (e as { staleSocket?: boolean }).staleSocket;
      if (!stale || !["GET", "HEAD", "PUT", "DELETE"].includes(method)) throw e;
      return this.send(method, path, body, contentType);
    }
  }

  private send(method: string, path: string, body: unknown, contentType: string) {
    return new Promise<Response>((resolve, reject) => {
      const data = body === undefined ? undefined : JSON.stringify(body);
      const req = httpsRequest(
        {
          host: this.server.hostname,
          port: this.server.port,
          path,
          method,
          agent: this.agent,
          headers: {
            "Content-Type": contentType,
            Accept: "application/json",
            // Not chunked: the API server answers the next request on the connection of a
            // chunked DELETE with 400.
            ...(data !== undefined ? { "Content-Length": Buffer.byteLength(data) } : {}),
            ...(this.impersonate
              ? {
                  "Impersonate-User": this.impersonate.user,
                  "Impersonate-Group": ["system:authenticated", ...(this.impersonate.groups ?? [])],
                }
              : {}),
          },
        },
        res => {
          const chunks: Buffer[] = [];
          res.on("data", c => chunks.push(c));
          res.on("end", () => {
            const text = Buffer.concat(chunks).toString();
            let parsed: Obj = {};
            try {
              parsed = text ? JSON.parse(text) : {};
            } catch {
              parsed = { raw: text };
            }
            resolve({ status: res.statusCode ?? 0, body: parsed });
          });
        },
      );
      // Which request failed: a socket error's own stack names none of the caller's frames.
      req.on("error", e => {
        const staleSocket = req.reusedSocket && (e as NodeJS.ErrnoException).code === "ECONNRESET";
        reject(Object.assign(e, { message: `${method} ${path}: ${e.message}`, staleSocket }));
      });
      if (data !== undefined) req.write(data);
      req.end();
    });
  }

  get = (path: string) => this.request("GET", path);
  create = (path: string, obj: unknown) => this.request("POST", path, obj);
  delete = (path: string) => this.request("DELETE", path);
  mergePatch = (path: string, patch: unknown) =>
    this.request("PATCH", path, patch, "application/merge-patch+json");

  /** Creates and returns the object; throws with the API server's message when it refuses. */
  async mustCreate(path: string, obj: unknown): Promise<Obj> {
    const r = await this.create(path, obj);
    if (r.status !== 201 && r.status !== 200) {
      throw new Error(`create ${path}: ${r.status} ${r.body.message ?? JSON.stringify(r.body)}`);
    }
    return r.body;
  }

  /** A fresh namespace for one test file. */
  async namespace(prefix: string): Promise<string> {
    const name = `${prefix}-${Math.random().toString(36).slice(2, 8)}`;
    await this.mustCreate("/api/v1/namespaces", { metadata: { name } });
    return name;
  }

  /**
   * Follows a watch on a collection path (query parameters allowed), calling `onEvent` for every
   * event until the returned function is called. Starts from now (resourceVersion of a list).
   * `onEnd` learns that the watch ended on its own (its timeout, or the API server went).
   */
  watchCollection(
    path: string,
    onEvent: (type: string, o: Obj) => void,
    fromResourceVersion?: string,
    onEnd?: () => void,
  ): () => void {
    let req: ReturnType<typeof httpsRequest> | undefined;
    let stopped = false;
    const start = async () => {
      const rv = fromResourceVersion ?? (await this.get(path)).body.metadata?.resourceVersion;
      if (stopped) return;
      const sep = path.includes("?") ? "&" : "?";
      let buffer = "";
      req = httpsRequest(
        {
          host: this.server.hostname,
          port: this.server.port,
          path: `${path}${sep}watch=1&resourceVersion=${rv}&timeoutSeconds=600`,
          method: "GET",
          agent: this.agent,
        },
        res => {
          res.on("data", chunk => {
            buffer += chunk.toString();
            let nl: number;
            while ((nl = buffer.indexOf("\n")) >= 0) {
              const line = buffer.slice(0, nl);
              buffer = buffer.slice(nl + 1);
              if (!line.trim()) continue;
              const ev = JSON.parse(line) as { type: string; object: Obj };
              if (!stopped) onEvent(ev.type, ev.object);
            }
          });
          res.on("end", () => stopped || onEnd?.());
        },
      );
      req.on("error", () => stopped || onEnd?.());
      req.end();
    };
    void start();
    return () => {
      stopped = true;
      req?.destroy();
    };
  }

  /**
   * Resolves with the object at `path` (a single object's path) once `predicate` holds for it,
   * listing it once (by name) and then following a watch from the list's resourceVersion: the
   * object's own may be older than the API server's watch window. Rejects after `timeoutMs` with
   * the last state seen, so a failing test says where the object got stuck.
   */
  async waitFor(
    path: string,
    predicate: (o: Obj | undefined) => boolean,
    timeoutMs = 60_000,
  ): Promise<Obj | undefined> {
    const slash = path.lastIndexOf("/");
    const collection = path.slice(0, slash);
    const name = path.slice(slash + 1);
    const query = `${collection}?fieldSelector=${encodeURIComponent(`metadata.name=${name}`)}`;
    const first = await this.get(query);
    if (first.status !== 200)
      throw new Error(`GET ${query}: ${first.status} ${first.body.message}`);
    let last: Obj | undefined = first.body.items[0];
    if (predicate(last)) return last;
    const rv = first.body.metadata.resourceVersion;
    return new Promise((resolve, reject) => {
      const stop = this.watchCollection(
        query,
        (type, o) => {
          last = type === "DELETED" ? undefined : o;
          if (predicate(last)) {
            clearTimeout(timer);
            stop();
            resolve(last);
          }
        },
        rv,
      );
      const timer = setTimeout(() => {
        stop();
        const seen = `last seen: ${JSON.stringify(last?.status ?? last ?? "absent")}`;
        void this.#podOf(path, last).then(pod =>
          reject(new Error(`timed out waiting on ${path}; ${seen}${pod}`)),
        );
      }, timeoutMs);
    });
  }

  /**
   * For a box that names its Pod: the Pod's container states and the events about it, so that a
   * box stuck waiting for its Pod says why; empty for anything else.
   */
  async #podOf(path: string, box: Obj | undefined): Promise<string> {
    const ns = box?.metadata?.namespace;
    const name = box?.status?.podName;
    if (!path.includes("/podboxes/") || !ns || !name) return "";
    try {
      const pod = await this.get(`/api/v1/namespaces/${ns}/pods/${name}`);
      const states = [
        ...(pod.body.status?.initContainerStatuses ?? []),
        ...(pod.body.status?.containerStatuses ?? []),
      ].map((c: Obj) => ({ name: c.name, ready: c.ready, state: c.state, last: c.lastState }));
      const events = await this.get(eventsAbout(ns, name));
      const said = (events.body.items ?? [])
        .slice(-10)
        .map((e: Obj) => `${e.reason}: ${e.message}`);
      return `; its Pod: ${JSON.stringify({ phase: pod.body.status?.phase, states, events: said })}`;
    } catch (e) {
      return `; its Pod could not be read: ${e instanceof Error ? e.message : String(e)}`;
    }
  }

  /**
   * Resolves with a collection's items (query parameters allowed) once `predicate` holds for them,
   * from a list and then watches, listed again whenever a watch ends; rejects after `timeoutMs`.
   */
  waitForItems(
    collection: string,
    predicate: (items: Obj[]) => boolean,
    timeoutMs = 60_000,
  ): Promise<Obj[]> {
    const items = new Map<string, Obj>();
    return new Promise((resolve, reject) => {
      let done = false;
      const finish = (error?: Error) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        follow.stop();
        if (error) reject(error);
        else resolve([...items.values()]);
      };
      const check = () => {
        if (predicate([...items.values()])) finish();
      };
      const follow = this.followCollection(
        collection,
        listed => {
          items.clear();
          for (const i of listed) items.set(i.metadata.name, i);
          check();
        },
        (type, o) => {
          if (type === "DELETED") items.delete(o.metadata.name);
          else items.set(o.metadata.name, o);
          check();
        },
      );
      follow.started.catch(finish);
      const timer = setTimeout(
        () => finish(new Error(`timed out waiting on ${collection} (${items.size} items)`)),
        timeoutMs,
      );
    });
  }

  /**
   * Follows a collection for as long as it takes: lists it (`onList` gets the items, in place of
   * all seen before), watches from that list, and lists and watches again whenever a watch ends
   * (the API server ends each within its timeout), until `stop`. `started` settles with the first
   * list.
   */
  followCollection(
    collection: string,
    onList: (items: Obj[]) => void,
    onEvent: (type: string, o: Obj) => void,
  ): { started: Promise<void>; stop: () => void } {
    let stopped = false;
    let stopWatch = () => {};
    const round = async () => {
      const r = await this.get(collection);
      if (r.status !== 200) throw new Error(`GET ${collection}: ${r.status} ${r.body.message}`);
      if (stopped) return;
      onList(r.body.items as Obj[]);
      if (stopped) return;
      stopWatch = this.watchCollection(collection, onEvent, r.body.metadata.resourceVersion, () => {
        if (!stopped) again();
      });
    };
    const again = (): void => void round().catch(() => setTimeout(() => stopped || again(), 1000));
    return {
      started: round(),
      stop: () => {
        stopped = true;
        stopWatch();
      },
    };
  }

  /** Names of the objects at a collection path matching a label selector, sorted. */
  async names(collection: string, labelSelector: string): Promise<string[]> {
    const r = await this.get(`${collection}?labelSelector=${encodeURIComponent(labelSelector)}`);
    return (r.body.items as Obj[]).map(i => i.metadata.name).sort();
  }

  close(): void {
    this.agent.destroy();
  }
}

/** REST paths of the kinds tests touch. */
export const paths = {
  podboxes: (ns: string, name = "") =>
    `${GROUP_PATH}/namespaces/${ns}/podboxes${name && `/${name}`}`,
  podtemplates: (ns: string, name = "") =>
    `${GROUP_PATH}/namespaces/${ns}/podtemplates${name && `/${name}`}`,
  podwarmpools: (ns: string, name = "") =>
    `${GROUP_PATH}/namespaces/${ns}/podwarmpools${name && `/${name}`}`,
  podapikeys: (ns: string, name = "") =>
    `${GROUP_PATH}/namespaces/${ns}/podapikeys${name && `/${name}`}`,
  pods: (ns: string, name = "") => `/api/v1/namespaces/${ns}/pods${name && `/${name}`}`,
  pvcs: (ns: string, name = "") =>
    `/api/v1/namespaces/${ns}/persistentvolumeclaims${name && `/${name}`}`,
  secrets: (ns: string, name = "") => `/api/v1/namespaces/${ns}/secrets${name && `/${name}`}`,
  networkpolicies: (ns: string, name = "") =>
    `/apis/networking.k8s.io/v1/namespaces/${ns}/networkpolicies${name && `/${name}`}`,
};

/** Runs one of the cluster scripts (local-cluster/*.sh) and returns its output. */
export function cluster(script: string, ...args: string[]): string {
  return clusterWithEnv({}, script, ...args);
}

/** {@link cluster}, with extra environment variables (e.g. a failpoint for the module). */
export function clusterWithEnv(
  env: Record<string, string>,
  script: string,
  ...args: string[]
): string {
  return execFileSync("bash", [join(ROOT, "local-cluster", `${script}.sh`), ...args], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ...env },
  });
}

/** The message the API server relays when our validating or mutating webhook denies a request. */
export const denied = (message: string) =>
  `admission webhook "pepr-cubepod.pepr.dev" denied the request: ${message}`;
