/**
 * `pepr dev` registers the module's webhooks as Pepr generates them; this adds the same
 * sandbox-Pods-only match condition the built module YAML carries (see webhook-policy.ts), by a
 * strategic-merge patch under its own field manager, so Pepr's later re-applies keep it.
 */
import { execFileSync } from "node:child_process";
import { hardeningPatch } from "../../capabilities/admission/webhook-policy";

const name = "pepr-cubepod";
for (const kind of ["mutatingwebhookconfiguration", "validatingwebhookconfiguration"]) {
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
