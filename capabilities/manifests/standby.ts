import type { V1ObjectMeta, V1PersistentVolumeClaim, V1Pod } from "@kubernetes/client-node";
import { LABEL_BOX, LABEL_POOL, LABEL_TEMPLATE_HASH } from "./labels";
import { buildBoxPod, egressAnnotations } from "./pod";
import { buildBoxPVCs } from "./pvcs";
import type { Owner, TemplateRef } from "./types";

/** Input of {@link buildStandby}. */
export type StandbyInput = {
  namespace: string;
  pool: string;
  /** The standby's name: its Pod's name and its volume key. */
  name: string;
  template: TemplateRef;
  templateHash: string;
  owner: Owner;
};

/**
 * Builds one warm standby of a pool: the same rootfs and workspace PVCs and the same Pod as a box
 * would get (so a claim is only a change of owner), labelled as pool members and owned by the
 * pool. They carry no box label until a box claims them.
 */
export function buildStandby(input: StandbyInput): {
  pod: V1Pod;
  rootfs: V1PersistentVolumeClaim;
  workspace: V1PersistentVolumeClaim;
} {
  const common = {
    namespace: input.namespace,
    boxName: input.name,
    template: input.template,
    owner: input.owner,
  };
  const { rootfs, workspace } = buildBoxPVCs({ ...common, rootfsGeneration: 1 });
  const pod = buildBoxPod({
    ...common,
    podName: input.name,
    rootfsPVCName: rootfs.metadata!.name!,
    workspacePVCName: workspace.metadata!.name!,
    // The template's egress rules: a claim by a box with no rules of its own finds them
    // enforced already.
    annotations: egressAnnotations(undefined, input.template.spec),
    // A rootfs cloned from the seed holds the template's podd: the Pod needs no init container.
    ...(input.template.seed ? { rootfsPodd: input.template.spec.poddInjectorImage } : {}),
  });
  const member = { [LABEL_POOL]: input.pool, [LABEL_TEMPLATE_HASH]: input.templateHash };
  for (const obj of [pod, rootfs, workspace]) relabel(obj.metadata!, member);
  return { pod, rootfs, workspace };
}

function relabel(meta: V1ObjectMeta, add: Record<string, string>): void {
  const labels = { ...meta.labels, ...add };
  delete labels[LABEL_BOX];
  meta.labels = labels;
}
