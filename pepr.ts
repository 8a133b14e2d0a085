import { PeprModule } from "pepr";
// cfg loads the Pepr configuration from package.json
import cfg from "./package.json";
import { CubePod, operator } from "./capabilities/cubepod";
import { explainMutateDenial } from "./capabilities/admission/explain-denial";
import { isWatcher } from "./capabilities/operator";

new PeprModule(cfg, [CubePod], { afterHook: explainMutateDenial });

// The watcher (or `pepr dev`) also runs the operator's own watch and the metrics server.
if (isWatcher()) operator.start();
