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
    /** Keep a seed: every new rootfs volume is a clone of one filled from the image. */
    seed?: boolean;
  },
): Promise<{ ns: string; key: string }> {
  const ns = await kube.namespace(opts.prefix);
  const key = `e2b_${randomBytes(20).toString("hex")}`;
  await kube.mustCreate(paths.podapikeys(ns), podAPIKey(`${opts.prefix}-agents`, key));
  await kube.mustCreate(
    paths.podtemplates(ns),
    podTemplate(opts.template, {
      ...realTemplate("Filesystem", opts.size ?? "1Gi"),
      runtimeClassName: opts.runtimeClassName ?? "",
      rootfs: {
        size: opts.size ?? "1Gi",
        ...(opts.rootfsPaths ? { paths: opts.rootfsPaths } : {}),
        ...(opts.seed ? { seed: true } : {}),
      },
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

/** Where the platform's tenant default templates live (samples/tenant-defaults.yaml). */
export const TENANT_DEFAULTS = "cubepod-defaults";

/**
 * Makes `spec` the platform's default `base` for every tenant, whole: replaced, not merged with
 * what `npm run dev` or another test put there. Resolves to a function that puts back what was.
 */
export async function useTenantDefault(kube: Kube, spec: object): Promise<() => Promise<void>> {
  const ns = await kube.get(`/api/v1/namespaces/${TENANT_DEFAULTS}`);
  if (ns.status === 404) {
    await kube.mustCreate("/api/v1/namespaces", { metadata: { name: TENANT_DEFAULTS } });
  }
  const path = paths.podtemplates(TENANT_DEFAULTS, "base");
  const replace = async (with_: object | undefined) => {
    const now = await kube.get(path);
    let r;
    if (with_ === undefined) r = await kube.delete(path);
    else if (now.status === 404)
      r = await kube.create(paths.podtemplates(TENANT_DEFAULTS), podTemplate("base", with_));
    else {
      const next = podTemplate("base", with_);
      r = await kube.request("PUT", path, {
        ...next,
        metadata: { ...next.metadata, resourceVersion: now.body.metadata.resourceVersion },
      });
    }
    if (r.status >= 300 && !(with_ === undefined && r.status === 404)) {
      throw new Error(`the tenant default ${TENANT_DEFAULTS}/base: ${r.status} ${r.body.message}`);
    }
  };
  const before = await kube.get(path);
  await replace(spec);
  return () => replace(before.status === 200 ? before.body.spec : undefined);
}
