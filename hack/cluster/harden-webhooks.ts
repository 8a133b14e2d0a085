/**
 * `pepr dev` registers the module's webhooks as Pepr generates them; this adds the same match
 * conditions the built module YAML carries (see webhook-policy.ts), by a strategic-merge patch
 * under its own field manager. Pepr registers them anew after each rebuild, without them:
 * keep-hardened.sh runs this again each time. Arguments: the configuration kinds (default both).
 */
import { execFileSync } from "node:child_process";
import { hardeningPatch } from "../../capabilities/admission/webhook-policy";

const name = "pepr-cubepod";
const kinds = process.argv.slice(2);
for (const kind of kinds.length
  ? kinds
  : ["mutatingwebhookconfiguration", "validatingwebhookconfiguration"]) {
  const names = execFileSync("kubectl", ["get", kind, name, "-o", "jsonpath={.webhooks[*].name}"])
    .toString()
    .split(" ")
    .filter(Boolean);
  execFileSync("kubectl", [
    "patch",
    kind,
    name,
    "--type=strategic",
    "--field-manager=cubepod-hardening",
    "-p",
    JSON.stringify(hardeningPatch(names)),
  ]);
  console.log(`hardened ${kind}/${name}: ${names.join(", ")}`);
}
