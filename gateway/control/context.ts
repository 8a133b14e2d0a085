import type { CubePodTemplate, PodBox, PodWarmPool } from "../../capabilities/api/kinds";
import type { ApiClient } from "../../capabilities/client/api-client";
import { paths } from "../../capabilities/client/paths";
import type { GatewayConfig } from "../config";
import { ANNOTATION_STARTED, ApiError, ended, envVarsOf, notFound, templateOf } from "../e2b";
import { ANNOTATION_ENV_VARS, ANNOTATION_TOKEN_KEY, MAX_SEALED_ENV_VARS } from "../token-keys";
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
   * The annotations that keep a create's envVars for the daemon of every resume and fork, which
   * starts anew, and name the key its access token is made with. Sealed (they often carry
   * credentials): the tenant may read its boxes, and only the gateway can open them.
   */
  keyAnnotations(
    ns: string,
    name: string,
    envVars: Record<string, string>,
  ): Record<string, string> {
    const keys = this.config.tokenKeys;
    const annotations: Record<string, string> = { [ANNOTATION_TOKEN_KEY]: keys.current.id };
    if (Object.keys(envVars).length === 0) return annotations;
    const sealed = keys.sealEnvVars(envVars, ns, name);
    if (sealed.length > MAX_SEALED_ENV_VARS) {
      throw new ApiError(400, `envVars: at most ${MAX_SEALED_ENV_VARS / 1024} KiB in all`);
    }
    return { ...annotations, [ANNOTATION_ENV_VARS]: sealed };
  }

  /** The envVars a create kept for the box now named `id`, as the watch shows it. */
  keptEnvVars(ns: string, id: string): Record<string, string> {
    const box = this.boxes.get(ns, id);
    const opened = box && this.config.tokenKeys.openEnvVars(box);
    return opened === undefined ? {} : envVarsOf(opened);
  }
}
