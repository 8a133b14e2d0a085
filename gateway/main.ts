/**
 * The CubePod gateway: E2B's API for sandboxes, and live routing of their traffic. Stateless:
 * every fact it needs comes from the API server (PodBoxes, PodAPIKeys) through watches, so
 * any number of replicas serve the same sandboxes. It never talks to the module.
 */
import { ApiClient } from "../capabilities/client/api-client";
import { GROUP_PATH } from "../capabilities/client/paths";
import { gatewayCredentials } from "./credentials";
import { ConfigError } from "../capabilities/config";
import type { CubePodTemplate, PodBox, PodWarmPool } from "../capabilities/api/kinds";
import { loadGatewayConfig } from "./config";
import { ControlContext } from "./control/context";
import type { ControlApi } from "./control/routes";
import { SandboxMetricsApi } from "./control/sandbox-metrics";
import { SandboxesApi } from "./control/sandboxes";
import { SnapshotsApi } from "./control/snapshots";
import { SandboxStarter } from "./control/start";
import { Informer } from "./informer";
import { KeyIndex, type PodAPIKey } from "./keys";
import { SandboxProxy } from "./proxy";
import { NamespacedCache, SandboxIndex } from "./sandboxes";
import { gatewayRegistry } from "./metrics";
import { startMetricsServer } from "../capabilities/metrics/server";
import { TokenBuckets } from "./rate-limit";
import { gatewayServer } from "./server";

async function main(): Promise<void> {
  let config;
  try {
    config = loadGatewayConfig();
  } catch (e) {
    if (e instanceof ConfigError) {
      console.error(`cubepod-gateway: ${e.message}`);
      process.exit(2);
    }
    throw e;
  }
  const client = new ApiClient(30_000, gatewayCredentials, "cubepod-gateway");
  const keys = new KeyIndex();
  const boxes = new SandboxIndex();
  const templates = new NamespacedCache<CubePodTemplate>();
  const pools = new NamespacedCache<PodWarmPool>();
  const informers = [
    new Informer<PodBox>(gatewayCredentials, `${GROUP_PATH}/podboxes`, {}, (b, d) =>
      boxes.observe(b, d),
    ),
    new Informer<CubePodTemplate>(gatewayCredentials, `${GROUP_PATH}/podtemplates`, {}, (t, d) =>
      templates.observe(t, d),
    ),
    new Informer<PodWarmPool>(gatewayCredentials, `${GROUP_PATH}/podwarmpools`, {}, (p, d) =>
      pools.observe(p, d),
    ),
    new Informer<PodAPIKey>(gatewayCredentials, `${GROUP_PATH}/podapikeys`, {}, (k, d) =>
      keys.observe(k, d),
    ),
  ];
  await Promise.all(informers.map(i => i.start()));
  const context = new ControlContext(client, boxes, templates, pools, config);
  const starter = new SandboxStarter(context);
  const control: ControlApi = {
    sandboxes: new SandboxesApi(context, starter),
    snapshots: new SnapshotsApi(context),
    metrics: new SandboxMetricsApi(context),
  };
  const proxy = new SandboxProxy(boxes, client, config, (ns, id) => starter.resume(ns, id));
  const limit = config.rateLimit;
  const rateLimit = limit ? new TokenBuckets(limit.perSecond, limit.burst) : undefined;
  const servers = [gatewayServer(config, keys, control, proxy, rateLimit)];
  if (config.tls) servers.push(gatewayServer(config, keys, control, proxy, rateLimit, config.tls));
  const metrics = startMetricsServer(
    // Healthy while the API server answers: the watches then keep the caches current.
    async () =>
      client.ready().then(
        () => ({ ok: true, detail: "API server ready" }),
        e => ({ ok: false, detail: String(e) }),
      ),
    () => undefined,
    config.metricsPort,
    config.host,
    gatewayRegistry,
  );
  servers[0].listen(config.port, config.host, () =>
    console.log(`cubepod-gateway listening on http://${config.host}:${config.port}`),
  );
  servers[1]?.listen(config.tls!.port, config.host, () =>
    console.log(`cubepod-gateway listening on https://${config.host}:${config.tls!.port}`),
  );
  const stop = () => {
    informers.forEach(i => i.stop());
    proxy.close();
    metrics.close();
    let open = servers.length;
    for (const server of servers) {
      server.close(() => --open === 0 && process.exit(0));
      server.closeAllConnections();
    }
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}

void main().catch(e => {
  console.error(`cubepod-gateway: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
});
