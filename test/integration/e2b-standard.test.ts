import { ChildProcess, execFile, execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { CLUSTER_DIR, Kube, paths, ROOT } from "../../testkit/kube";
import { podAPIKey, podTemplate, realTemplate } from "../../testkit/objects";
import {
  STANDARD_DOMAIN as DOMAIN,
  STANDARD_GATEWAY_IP,
  standardGatewaySettings,
  startStandardSetup,
  underResolver,
} from "../../testkit/standard-setup";
import { startDeployedGateway, untilServing } from "./deployed-gateway";

/*
 * E2B's standard setup (testkit/standard-setup.ts): an agent's SDK, JS and Python, given only
 * E2B_DOMAIN and E2B_API_KEY, reaches the control API at https://api.<domain> and each sandbox at
 * https://<port>-<id>.<domain>, its names served by a resolver the test starts, the gateway as
 * the manifest ships it listening on 443 of the address they point at. Sandboxes run on the real
 * node under gVisor.
 */

const execFileAsync = promisify(execFile);
const kube = new Kube();
const key = `e2b_${randomBytes(20).toString("hex")}`;
let ns: string;
let dir: string;
let resolver: ChildProcess;
let gateway: ChildProcess;

beforeAll(async () => {
  ns = await kube.namespace("it-e2b-std");
  await kube.mustCreate(paths.podapikeys(ns), podAPIKey("agents", key));
  const base = { ...realTemplate("Filesystem", "1Gi"), runtimeClassName: "gvisor" };
  await kube.mustCreate(paths.podtemplates(ns), podTemplate("base", base));
  await kube.mustCreate(paths.podwarmpools(ns), {
    apiVersion: "pod.cubeplex.ai/v1alpha1",
    kind: "PodWarmPool",
    metadata: { name: "base" },
    spec: { templateRef: "base", replicas: 2 },
  });

  dir = mkdtempSync(join(tmpdir(), "cubepod-e2b-std-"));
  resolver = startStandardSetup(dir);
  gateway = startDeployedGateway(
    18095,
    readFileSync(join(CLUSTER_DIR, "gateway-token-key"), "utf8").trim(),
    standardGatewaySettings(dir, 18096),
  );
  await untilServing(80, STANDARD_GATEWAY_IP);
  await kube.waitFor(paths.podwarmpools(ns, "base"), o => o?.status?.readyReplicas === 2, 300_000);
}, 600_000);

afterAll(async () => {
  if (gateway?.pid) process.kill(-gateway.pid, "SIGTERM");
  resolver?.kill();
  await kube.delete(`/api/v1/namespaces/${ns}`);
  kube.close();
});

/**
 * Runs an agent with the SDK's standard settings only, its names resolved by the test's resolver
 * (its own /etc/resolv.conf, in a private mount namespace); returns what it printed last.
 */
async function agent(command: string[], trust: Record<string, string>) {
  const [file, args] = underResolver(dir, command);
  const { stdout } = await execFileAsync(file, args, {
    encoding: "utf8",
    env: { PATH: process.env.PATH, HOME: dir, E2B_DOMAIN: DOMAIN, E2B_API_KEY: key, ...trust },
    timeout: 240_000,
  });
  return JSON.parse(stdout.trim().split("\n").pop()!);
}

const expectStandard = (seen: Record<string, unknown>) => {
  expect(seen).toEqual({
    id: expect.stringMatching(/^[a-z][a-z0-9]{19}$/),
    echo: "standard\n",
    read: "kept",
    host: `8000-${seen.id}.${DOMAIN}`,
    served: "kept",
    downloaded: "kept",
    killed: true,
  });
};

describe("E2B's standard setup: only E2B_DOMAIN and E2B_API_KEY, over HTTPS", () => {
  it("the JS SDK creates, runs, writes, reads, reaches a port and a signed URL, and kills", async () => {
    const tsx = join(ROOT, "node_modules", ".bin", "tsx");
    const seen = await agent([tsx, join(__dirname, "e2b-standard", "agent.ts")], {
      NODE_EXTRA_CA_CERTS: join(dir, "ca.crt"),
    });
    expectStandard(seen);
  });

  it("the Python SDK does the same", async () => {
    const python = execFileSync("bash", [join(ROOT, "testkit", "python-e2b.sh")], {
      encoding: "utf8",
    }).trim();
    const seen = await agent([python, join(__dirname, "e2b-standard", "agent.py")], {
      SSL_CERT_FILE: join(dir, "ca.crt"),
    });
    expectStandard(seen);
  });
});
