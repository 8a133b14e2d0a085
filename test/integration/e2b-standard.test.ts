import { ChildProcess, execFile, execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { CLUSTER_DIR, Kube, paths, ROOT } from "../../testkit/kube";
import { podAPIKey, podTemplate, realTemplate } from "../../testkit/objects";
import { startDeployedGateway, untilServing } from "./deployed-gateway";

/*
 * E2B's standard setup: an agent's SDK, JS and Python, given only E2B_DOMAIN and E2B_API_KEY,
 * reaches the control API at https://api.<domain> and each sandbox at
 * https://<port>-<id>.<domain>, as it would a deployment's gateway behind its wildcard DNS name.
 * Here the names are served by a resolver this test starts (Debian's dnsmasq), which the SDKs'
 * processes use through their own /etc/resolv.conf (a private mount namespace); the gateway, as
 * the manifest ships it, listens on the address the names point at, on 443 with a certificate
 * for <domain> and *.<domain> from a CA the test makes, which the SDKs' processes trust. Sandboxes
 * run on the real node under gVisor.
 */

const execFileAsync = promisify(execFile);
/**
 * Not under `.localhost`, which some clients resolve to 127.0.0.1 themselves (the Python SDK's
 * HTTP client does), whatever the resolver says: RFC 2606's `.test`, as a real domain would be.
 */
const DOMAIN = "cubepod.test";
/** Where the names point: a loopback address of the gateway's own, so that it may have :443. */
const GATEWAY_IP = "127.0.0.44";
const RESOLVER_IP = "127.0.0.45";
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
  execFileSync("bash", ["-c", "command -v dnsmasq || apt-get install -y -q dnsmasq-base"], {
    stdio: "ignore",
  });
  resolver = spawn(
    "dnsmasq",
    [
      "--keep-in-foreground",
      "--no-resolv",
      "--no-hosts",
      "--bind-interfaces",
      `--listen-address=${RESOLVER_IP}`,
      `--address=/${DOMAIN}/${GATEWAY_IP}`,
      `--pid-file=${join(dir, "dnsmasq.pid")}`,
      "--user=root",
    ],
    { stdio: ["ignore", "ignore", "inherit"] },
  );
  writeFileSync(join(dir, "resolv.conf"), `nameserver ${RESOLVER_IP}\n`);
  makeCertificates(dir);

  gateway = startDeployedGateway(
    18095,
    readFileSync(join(CLUSTER_DIR, "gateway-token-key"), "utf8").trim(),
    {
      CUBEPOD_GATEWAY_HOST: GATEWAY_IP,
      CUBEPOD_GATEWAY_PORT: "80",
      CUBEPOD_GATEWAY_METRICS_PORT: "18096",
      CUBEPOD_GATEWAY_DOMAIN: DOMAIN,
      CUBEPOD_GATEWAY_TLS_PORT: "443",
      CUBEPOD_GATEWAY_TLS_CERT_FILE: join(dir, "gateway.crt"),
      CUBEPOD_GATEWAY_TLS_KEY_FILE: join(dir, "gateway.key"),
    },
  );
  await untilServing(80, GATEWAY_IP);
  await kube.waitFor(paths.podwarmpools(ns, "base"), o => o?.status?.readyReplicas === 2, 300_000);
}, 600_000);

afterAll(async () => {
  if (gateway?.pid) process.kill(-gateway.pid, "SIGTERM");
  resolver?.kill();
  await kube.delete(`/api/v1/namespaces/${ns}`);
  kube.close();
});

/** A CA of the test's, and the gateway's certificate from it for <domain> and *.<domain>. */
function makeCertificates(at: string): void {
  const openssl = (...args: string[]) =>
    execFileSync("openssl", args, { cwd: at, stdio: "ignore" });
  openssl(
    "req",
    "-x509",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-days",
    "2",
    "-subj",
    "/CN=e2b-standard-ca",
    "-keyout",
    "ca.key",
    "-out",
    "ca.crt",
  );
  openssl(
    "req",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-subj",
    "/CN=cubepod-gateway",
    "-keyout",
    "gateway.key",
    "-out",
    "gateway.csr",
  );
  writeFileSync(
    join(at, "gateway.ext"),
    `subjectAltName=DNS:${DOMAIN},DNS:*.${DOMAIN}\nextendedKeyUsage=serverAuth\n`,
  );
  openssl(
    "x509",
    "-req",
    "-in",
    "gateway.csr",
    "-CA",
    "ca.crt",
    "-CAkey",
    "ca.key",
    "-CAcreateserial",
    "-days",
    "2",
    "-extfile",
    "gateway.ext",
    "-out",
    "gateway.crt",
  );
}

/**
 * Runs an agent with the SDK's standard settings only, its names resolved by the test's resolver
 * (its own /etc/resolv.conf, in a private mount namespace); returns what it printed last.
 */
async function agent(command: string[], trust: Record<string, string>) {
  const script = [`mount --bind ${join(dir, "resolv.conf")} /etc/resolv.conf`, `exec "$@"`].join(
    " && ",
  );
  const { stdout } = await execFileAsync(
    "unshare",
    ["-m", "--propagation", "private", "sh", "-c", script, "sh", ...command],
    {
      encoding: "utf8",
      env: { PATH: process.env.PATH, HOME: dir, E2B_DOMAIN: DOMAIN, E2B_API_KEY: key, ...trust },
      timeout: 240_000,
    },
  );
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
