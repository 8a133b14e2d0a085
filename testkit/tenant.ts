import { randomBytes } from "node:crypto";
import { Kube, paths } from "./kube";
import { podAPIKey, podTemplate, realTemplate } from "./objects";

/**
 * A tenant of the gateway on the real node, for tests and benchmarks that drive it with E2B's
 * SDKs: a namespace of its own, an API key, a PodTemplate of the real node's image by the name
 * the callers use, and a warm pool of it.
 */
export async function realTenant(
  kube: Kube,
  opts: {
    prefix: string;
    template: string;
    replicas: number;
    size?: string;
    /** The sandboxes' RuntimeClass: the real node's runc (none) or `gvisor`. */
    runtimeClassName?: string;
    /** The image's directories on the rootfs volume (the template's default when unset). */
    rootfsPaths?: string[];
  },
): Promise<{ ns: string; key: string }> {
  const ns = await kube.namespace(opts.prefix);
  const key = `e2b_${randomBytes(20).toString("hex")}`;
  await kube.mustCreate(paths.podapikeys(ns), podAPIKey(`${opts.prefix}-agents`, key));
  await kube.mustCreate(
    paths.podtemplates(ns),
    podTemplate(opts.template, {
      ...realTemplate("Filesystem", opts.size ?? "64Mi"),
      runtimeClassName: opts.runtimeClassName ?? "",
      ...(opts.rootfsPaths
        ? { rootfs: { size: opts.size ?? "64Mi", paths: opts.rootfsPaths } }
        : {}),
    }),
  );
  await kube.mustCreate(paths.podwarmpools(ns), {
    apiVersion: "pod.cubeplex.ai/v1alpha1",
    kind: "PodWarmPool",
    metadata: { name: opts.template },
    spec: { templateRef: opts.template, replicas: opts.replicas },
  });
  return { ns, key };
}
