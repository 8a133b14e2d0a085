import { PeprModule } from "pepr";
// cfg loads the Pepr configuration from package.json
import cfg from "./package.json";
import { CubePod } from "./capabilities/cubepod";
import { explainMutateDenial } from "./capabilities/admission/explain-denial";

new PeprModule(cfg, [CubePod], { afterHook: explainMutateDenial });
