import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Credentials } from "../capabilities/client/api-client";

/** Where Kubernetes mounts a Pod's ServiceAccount token and the cluster's CA. */
const SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";

/**
 * The gateway's credentials. In a cluster: its ServiceAccount, read directly, so that the
 * bundle shipped in the module manifest needs no Kubernetes client library; the token is read
 * on every call because the kubelet rotates it. Elsewhere: the default kubeconfig, through
 * @kubernetes/client-node, loaded only then.
 */
export async function gatewayCredentials(): Promise<Credentials> {
  const host = process.env.KUBERNETES_SERVICE_HOST;
  const tokenFile = join(SERVICE_ACCOUNT_DIR, "token");
  if (host && existsSync(tokenFile)) {
    const port = process.env.KUBERNETES_SERVICE_PORT ?? "443";
    return {
      server: `https://${host.includes(":") ? `[${host}]` : host}:${port}`,
      ca: readFileSync(join(SERVICE_ACCOUNT_DIR, "ca.crt")),
      authorization: `Bearer ${readFileSync(tokenFile, "utf8").trim()}`,
    };
  }
  const { defaultCredentials } = await import("../capabilities/client/kubeconfig");
  return defaultCredentials();
}
