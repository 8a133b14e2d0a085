import type { V1ObjectMeta } from "@kubernetes/client-node";
import type { PodTemplateSpec } from "../api/podtemplate";
import { type ApiClient, KubeError } from "../client/api-client";
import { paths } from "../client/paths";
import { injectRuntime } from "../manifests/injection";
import { buildBoxPod } from "../manifests/pod";
import { buildBoxPVCs } from "../manifests/pvcs";

/** The name the dry-run objects are given: any valid name does, none is stored. */
const PROBE = "cubepod-template-check";
/** A public key's shape for the probe Pod: the dry run stores nothing, and runs no daemon. */
const PROBE_KEY = Buffer.alloc(32).toString("base64");

/**
 * What the API server would say of the Pod and PVCs a template makes, asked before the template
 * is stored: they are built as the operator builds them, with the runtime injected, and created
 * with `dryRun=All`. The schema and rules.ts catch what they can name; this catches every other
 * rule of the Pod and PVC APIs (an extended resource requested without its limit, hugepages
 * without memory), which would otherwise fail only when a box starts. Only field errors (422)
 * count: refusals that can heal (a RuntimeClass not created yet, a quota, Pod Security) are for
 * the box to report and retry, so that GitOps may apply objects in any order.
 */
export async function dryRunErrors(
  client: ApiClient,
  namespace: string,
  name: string,
  spec: PodTemplateSpec,
  vmRuntimeClasses: readonly string[],
): Promise<string[]> {
  const template = { name, spec };
  const volumes = buildBoxPVCs({ namespace, boxName: PROBE, template, rootfsGeneration: 1 });
  const pod = injectRuntime(
    buildBoxPod({
      namespace,
      podName: PROBE,
      boxName: PROBE,
      template,
      rootfsPVCName: volumes.rootfs.metadata!.name!,
      workspacePVCName: volumes.workspace.metadata!.name!,
    }),
    spec,
    PROBE_KEY,
    vmRuntimeClasses,
  );
  // The RuntimeClass and Priority admission plugins run before the API's own validation and
  // refuse a class not created yet, which would hide every field error behind it.
  pod.spec = { ...pod.spec!, runtimeClassName: undefined, priorityClassName: undefined };
  const checks: [string, string, { metadata?: V1ObjectMeta }][] = [
    ["the sandbox Pod", paths.pods(namespace), pod],
    ["the rootfs PVC", paths.pvcs(namespace), volumes.rootfs],
    ["the workspace PVC", paths.pvcs(namespace), volumes.workspace],
  ];
  const errors = await Promise.all(
    checks.map(async ([what, path, obj]) => {
      // Without CubePod's labels: no webhook of the module is asked about its own probe.
      const probe = { ...obj, metadata: { ...obj.metadata, labels: {}, ownerReferences: [] } };
      try {
        await client.create(`${path}?dryRun=All`, probe);
        return [];
      } catch (e) {
        if (!(e instanceof KubeError) || e.status !== 422) return [];
        const message = (e.data as { message?: string })?.message ?? "invalid";
        return [
          `${what} this template makes would be refused: ${message.replace(/^.*? is invalid: /, "")}`,
        ];
      }
    }),
  );
  return errors.flat();
}
