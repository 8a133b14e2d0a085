/**
 * The local cluster with CubePod as a user installs it: `pepr dev` stopped, the chart built into
 * dist/ installed (the module's two Deployments and the gateway's, on the real node, images from
 * the local registry), and waited for; `--remove` takes it away and brings `pepr dev` back.
 * Usage: npm run up && npm run chart [-- --remove]
 */
import { deployedGatewayUrl, deployModule, undeployModule } from "../testkit/deployed-module";
import { Kube } from "../testkit/kube";

async function main() {
  const kube = new Kube();
  try {
    if (process.argv.includes("--remove")) {
      await undeployModule(kube);
      console.log("the chart's Deployments are gone; pepr dev serves the module again");
      return;
    }
    await deployModule(kube);
    console.log(
      `installed from dist/cubepod-chart; the gateway's Pod: ${await deployedGatewayUrl(kube)}`,
    );
  } finally {
    kube.close();
  }
}

main().catch(e => {
  console.error(`install-chart: ${(e as Error).message}`);
  process.exit(1);
});
