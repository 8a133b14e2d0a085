import type { a, PeprMutateRequest } from "pepr";
import type { CubePodTemplate } from "../api/kinds";
import { getObject, paths } from "../client/resources";
import { injectRuntime } from "../manifests/injection";
import { LABEL_TEMPLATE } from "../manifests/labels";
import { validatePodTemplate } from "./rules";

/**
 * Mutate action for Pods labelled `pod.cubeplex.ai/template=<name>`: injects the runtime of that
 * PodTemplate (same namespace). Throws, and so denies the Pod, when the template is missing or
 * invalid: a sandbox Pod without podd would never become ready.
 */
export async function injectSandboxPod(req: PeprMutateRequest<a.Pod>): Promise<void> {
  const pod = req.Raw;
  const namespace = pod.metadata?.namespace || req.Request.namespace || "default";
  const templateName = pod.metadata?.labels?.[LABEL_TEMPLATE] ?? "";
  const spec = await getTemplateSpec(namespace, templateName);
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
  return verdict.spec;
}
