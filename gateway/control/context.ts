import { API_VERSION } from "../../capabilities/api/common";
import type { CubePodTemplate, PodBox, PodWarmPool } from "../../capabilities/api/kinds";
import type { ApiClient } from "../../capabilities/client/api-client";
import { paths } from "../../capabilities/client/paths";
import type { GatewayConfig } from "../config";
import {
  ANNOTATION_STARTED,
  ended,
  ENV_VARS_SECRET_TYPE,
  envVarsOf,
  envVarsSecretName,
  notFound,
  templateOf,
} from "../e2b";
import type { NamespacedCache, SandboxIndex } from "../sandboxes";
import { isSnapshot } from "../snapshots";

/** The start stamp every box the gateway makes carries (lists sort by it). */
export const startedNow = () => ({ [ANNOTATION_STARTED]: new Date().toISOString() });

export const endAt = (seconds: number) => new Date(Date.now() + seconds * 1000).toISOString();

/**
 * What every resource of E2B's control API shares: the API client, the watch-fed indexes and the
 * configuration, and the reads and writes of a sandbox's box that several resources make. Every
 * handler acts in the namespace the request's API key names, and a sandbox of another namespace
 * does not exist for it (404).
 */
export class ControlContext {
  /**
   * @param templates, pools watch-fed caches: a create reads neither from the API server (a
   *   template the cache has not seen yet is read once, as GitOps may apply it a moment before)
   */
  constructor(
    readonly client: ApiClient,
    readonly boxes: SandboxIndex,
    readonly templates: NamespacedCache<CubePodTemplate>,
    readonly pools: NamespacedCache<PodWarmPool>,
    readonly config: GatewayConfig,
  ) {}

  /** The box of that ID in the key's namespace, as the watch last showed it; else 404. */
  own(ns: string, id: string): PodBox {
    const box = this.boxes.get(ns, id);
    if (!box || ended(box) || isSnapshot(box)) throw notFound(id);
    return box;
  }

  templateOf(box: PodBox): CubePodTemplate | undefined {
    const name = templateOf(box);
    return name ? this.templates.get(box.metadata!.namespace!, name) : undefined;
  }

  /**
   * Sets the box's expiry, and returns once the watch shows the write, so that the caller's next
   * read (a getInfo) sees it: every answer comes from the watch-fed cache.
   */
  async setEnd(ns: string, id: string, seconds: number): Promise<void> {
    const written = await this.client.mergePatch<PodBox>(paths.podBoxes(ns, id), {
      spec: { expiresAt: endAt(seconds) },
    });
    const version = BigInt(written.metadata?.resourceVersion ?? "0");
    await this.boxes
      .waitFor(ns, id, b => !b || BigInt(b.metadata?.resourceVersion ?? "0") >= version, 5000)
      .catch(() => undefined);
  }

  /**
   * Keeps a create's envVars for the daemon of every resume, which starts anew: in a Secret (they
   * often carry credentials), owned by the box so that it goes with it.
   */
  async keepEnvVars(box: PodBox, envVars: Record<string, string>): Promise<void> {
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
  async keptEnvVars(ns: string, id: string): Promise<Record<string, string>> {
    type Kept = { metadata?: { ownerReferences?: { uid: string }[] }; data?: { envVars?: string } };
    const kept = await this.client.get<Kept>(paths.secrets(ns, envVarsSecretName(id)));
    const uid = this.boxes.get(ns, id)?.metadata?.uid;
    if (!kept?.data?.envVars || !kept.metadata?.ownerReferences?.some(o => o.uid === uid)) {
      return {};
    }
    return envVarsOf(Buffer.from(kept.data.envVars, "base64").toString("utf8"));
  }
}
