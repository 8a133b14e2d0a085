import { Agent as HttpsAgent } from "node:https";
import { KubeConfig } from "@kubernetes/client-node";
import { Headers } from "undici";
import type { Credentials } from "./api-client";

/**
 * The module's credentials: the default kubeconfig (`KUBECONFIG`, `~/.kube/config`) or, in a
 * cluster, the service account, as @kubernetes/client-node resolves them (exec plugins and token
 * files included).
 */
export async function defaultCredentials(): Promise<Credentials> {
  const kc = new KubeConfig();
  kc.loadFromDefault();
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error("no current cluster in the kubeconfig");
  const opts = (await kc.applyToFetchOptions({})) as { agent?: unknown; headers?: unknown };
  const tls = opts.agent instanceof HttpsAgent ? opts.agent.options : {};
  const authorization = new Headers(opts.headers as ConstructorParameters<typeof Headers>[0]).get(
    "Authorization",
  );
  return {
    server: cluster.server,
    ca: tls.ca,
    cert: tls.cert,
    key: tls.key,
    ...(authorization ? { authorization } : {}),
  };
}
