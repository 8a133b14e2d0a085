import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse, stringify } from "yaml";
import { localModuleEnv } from "../local-cluster/local-module-env";
import { BIN_DIR, cluster, Kube, KUBECONFIG, Obj, paths, ROOT } from "./kube";
import { REAL_NODE_PLACEMENT } from "./objects";

export const MODULE_NAMESPACE = "pepr-system";
/** The Deployments the chart installs: the module's two, and the gateway. */
export const DEPLOYMENTS = ["pepr-cubepod", "pepr-cubepod-watcher", "cubepod-gateway"];

const run = (cmd: string, args: string[], input?: string) =>
  execFileSync(join(BIN_DIR, cmd), args, {
    encoding: "utf8",
    input,
    env: { ...process.env, KUBECONFIG },
    stdio: ["pipe", "pipe", "pipe"],
  });

/**
 * Installs the module as a cluster would: `pepr dev` stopped (its webhooks go with it), the
 * generated Helm chart rendered with values that place its Pods on the real node, applied as a
 * GitOps tool applies a chart (server-side), and waited for: every Deployment available, the
 * webhooks answering through their Service. The module then runs on the controller image built
 * for the node, as its own ServiceAccount with the chart's RBAC, told of the local networks and
 * of the cluster's NetworkPolicy enforcement and of its VM runtime (the stand-in) as an installer
 * tells it, by the chart's values; `watcher` sets its replicas (and so its shards), adds to its
 * environment, and may set its resources.
 */
export async function deployModule(
  kube: Kube,
  watcher: { replicas?: number; env?: Record<string, string>; resources?: object } = {},
): Promise<void> {
  const chart = join(ROOT, "dist", "cubepod-chart");
  if (!existsSync(chart)) execFileSync("bash", [join(ROOT, "build", "build-module.sh")]);
  cluster("module", "stop");
  const dir = mkdtempSync(join(tmpdir(), "cubepod-chart-"));
  const values = join(dir, "values.yaml");
  const defaults = parse(readFileSync(join(chart, "values.yaml"), "utf8"));
  const { CUBEPOD_CLUSTER_NETWORKS, CUBEPOD_NETWORK_POLICY, CUBEPOD_VM_RUNTIME_CLASSES } =
    localModuleEnv();
  // The injector image comes from the chart's `images` values, not from the environment.
  const local = { CUBEPOD_CLUSTER_NETWORKS, CUBEPOD_NETWORK_POLICY, CUBEPOD_VM_RUNTIME_CLASSES };
  const env = (part: "admission" | "watcher") => [
    ...defaults[part].env,
    ...Object.entries({ ...local, ...(part === "watcher" ? watcher.env : {}) }).map(
      ([name, value]) => ({ name, value }),
    ),
  ];
  writeFileSync(
    values,
    stringify({
      admission: { ...REAL_NODE_PLACEMENT, env: env("admission") },
      watcher: {
        ...REAL_NODE_PLACEMENT,
        env: env("watcher"),
        replicas: watcher.replicas ?? 1,
        ...(watcher.resources ? { resources: watcher.resources } : {}),
      },
      gateway: { ...REAL_NODE_PLACEMENT, replicas: 1 },
      // The release's images, pushed to the local registry (local-cluster/images.sh).
      images: { registry: "cubepod.local", tag: "dev" },
    }),
  );
  const rendered = run("helm", [
    "template",
    "cubepod",
    chart,
    "-n",
    MODULE_NAMESPACE,
    "-f",
    values,
  ]);
  run("kubectl", ["apply", "--server-side", "--force-conflicts", "-f", "-"], rendered);
  for (const name of DEPLOYMENTS) await rolledOut(kube, name);
  // Admission through the Service: a dry-run create of a valid template is admitted.
  for (let i = 0; i < 60; i++) {
    const r = await kube.request("POST", `${paths.podtemplates("default")}?dryRun=All`, {
      apiVersion: "pod.cubeplex.ai/v1alpha1",
      kind: "PodTemplate",
      metadata: { name: "probe" },
      spec: { image: "cubepod.local/base:dev" },
    });
    if (r.status === 201) return;
    await new Promise(r => setTimeout(r, 1000));
  }
  throw new Error("the deployed module's webhooks never answered through their Service");
}

/**
 * Resolves once the Deployment's Pods are all of its current template, and available, and the
 * old ones are gone: a terminating Pod may still answer what its Service sends it.
 */
async function rolledOut(kube: Kube, name: string): Promise<void> {
  const deployment = await kube.waitFor(
    `/apis/apps/v1/namespaces/${MODULE_NAMESPACE}/deployments/${name}`,
    o =>
      o?.status?.observedGeneration === o?.metadata?.generation &&
      (o?.status?.updatedReplicas ?? 0) >= (o?.spec?.replicas ?? 1) &&
      (o?.status?.availableReplicas ?? 0) >= (o?.spec?.replicas ?? 1) &&
      (o?.status?.replicas ?? 0) === (o?.spec?.replicas ?? 1) &&
      (o?.status?.unavailableReplicas ?? 0) === 0,
    300_000,
  );
  const selector = Object.entries(deployment!.spec.selector.matchLabels as Record<string, string>)
    .map(([k, v]) => `${k}=${v}`)
    .join(",");
  const pods = `/api/v1/namespaces/${MODULE_NAMESPACE}/pods?labelSelector=${encodeURIComponent(selector)}`;
  for (let i = 0; i < 600; i++) {
    if ((await kube.get(pods)).body.items.length === deployment!.spec.replicas) return;
    await new Promise(r => setTimeout(r, 500));
  }
  throw new Error(`Deployment ${name}: its old Pods did not go`);
}

/** `kubectl rollout restart` of the deployed Deployments, waited for. */
export async function restartDeployments(kube: Kube, names: string[]): Promise<void> {
  const at = new Date().toISOString();
  for (const name of names) {
    await kube.request(
      "PATCH",
      `/apis/apps/v1/namespaces/${MODULE_NAMESPACE}/deployments/${name}`,
      {
        spec: {
          template: { metadata: { annotations: { "kubectl.kubernetes.io/restartedAt": at } } },
        },
      },
      "application/merge-patch+json",
    );
  }
  for (const name of names) await rolledOut(kube, name);
}

/** The address of a deployed gateway Pod that is ready (and not going). */
export async function deployedGatewayUrl(kube: Kube): Promise<string> {
  const pods = await kube.get(
    `/api/v1/namespaces/${MODULE_NAMESPACE}/pods?labelSelector=app.kubernetes.io/component%3Dgateway`,
  );
  const ready = (pods.body.items as Obj[]).find(
    p =>
      !p.metadata.deletionTimestamp &&
      p.status.conditions?.some((c: Obj) => c.type === "Ready" && c.status === "True"),
  );
  if (!ready) throw new Error("no deployed gateway Pod is ready");
  return `http://${ready.status.podIP}:8080`;
}

/** The deployed gateway's token key, from its Secret. */
export async function deployedTokenKey(kube: Kube): Promise<string> {
  const secret = await kube.get(
    `/api/v1/namespaces/${MODULE_NAMESPACE}/secrets/cubepod-gateway-token-key`,
  );
  return Buffer.from(secret.body.data.key, "base64").toString();
}

/** Removes what the chart runs, and brings `pepr dev` (and the local policies) back. */
export async function undeployModule(kube: Kube): Promise<void> {
  for (const name of DEPLOYMENTS) {
    await kube.delete(`/apis/apps/v1/namespaces/${MODULE_NAMESPACE}/deployments/${name}`);
  }
  for (const kind of ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"]) {
    await kube.delete(`/apis/admissionregistration.k8s.io/v1/${kind}/pepr-cubepod`);
  }
  cluster("up");
}
