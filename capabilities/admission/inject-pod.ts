import type { a, PeprMutateRequest } from "pepr";
import type { CubePodTemplate } from "../api/kinds";
import type { ApiClient } from "../client/api-client";
import { paths } from "../client/paths";
import type { Config } from "../config";
import type { ControlKey } from "./control-key";
import type { NetworkReconciler } from "../network/reconciler";
import { injectRuntime } from "../manifests/injection";
import { LABEL_TEMPLATE, LABEL_TEMPLATE_HASH } from "../manifests/labels";
import { validatePodTemplate } from "./rules";
import { TemplateSpecCache } from "./template-cache";

/**
 * The mutate webhook of Pods labelled `pod.cubeplex.ai/template=<name>`: injects the sandbox
 * runtime of that PodTemplate (same namespace).
 */
export class SandboxPodInjector {
  /** Template specs by hash: a standby or box Pod built from a spec already read needs no GET. */
  readonly #templates = new TemplateSpecCache();

  constructor(
    private readonly client: ApiClient,
    private readonly network: NetworkReconciler,
    private readonly controlKey: Pick<ControlKey, "publicKey">,
    private readonly config: Pick<Config, "vmRuntimeClasses">,
  ) {}

  /**
   * Throws, and so denies the Pod, when the template is missing or invalid: a sandbox Pod without
   * podd would never become ready. A Pod whose template-hash label names the cached version of
   * its template gets that version without a read, so a Pod built from a template a moment
   * before the template changed or went gets the version it was built from.
   */
  async inject(req: PeprMutateRequest<a.Pod>): Promise<void> {
    const key = await this.controlKey.publicKey().catch(e => {
      throw new Error(
        `the gateway's key is not readable: sandbox daemons could not tell the gateway from anyone else (${(e as Error).message})`,
      );
    });
    const pod = req.Raw;
    const namespace = pod.metadata?.namespace || req.Request.namespace || "default";
    const templateName = pod.metadata?.labels?.[LABEL_TEMPLATE] ?? "";
    const hash = pod.metadata?.labels?.[LABEL_TEMPLATE_HASH];
    const spec =
      this.#templates.get(namespace, templateName, hash) ??
      (await this.#readTemplate(namespace, templateName));
    // The namespace's sandbox policy exists before the first sandbox Pod does.
    await this.network.ensureNamespace(namespace);
    const injected = injectRuntime(pod, spec, key, this.config.vmRuntimeClasses);
    pod.spec = injected.spec;
    pod.metadata = { ...pod.metadata, annotations: injected.metadata?.annotations };
  }

  async #readTemplate(namespace: string, name: string) {
    const where = `label ${LABEL_TEMPLATE}=${JSON.stringify(name)}`;
    const tpl = await this.client.get<CubePodTemplate>(paths.podTemplates(namespace, name));
    if (!tpl)
      throw new Error(`PodTemplate "${name}" not found in namespace "${namespace}" (${where})`);
    const verdict = validatePodTemplate(tpl.spec);
    if (!verdict.ok) {
      throw new Error(`PodTemplate "${name}" is invalid (${where}): ${verdict.errors.join("; ")}`);
    }
    this.#templates.put(namespace, name, verdict.spec);
    return verdict.spec;
  }
}
