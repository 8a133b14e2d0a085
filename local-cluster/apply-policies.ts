/**
 * Applies the admission policies the module YAML carries (provenance-policy.ts) to the local
 * control plane, for the local module's identity: the user of .cluster/kubeconfig, as which
 * `pepr dev` runs it. Argument: that username.
 */
import { execFileSync } from "node:child_process";
import { stringify } from "yaml";
import { provenancePolicy } from "../capabilities/admission/provenance-policy";

const user = process.argv[2];
if (!user) throw new Error("usage: apply-policies.ts <the module's username>");
execFileSync(
  "kubectl",
  ["apply", "--server-side", "--field-manager=cubepod-local", "--force-conflicts", "-f", "-"],
  {
    input: provenancePolicy(user)
      .map(d => stringify(d))
      .join("---\n"),
    stdio: ["pipe", "inherit", "inherit"],
  },
);
