import { EGRESS_AGENT_NAME, EGRESS_AGENT_RULES } from "../../build/egress-agent";
import { DEFAULT_CLUSTER_NETWORKS } from "../../capabilities/config";
import { execFileSync } from "node:child_process";
import { X509Certificate } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseAllDocuments, stringify } from "yaml";
import {
  matchConditionsOf,
  shardLabelCondition,
} from "../../capabilities/admission/webhook-policy";
import { PID_FILE } from "../../capabilities/shard/pid-file";
import { BIN_DIR, KUBECONFIG, ROOT } from "../../testkit/kube";
import { GATEWAY_NAME, GATEWAY_RULES } from "../../build/gateway-deployment";

const manifest = join(ROOT, "dist", "pepr-module-cubepod.yaml");
const chart = join(ROOT, "dist", "cubepod-chart");
const kubectl = join(BIN_DIR, "kubectl");
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Doc = Record<string, any>;

/**
 * Creates the documents in a server-side dry run, under renamed copies so that the dry run
 * creates rather than merges into what pepr dev registered; returns kubectl's output.
 */
/** A Deployment's first container's environment, by name. */
const env = (d: Doc) =>
  Object.fromEntries(d.spec.template.spec.containers[0].env.map((e: Doc) => [e.name, e.value]));

function dryRun(docs: Doc[]): string {
  const renamed = docs
    .filter(d => d.kind !== "Namespace")
    .map(d => ({ ...d, metadata: { ...d.metadata, name: `${d.metadata.name}-dryrun` } }));
  const file = join(mkdtempSync(join(tmpdir(), "cubepod-")), "module.yaml");
  writeFileSync(file, renamed.map(d => stringify(d)).join("---\n"));
  return execFileSync(kubectl, ["create", "--dry-run=server", "-f", file], {
    encoding: "utf8",
    env: { ...process.env, KUBECONFIG },
  });
}

beforeAll(() => {
  if (!existsSync(manifest))
    execFileSync("bash", [join(ROOT, "build", "build-module.sh")], { stdio: "ignore" });
});

describe("the deployable module manifest (npm run build)", () => {
  it("is accepted by the API server, match conditions included (server-side dry run)", () => {
    const out = dryRun(parseAllDocuments(readFileSync(manifest, "utf8")).map(d => d.toJS()));
    expect(out).toContain(
      "mutatingwebhookconfiguration.admissionregistration.k8s.io/pepr-cubepod-dryrun created (server dry run)",
    );
    expect(out).toContain(
      "validatingwebhookconfiguration.admissionregistration.k8s.io/pepr-cubepod-dryrun created (server dry run)",
    );
    expect(out).toContain("deployment.apps/pepr-cubepod-dryrun created (server dry run)");
    expect(out).toContain(
      "validatingadmissionpolicy.admissionregistration.k8s.io/cubepod-provenance-dryrun created (server dry run)",
    );
    expect(out).toContain("deployment.apps/cubepod-gateway-dryrun created (server dry run)");
    expect(out).toContain("service/cubepod-gateway-dryrun created (server dry run)");
  });

  it("runs the gateway on the module's own image, two replicas, with its own account", () => {
    const docs = parseAllDocuments(readFileSync(manifest, "utf8")).map(d => d.toJS());
    const image = (name: string) =>
      docs.find(d => d.kind === "Deployment" && d.metadata.name === name).spec.template.spec
        .containers[0].image;
    const gateway = docs.find(d => d.kind === "Deployment" && d.metadata.name === GATEWAY_NAME);
    expect(gateway.spec.replicas).toBe(2);
    expect(image(GATEWAY_NAME)).toBe(image("pepr-cubepod-watcher"));
    expect(gateway.spec.template.spec.serviceAccountName).toBe(GATEWAY_NAME);
    expect(
      docs.find(d => d.kind === "ClusterRole" && d.metadata.name === GATEWAY_NAME).rules,
    ).toEqual(GATEWAY_RULES);
  });

  it("carries the provenance policy for the module's ServiceAccount, in the chart too", () => {
    const docs = parseAllDocuments(readFileSync(manifest, "utf8")).map(d => d.toJS());
    const inChart = parseAllDocuments(
      execFileSync(join(BIN_DIR, "helm"), ["template", "cubepod", chart], { encoding: "utf8" }),
    ).map(d => d.toJS());
    for (const all of [docs, inChart]) {
      const policy = all.find(d => d?.kind === "ValidatingAdmissionPolicy");
      expect(policy.spec.matchConditions).toEqual([
        {
          name: "not-the-operator",
          expression:
            'request.userInfo.username != "system:serviceaccount:pepr-system:pepr-cubepod"',
        },
      ]);
      expect(all.find(d => d?.kind === "ValidatingAdmissionPolicyBinding").spec).toEqual({
        policyName: "cubepod-provenance",
        validationActions: ["Deny"],
      });
    }
  });

  it("sends the module only sandbox Pods, and fails closed for them", () => {
    const docs = parseAllDocuments(readFileSync(manifest, "utf8")).map(d => d.toJS());
    const configs = docs.filter(
      d => d.kind === "MutatingWebhookConfiguration" || d.kind === "ValidatingWebhookConfiguration",
    );
    expect(configs.flatMap(d => d.webhooks)).toHaveLength(2);
    for (const d of configs) {
      for (const w of d.webhooks) {
        expect(w.failurePolicy).toBe("Fail");
        expect(w.matchConditions).toEqual(matchConditionsOf(d.kind, false));
      }
    }
  });
});

describe("no key in any artifact (npm run build)", () => {
  /** Every file the build writes for users: the module YAML and the chart's. */
  const artifacts = () => [
    manifest,
    ...execFileSync("find", [chart, "-type", "f"], { encoding: "utf8" }).trim().split("\n"),
  ];
  const PEM = /-----BEGIN|LS0tLS1CRUdJTi/;

  it("holds no PEM block, key Secret or key-derived setting, in the module YAML or the chart", () => {
    for (const file of artifacts()) {
      const text = readFileSync(file, "utf8");
      expect([file, PEM.test(text)]).toEqual([file, false]);
      expect([file, text.includes("CUBEPOD_CONTROL_PUBLIC_KEY")]).toEqual([file, false]);
      expect([file, text.includes("apiPath:")]).toEqual([file, false]);
    }
    const docs = parseAllDocuments(readFileSync(manifest, "utf8")).map(d => d.toJS() as Doc);
    const secrets = docs.filter(d => d?.kind === "Secret").map(d => d.metadata.name);
    // The module's code and the gateway's: no key.
    expect(secrets.sort()).toEqual([`${GATEWAY_NAME}-code`, "pepr-cubepod-module"]);
    for (const d of docs.filter(d => /WebhookConfiguration$/.test(d?.kind))) {
      for (const w of d.webhooks) {
        expect(w.clientConfig.caBundle).toBeUndefined();
        expect(w.clientConfig.service.path).toMatch(/^\/(mutate|validate)\/made-at-install$/);
      }
    }
  });

  it("makes the webhooks' keys at install: each render its own, the CA naming the server", () => {
    const render = () => {
      const docs = parseAllDocuments(
        execFileSync(join(BIN_DIR, "helm"), ["template", "cubepod", chart], { encoding: "utf8" }),
      ).map(d => d.toJS() as Doc);
      const secret = (n: string) => docs.find(d => d?.kind === "Secret" && d.metadata.name === n)!;
      const hooks = docs.filter(d => /WebhookConfiguration$/.test(d?.kind));
      return {
        cert: Buffer.from(secret("pepr-cubepod-tls").data["tls.crt"], "base64"),
        key: secret("pepr-cubepod-tls").data["tls.key"],
        path: Buffer.from(secret("pepr-cubepod-api-path").data.value, "base64").toString(),
        hooks: hooks.flatMap(d => d.webhooks.map((w: Doc) => w.clientConfig)),
      };
    };
    const [a, b] = [render(), render()];
    expect(a.key).not.toBe(b.key);
    expect(a.path).not.toBe(b.path);
    expect(a.path).toMatch(/^[a-z0-9]{64}$/);
    expect(a.hooks).toHaveLength(2);
    for (const hook of a.hooks) {
      expect(hook.service.path).toMatch(new RegExp(`^/(mutate|validate)/${a.path}$`));
      const ca = new X509Certificate(Buffer.from(hook.caBundle, "base64"));
      const server = new X509Certificate(a.cert);
      expect(server.verify(ca.publicKey)).toBe(true);
      expect(server.checkHost("pepr-cubepod.pepr-system.svc")).toBe("pepr-cubepod.pepr-system.svc");
      expect(
        server.verify(new X509Certificate(Buffer.from(b.hooks[0].caBundle, "base64")).publicKey),
      ).toBe(false);
    }
  });
});

describe("the Helm chart (npm run build), rendered by helm template", () => {
  const docs = (...set: string[]) =>
    parseAllDocuments(
      execFileSync(join(BIN_DIR, "helm"), ["template", "cubepod", chart, ...set], {
        encoding: "utf8",
        stdio: ["ignore", "pipe", "pipe"],
      }),
    )
      .map(d => d.toJS() as Doc | null)
      .filter((d): d is Doc => Boolean(d));

  it("exposes /metrics and /healthz on the watcher's :8081, with a Service to scrape", () => {
    const rendered = docs();
    const watcher = rendered.find(
      d => d.kind === "Deployment" && d.metadata.name === "pepr-cubepod-watcher",
    )!;
    const container = watcher.spec.template.spec.containers[0];
    expect(container.ports).toContainEqual({
      name: "cubepod-metrics",
      containerPort: 8081,
      protocol: "TCP",
    });
    expect(container.livenessProbe.httpGet).toEqual({
      path: "/healthz",
      port: 8081,
      scheme: "HTTP",
    });
    const service = rendered.find(
      d => d.kind === "Service" && d.metadata.name === "pepr-cubepod-watcher-metrics",
    )!;
    expect(service.spec.selector).toEqual(watcher.spec.selector.matchLabels);
    expect(service.spec.ports).toEqual([
      { name: "metrics", port: 8081, targetPort: "cubepod-metrics", protocol: "TCP" },
    ]);
  });

  it("shards the watcher by `watcher.replicas`: its count, the shard Leases' Role, stamping", () => {
    const deployment = (rendered: Doc[], name: string) =>
      rendered.find(d => d.kind === "Deployment" && d.metadata.name === name)!;
    const shards = (rendered: Doc[], name: string) =>
      env(deployment(rendered, name)).CUBEPOD_SHARDS;
    const stamping = (rendered: Doc[]) =>
      rendered
        .find(d => d.kind === "MutatingWebhookConfiguration")!
        .webhooks[0].matchConditions.find(
          (c: { name: string }) => c.name === "cubepod-shard-label",
        );
    const one = docs();
    expect(deployment(one, "pepr-cubepod-watcher").spec.replicas).toBe(1);
    expect(shards(one, "pepr-cubepod-watcher")).toBe("1");
    expect(shards(one, "pepr-cubepod")).toBe("1");
    expect(one.find(d => d.kind === "Role" && d.metadata.name === "pepr-cubepod-shards")).toBe(
      undefined,
    );
    expect(stamping(one)).toEqual(shardLabelCondition(false));

    const three = docs("--set", "watcher.replicas=3");
    expect(deployment(three, "pepr-cubepod-watcher").spec.replicas).toBe(3);
    expect(shards(three, "pepr-cubepod-watcher")).toBe("3");
    expect(shards(three, "pepr-cubepod")).toBe("3");
    const role = three.find(d => d.kind === "Role" && d.metadata.name === "pepr-cubepod-shards")!;
    expect(role.rules).toEqual([
      {
        apiGroups: ["coordination.k8s.io"],
        resources: ["leases"],
        verbs: ["list", "watch", "create", "patch", "delete"],
      },
    ]);
    expect(stamping(three)).toEqual(shardLabelCondition(true));
    // A stopping replica is told to give its shards up (Pepr's controller ignores SIGTERM).
    const preStop = (rendered: Doc[]) =>
      deployment(rendered, "pepr-cubepod-watcher").spec.template.spec.containers[0].lifecycle
        ?.preStop?.exec?.command;
    expect(preStop(three)).toEqual(["node", "-e", expect.stringContaining(PID_FILE)]);
    expect(preStop(one)).toBeUndefined();
    // The API server compiles the sharded condition.
    expect(dryRun(three)).toContain(
      "mutatingwebhookconfiguration.admissionregistration.k8s.io/pepr-cubepod-dryrun created (server dry run)",
    );
    expect(() => docs("--set", "watcher.replicas=0")).toThrow(/minimum/);
    expect(() => docs("--set", "watcher.replicas=65")).toThrow(/maximum/);
  });

  it("installs the node egress agent when asked, least privileged, and tells the module and gateway", () => {
    const agent = (rendered: Doc[]) =>
      rendered.filter(d => d.metadata?.name === EGRESS_AGENT_NAME).map(d => d.kind);
    const watcher = (rendered: Doc[]) =>
      rendered.find(d => d.kind === "Deployment" && d.metadata.name === "pepr-cubepod-watcher")!;
    const gateway = (rendered: Doc[]) =>
      rendered.find(d => d.kind === "Deployment" && d.metadata.name === GATEWAY_NAME)!;
    const off = docs();
    expect(agent(off)).toEqual([]);
    expect(env(watcher(off)).CUBEPOD_EGRESS_AGENT_ADDRESSES).toBeUndefined();
    expect(env(gateway(off)).CUBEPOD_GATEWAY_EGRESS_AGENT).toBe("disabled");
    expect(() => docs("--set", "egressAgent.enabled=true")).toThrow(/egressAgent.addresses/);

    const on = docs(
      "--set",
      "egressAgent.enabled=true",
      "--set",
      "egressAgent.addresses={198.18.0.1/32}",
      "--set",
      "images.registry=registry.example/cubepod",
    );
    expect(agent(on)).toEqual(["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "DaemonSet"]);
    expect(env(watcher(on)).CUBEPOD_EGRESS_AGENT_ADDRESSES).toBe("198.18.0.1/32");
    expect(env(gateway(on)).CUBEPOD_GATEWAY_EGRESS_AGENT).toBe("enabled");
    const role = on.find(d => d.kind === "ClusterRole" && d.metadata.name === EGRESS_AGENT_NAME)!;
    expect(role.rules).toEqual(EGRESS_AGENT_RULES);
    const pod = on.find(d => d.kind === "DaemonSet")!.spec.template.spec;
    expect(pod).toMatchObject({ hostNetwork: true, serviceAccountName: EGRESS_AGENT_NAME });
    const container = pod.containers[0];
    expect(container.image).toMatch(/^registry\.example\/cubepod\/egress-agent:/);
    expect(container.securityContext.capabilities).toEqual({ drop: ["ALL"], add: ["NET_ADMIN"] });
    expect(env({ spec: { template: { spec: pod } } })).toMatchObject({
      CUBEPOD_CLUSTER_NETWORKS: DEFAULT_CLUSTER_NETWORKS.join(","),
      CUBEPOD_EGRESS_AGENT_HEALTH: "$(HOST_IP):15021",
    });
    // The API server takes it.
    expect(dryRun(on.filter(d => d.metadata?.name === EGRESS_AGENT_NAME))).toContain(
      `daemonset.apps/${EGRESS_AGENT_NAME}-dryrun created (server dry run)`,
    );
  });

  it("has the gateway, its replicas and domain from values, the same code as the module YAML", () => {
    const gateway = (rendered: Doc[]) =>
      rendered.find(d => d.kind === "Deployment" && d.metadata.name === GATEWAY_NAME)!;
    expect(gateway(docs()).spec.replicas).toBe(2);
    const set = gateway(docs("--set", "gateway.replicas=3", "--set", "gateway.domain=sbx.example"));
    expect(set.spec.replicas).toBe(3);
    expect(env(set).CUBEPOD_GATEWAY_DOMAIN).toBe("sbx.example");
    expect(() => docs("--set", "gateway.replica=3")).toThrow(/additional properties|replica/);
    const code = (rendered: Doc[]) =>
      rendered.find(d => d.kind === "Secret" && d.metadata.name === `${GATEWAY_NAME}-code`)!.data;
    const moduleDocs = parseAllDocuments(readFileSync(manifest, "utf8")).map(d => d.toJS());
    expect(code(docs())).toEqual(code(moduleDocs));
  });

  it("names the podd injector of templates without one from `images.registry` and `images.tag`", () => {
    const injector = (rendered: Doc[]) =>
      ["pepr-cubepod", "pepr-cubepod-watcher"].map(
        name =>
          env(rendered.find(d => d.kind === "Deployment" && d.metadata.name === name)!)
            .CUBEPOD_PODD_INJECTOR_IMAGE,
      );
    const version = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).version;
    expect(injector(docs())).toEqual(Array(2).fill(`ghcr.io/cubeplex/podd-injector:${version}`));
    expect(
      injector(
        docs("--set", "images.registry=registry.example.com/cp", "--set-string", "images.tag=7"),
      ),
    ).toEqual(Array(2).fill("registry.example.com/cp/podd-injector:7"));
    expect(() => docs("--set", "images.registry=")).toThrow(/minLength|registry/);
  });

  it("serves HTTPS on the Service's 443 from the certificate Secret `gateway.tls.secretName` names", () => {
    const served = (rendered: Doc[]) => ({
      deployment: rendered.find(d => d.kind === "Deployment" && d.metadata.name === GATEWAY_NAME)!,
      service: rendered.find(d => d.kind === "Service" && d.metadata.name === GATEWAY_NAME)!,
    });
    const plain = served(docs());
    expect(plain.service.spec.ports.map((p: Doc) => p.port)).toEqual([80, 8082]);
    expect(env(plain.deployment).CUBEPOD_GATEWAY_TLS_CERT_FILE).toBeUndefined();
    const https = served(docs("--set", "gateway.tls.secretName=gateway-tls"));
    expect(https.service.spec.ports).toContainEqual(
      expect.objectContaining({ name: "https", port: 443, targetPort: "https" }),
    );
    const pod = https.deployment.spec.template.spec;
    expect(pod.volumes).toContainEqual({ name: "tls", secret: { secretName: "gateway-tls" } });
    const mount = pod.containers[0].volumeMounts.find((m: Doc) => m.name === "tls").mountPath;
    expect(env(https.deployment)).toMatchObject({
      CUBEPOD_GATEWAY_TLS_PORT: "8443",
      CUBEPOD_GATEWAY_TLS_CERT_FILE: `${mount}/tls.crt`,
      CUBEPOD_GATEWAY_TLS_KEY_FILE: `${mount}/tls.key`,
    });
    expect(pod.containers[0].ports).toContainEqual(
      expect.objectContaining({ name: "https", containerPort: 8443 }),
    );
    expect(dryRun(docs("--set", "gateway.tls.secretName=gateway-tls"))).toContain(
      "deployment.apps/cubepod-gateway-dryrun created (server dry run)",
    );
  });

  it("is accepted by the API server, webhooks with their match conditions included", () => {
    const rendered = docs();
    const configs = rendered.filter(
      d => d.kind === "MutatingWebhookConfiguration" || d.kind === "ValidatingWebhookConfiguration",
    );
    expect(configs).toHaveLength(2);
    for (const d of configs) {
      for (const w of d.webhooks)
        expect(w.matchConditions).toEqual(matchConditionsOf(d.kind, false));
    }
    const out = dryRun(rendered);
    expect(out).toContain("deployment.apps/pepr-cubepod-watcher-dryrun created (server dry run)");
    expect(out).toContain("deployment.apps/cubepod-gateway-dryrun created (server dry run)");
    expect(out).toContain("service/pepr-cubepod-watcher-metrics-dryrun created (server dry run)");
  });
});
