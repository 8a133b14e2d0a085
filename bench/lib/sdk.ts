import type { Kube } from "../../testkit/kube";
import { realTenant } from "../../testkit/tenant";
import { poolReadiness } from "./pools";

/** The local gateway's plain HTTP address (`npm run up`). */
export const GATEWAY = `http://127.0.0.1:${process.env.CUBEPOD_GATEWAY_PORT ?? 8080}`;

/** The E2B SDK's options for a tenant's key, every call through the local gateway. */
export const sdkOptions = (key: string) => ({
  apiKey: key,
  apiUrl: GATEWAY,
  sandboxUrl: GATEWAY,
  domain: "cubepod.localhost",
});

/**
 * A tenant on the real node with a pool `real` of `replicas` standbys, its standbys followed,
 * and the SDK's options for its key.
 */
export async function sdkTenant(kube: Kube, prefix: string, replicas: number, size?: string) {
  const { ns, key } = await realTenant(kube, { prefix, template: "real", replicas, size });
  return { ns, key, opts: sdkOptions(key), standbys: poolReadiness(kube, ns, "real") };
}
