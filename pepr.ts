import { PeprModule } from "pepr";
// cfg loads the Pepr configuration from package.json
import cfg from "./package.json";
import { config, CubePod, operator } from "./capabilities/cubepod";
import { explainMutateDenial } from "./capabilities/admission/explain-denial";
import { outlastApiServerIdleConnections } from "./capabilities/admission/webhook-keep-alive";
import { isWatcher } from "./capabilities/operator";
import { ShardedWatcher } from "./capabilities/shard/sharded-watcher";

outlastApiServerIdleConnections();
new PeprModule(cfg, [CubePod], { afterHook: explainMutateDenial });

// The watcher (or `pepr dev`) also runs the operator's own watch and the metrics server; with
// several shards, the shards' leases and watches instead of Pepr's.
if (isWatcher()) {
  if (config.shards.count > 1) new ShardedWatcher(config).start();
  else operator.start();
}
