import { randomBytes } from "node:crypto";
import { PoddControl } from "../../gateway/podd-control";
import { KubeError, type ApiClient } from "../client/api-client";
import { paths } from "../client/paths";

/** The Secret of the gateway's token key, in the gateway's namespace; its gateway mounts it. */
export const TOKEN_KEY_SECRET = "cubepod-gateway-token-key";
/** How soon the module tries again to make or read the key at its start. */
const RETRY_MS = 5000;

type Secret = { data?: Record<string, string> };

/**
 * The gateway's token key, made in the cluster by the first module process to start, so that no
 * artifact (manifest, chart, image) holds it and two installs never share it. The module keeps
 * only the public half of podd's control key, which the webhook puts into each sandbox Pod.
 * Read once per process: a rotation (docs/deploy.md) restarts the module's Pods.
 */
export class ControlKey {
  #publicKey?: Promise<string>;

  constructor(
    private readonly client: ApiClient,
    private readonly namespace: string,
  ) {}

  /** The public key podd is to trust; a failed read is tried again on the next call. */
  publicKey(): Promise<string> {
    this.#publicKey ??= this.#load().catch(e => {
      this.#publicKey = undefined;
      throw e;
    });
    return this.#publicKey;
  }

  /** Makes the key now, trying until it is there: the gateway does not start without it. */
  ensure(log: (message: string) => void): void {
    this.publicKey().catch(e => {
      log(`the gateway's token key: ${(e as Error).message}; trying again`);
      setTimeout(() => this.ensure(log), RETRY_MS).unref();
    });
  }

  async #load(): Promise<string> {
    const path = paths.secrets(this.namespace, TOKEN_KEY_SECRET);
    const secret = (await this.client.get<Secret>(path)) ?? (await this.#create(path));
    const key = Buffer.from(secret.data?.key ?? "", "base64")
      .toString("utf8")
      .trim();
    if (key.length < 32) {
      throw new Error(
        `Secret ${this.namespace}/${TOKEN_KEY_SECRET} has no key of at least 32 characters in data.key`,
      );
    }
    return new PoddControl(key).publicKey;
  }

  /** Creates the Secret; another process's at the same moment wins (409), and is read. */
  async #create(path: string): Promise<Secret> {
    try {
      return await this.client.create<Secret>(paths.secrets(this.namespace), {
        apiVersion: "v1",
        kind: "Secret",
        metadata: {
          name: TOKEN_KEY_SECRET,
          labels: { "app.kubernetes.io/name": "cubepod", "app.kubernetes.io/component": "gateway" },
        },
        type: "Opaque",
        data: { key: Buffer.from(randomBytes(32).toString("hex")).toString("base64") },
      } as Secret);
    } catch (e) {
      if (!(e instanceof KubeError && e.status === 409)) throw e;
      const secret = await this.client.get<Secret>(path);
      if (!secret) throw new Error(`Secret ${this.namespace}/${TOKEN_KEY_SECRET} went at once`);
      return secret;
    }
  }
}
