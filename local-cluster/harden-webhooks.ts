/**
 * `pepr dev` registers the module's webhooks as Pepr generates them; this adds the same match
 * conditions the built module YAML carries (see webhook-policy.ts), by a strategic-merge patch
 * under its own field manager. Pepr registers them anew after each rebuild, without them:
 * keep-hardened.sh runs this again each time. Arguments: the configuration kinds (default both).
 */
import { execFileSync } from "node:child_process";
import { hardeningPatch } from "../capabilities/admission/webhook-policy";

const name = "pepr-cubepod";
// The dev module's own setting: with several shards its mutating webhook stamps CubePod's kinds.
const sharded = Number(process.env.CUBEPOD_SHARDS ?? "1") > 1;
const KINDS: Record<string, string> = {
  mutatingwebhookconfiguration: "MutatingWebhookConfiguration",
  validatingwebhookconfiguration: "ValidatingWebhookConfiguration",
};
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
    JSON.stringify(hardeningPatch(names, KINDS[kind], sharded)),
  ]);
  console.log(`hardened ${kind}/${name}: ${names.join(", ")}`);
}
