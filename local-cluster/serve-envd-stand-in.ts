/**
 * Runs the podd stand-in (testkit/envd-stand-in.ts) for the Pods of the namespaces given, until
 * stopped: `npm run dev` uses it so that the E2B example works on kwok's Pods, which run nothing.
 */
import { Kube } from "../testkit/kube";
import { EnvdStandIn } from "../testkit/envd-stand-in";

const namespaces = process.argv.slice(2);
if (namespaces.length === 0) throw new Error("usage: serve-envd-stand-in.ts <namespace>...");
const standIn = new EnvdStandIn(new Kube(), namespaces);
standIn.start();
console.log(`podd stand-in serving the Pods of ${namespaces.join(", ")}`);
process.on("SIGTERM", () => (standIn.stop(), process.exit(0)));
