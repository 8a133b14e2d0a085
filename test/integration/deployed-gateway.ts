import { ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseAllDocuments, stringify } from "yaml";
import { GATEWAY_NAME, LOADER } from "../../build/gateway-deployment";
import { BIN_DIR, CLUSTER_DIR, credentialsOf, KUBECONFIG, Obj, ROOT } from "../../testkit/kube";

const SA_DIR = "/run/secrets/kubernetes.io/serviceaccount";

/** The gateway's objects from the built module manifest (built when missing). */
export function gatewayDocs(): Obj[] {
  const manifest = join(ROOT, "dist", "pepr-module-cubepod.yaml");
  if (!existsSync(manifest))
    execFileSync("bash", [join(ROOT, "build", "build-module.sh")], { stdio: "ignore" });
  return parseAllDocuments(readFileSync(manifest, "utf8"))
    .map(d => d.toJS() as Obj)
    .filter(d => d?.metadata?.labels?.["app.kubernetes.io/component"] === "gateway");
}

/**
 * Runs the gateway as the module manifest ships it: its ServiceAccount, ClusterRole and binding
 * applied for real; the container's loader run on the code Secret's content; the in-cluster
 * credentials of a token for that ServiceAccount, mounted where the kubelet mounts them (in a
 * private mount namespace, so the machine's /run is untouched); `settings` add to or replace its
 * environment. Returns the process (kill its group to stop it).
 */
export function startDeployedGateway(
  port: number,
  tokenKey: string,
  settings: Record<string, string> = {},
): ChildProcess {
  const docs = gatewayDocs();
  const dir = applyGatewayAccess(docs);
  writeFileSync(join(dir, "token"), kubectl("create", "token", GATEWAY_NAME, "-n", "pepr-system"));
  writeFileSync(join(dir, "ca.crt"), readFileSync(join(CLUSTER_DIR, "pki", "ca.crt")));
  const code = docs.find(d => d.kind === "Secret" && d.metadata.name === `${GATEWAY_NAME}-code`)!;
  writeFileSync(join(dir, "gateway.js.gz"), Buffer.from(code.data["gateway.js.gz"], "base64"));
  const server = new URL(credentialsOf().server);
  const mountAndRun = [
    `mount -t tmpfs tmpfs /run`,
    `mkdir -p ${SA_DIR}`,
    `cp "$DIR/token" "$DIR/ca.crt" ${SA_DIR}/`,
    `exec node -e "$LOADER"`,
  ].join(" && ");
  return spawn("unshare", ["-m", "--propagation", "private", "sh", "-c", mountAndRun], {
    env: {
      PATH: process.env.PATH,
      DIR: dir,
      LOADER: LOADER.replaceAll("/app/gateway", dir),
      KUBERNETES_SERVICE_HOST: server.hostname,
      KUBERNETES_SERVICE_PORT: server.port,
      CUBEPOD_GATEWAY_PORT: String(port),
      CUBEPOD_GATEWAY_METRICS_PORT: String(port + 1),
      CUBEPOD_GATEWAY_TOKEN_KEY: tokenKey,
      ...settings,
    },
    stdio: ["ignore", "ignore", "inherit"],
    detached: true,
  });
}

const kubectl = (...args: string[]) =>
  execFileSync(join(BIN_DIR, "kubectl"), args, {
    encoding: "utf8",
    env: { ...process.env, KUBECONFIG },
  });

/**
 * The gateway's ServiceAccount, ClusterRole and binding from the manifest, applied for real;
 * returns the scratch directory it wrote them in.
 */
export function applyGatewayAccess(docs = gatewayDocs()): string {
  const dir = mkdtempSync(join(tmpdir(), "cubepod-gw-"));
  const access = docs.filter(d =>
    ["ServiceAccount", "ClusterRole", "ClusterRoleBinding"].includes(d.kind),
  );
  writeFileSync(join(dir, "access.yaml"), access.map(d => stringify(d)).join("---\n"));
  try {
    kubectl("get", "namespace", "pepr-system");
  } catch {
    kubectl("create", "namespace", "pepr-system");
  }
  kubectl("apply", "-f", join(dir, "access.yaml"));
  return dir;
}

/** Resolves once a gateway answers on the port. */
export async function untilServing(port: number, host = "127.0.0.1"): Promise<void> {
  for (let i = 0; i < 300; i++) {
    const up = await fetch(`http://${host}:${port}/sandboxes`).then(
      () => true,
      () => false,
    );
    if (up) return;
    await new Promise(r => setTimeout(r, 100));
  }
  throw new Error(`no gateway answered on ${host}:${port}`);
}
