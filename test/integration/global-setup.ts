import { execFileSync } from "node:child_process";
import { join } from "node:path";

/**
 * Brings the local control plane and the module up (a running one is reused: `up` is idempotent)
 * before the integration tests, through the same script as `npm run up`.
 */
export default async function setup(): Promise<void> {
  // What the module did from here on is what rbac.test.ts compares its ClusterRole with.
  process.env.CUBEPOD_TEST_RUN_STARTED = new Date().toISOString();
  execFileSync("bash", [join(__dirname, "..", "..", "local-cluster", "up.sh")], {
    stdio: "inherit",
  });
  // Restarts in the tests run the module this start built (module.sh): they test the restart.
  process.env.CUBEPOD_MODULE_BUILD = "reuse";
}
