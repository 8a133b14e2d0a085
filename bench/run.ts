/**
 * CubePod benchmarks on the local control plane (kwok). `npm run bench` runs all of them;
 * `npm run bench -- warm floor stream saturation cold admission gateway flood real forks sandbox
 * envd scale scale10k sharded sharded10k tls egress` picks some (scenarios/): `npm run bench -- flood`, say,
 * measures the gateway's per-tenant limits while one tenant floods it. Prints a table and saves
 * the figures as JSON under bench/results/ (git-ignored); `npm run bench:baseline -- <file>`
 * makes a run the baseline that docs/benchmarks.md shows. Not part of `npm test`: tests never
 * assert on time.
 */
import { cluster, Kube, paths } from "../testkit/kube";
import { podTemplate, TEMPLATE } from "../testkit/objects";
import { noBenchNamespaces, printTable, results, saveResults } from "./lib/results";
import { benchAdmission } from "./scenarios/admission";
import { benchBaseline } from "./scenarios/baseline";
import { benchCold } from "./scenarios/cold";
import { benchEgress } from "./scenarios/egress";
import { benchFloor } from "./scenarios/floor";
import { benchFlood } from "./scenarios/flood";
import { benchGateway } from "./scenarios/gateway";
import { benchEnvd } from "./scenarios/envd";
import { benchForks, benchRealNode } from "./scenarios/real-node";
import { benchSandbox } from "./scenarios/sandbox";
import { benchSaturation } from "./scenarios/saturation";
import { benchScale } from "./scenarios/scale";
import { benchSharded } from "./scenarios/sharded";
import { benchStream } from "./scenarios/stream";
import { benchTls } from "./scenarios/tls";
import { benchWarm } from "./scenarios/warm";

const pick = process.argv.slice(2);
const wanted = (name: string) => pick.length === 0 || pick.includes(name);

async function main() {
  cluster("up");
  const kube = new Kube();
  await noBenchNamespaces(kube);
  const ns = await kube.namespace("bench");
  await kube.mustCreate(paths.podtemplates(ns), podTemplate("python", TEMPLATE));
  await benchBaseline(kube, ns);
  if (wanted("warm")) await benchWarm(kube, ns);
  if (wanted("floor")) await benchFloor(kube);
  if (wanted("stream")) await benchStream(kube, ns);
  if (wanted("saturation")) await benchSaturation(kube);
  if (wanted("cold")) await benchCold(kube, ns);
  if (wanted("admission")) await benchAdmission(kube, ns);
  if (wanted("gateway")) await benchGateway(kube);
  if (wanted("real")) await benchRealNode(kube);
  // Part of `real`; alone when named.
  if (pick.includes("forks") && !pick.includes("real")) {
    results.forks = {
      what: "forks under gVisor to their first command, against a bare clone and Pod (ms)",
      ...(await benchForks(kube)),
    };
  }
  if (wanted("sandbox")) await benchSandbox(kube);
  if (wanted("sandbox") || wanted("envd")) await benchEnvd(kube);
  await kube.delete(`/api/v1/namespaces/${ns}`);
  if (wanted("flood")) {
    // Once the earlier scenarios' namespaces are gone: their teardown would take CPU the
    // gateway needs under the flood.
    await noBenchNamespaces(kube);
    await benchFlood(kube);
  }
  if (wanted("tls")) {
    await noBenchNamespaces(kube);
    await benchTls(kube);
  }
  if (wanted("egress")) {
    await noBenchNamespaces(kube);
    await benchEgress(kube);
  }
  // The full run takes the smaller shape; the 10,000 boxes only when named.
  const shapes = (["scale", "scale10k"] as const).filter(s =>
    pick.length === 0 ? s === "scale" : pick.includes(s),
  );
  for (const shape of shapes) {
    await noBenchNamespaces(kube);
    await benchScale(kube, shape);
  }
  // Three watcher replicas installed from the chart: only when named.
  for (const part of (["sharded", "sharded10k"] as const).filter(p => pick.includes(p))) {
    await noBenchNamespaces(kube);
    await benchSharded(kube, part);
  }
  kube.close();

  printTable();
  console.log(`saved ${saveResults()}`);
}

main().catch(e => {
  console.error(e);
  process.exit(1);
});
