import type { a, PeprMutateRequest } from "pepr";
import type { CubePodTemplate } from "../api/kinds";
import { getObject, paths } from "../client/resources";
import { injectRuntime } from "../manifests/injection";
import { LABEL_TEMPLATE, LABEL_TEMPLATE_HASH } from "../manifests/labels";
import { validatePodTemplate } from "./rules";
import { TemplateSpecCache } from "./template-cache";

/** Template specs by hash: a standby or box Pod built from a spec already read needs no GET. */
const templates = new TemplateSpecCache();

/**
 * Mutate action for Pods labelled `pod.cubeplex.ai/template=<name>`: injects the runtime of that
 * PodTemplate (same namespace). Throws, and so denies the Pod, when the template is missing or
 * invalid: a sandbox Pod without podd would never become ready. A Pod whose template-hash label
 * names the cached version of its template gets that version without a read: the operator's
 * Pods carry it, so a pool refill or a cold start costs one request less. A Pod built from a
 * template a moment before the template changed or went gets the version it was built from.
 */
export async function injectSandboxPod(req: PeprMutateRequest<a.Pod>): Promise<void> {
  const pod = req.Raw;
  const namespace = pod.metadata?.namespace || req.Request.namespace || "default";
  const templateName = pod.metadata?.labels?.[LABEL_TEMPLATE] ?? "";
  const hash = pod.metadata?.labels?.[LABEL_TEMPLATE_HASH];
  const spec =
    templates.get(namespace, templateName, hash) ??
    (await getTemplateSpec(namespace, templateName));
  const injected = injectRuntime(pod, spec);
  pod.spec = injected.spec;
  pod.metadata = { ...pod.metadata, annotations: injected.metadata?.annotations };
}

async function getTemplateSpec(namespace: string, name: string) {
  const where = `label ${LABEL_TEMPLATE}=${JSON.stringify(name)}`;
  const tpl = await getObject<CubePodTemplate>(paths.podTemplates(namespace, name));
  if (!tpl)
    throw new Error(`PodTemplate "${name}" not found in namespace "${namespace}" (${where})`);
  const verdict = validatePodTemplate(tpl.spec);
  if (!verdict.ok) {
    throw new Error(`PodTemplate "${name}" is invalid (${where}): ${verdict.errors.join("; ")}`);
  }
  templates.put(namespace, name, verdict.spec);
  return verdict.spec;
}
