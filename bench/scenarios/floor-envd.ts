/**
 * Runs the gateway benchmark's podd floor (bench/lib/envd-stand-in.ts) for the Pods of the
 * namespaces given, in a process of its own as each sandbox's podd is, until stopped.
 */
import { Kube } from "../../testkit/kube";
import { EnvdStandIn } from "../lib/envd-stand-in";

const namespaces = process.argv.slice(2);
if (namespaces.length === 0) throw new Error("usage: floor-envd.ts <namespace>...");
const standIn = new EnvdStandIn(new Kube(), namespaces);
standIn.start();
console.log(`podd stand-in serving the Pods of ${namespaces.join(", ")}`);
process.on("SIGTERM", () => (standIn.stop(), process.exit(0)));
