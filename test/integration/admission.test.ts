import https from "node:https";
import { localModuleEnv } from "../../local-cluster/local-module-env";
import { denied, Kube, Obj, paths } from "../../testkit/kube";

const kube = new Kube();
let ns: string;

const obj = (kind: string, name: string, spec: object) => ({
  apiVersion: "pod.cubeplex.ai/v1alpha1",
  kind,
  metadata: { name },
  spec,
});
const path = (kind: string, name = "") =>
  kind === "PodBox"
    ? paths.podboxes(ns, name)
    : kind === "PodTemplate"
      ? paths.podtemplates(ns, name)
      : paths.podwarmpools(ns, name);

beforeAll(async () => {
  ns = await kube.namespace("it-admission");
  await kube.mustCreate(path("PodTemplate"), obj("PodTemplate", "python", { image: "py:3" }));
  await kube.mustCreate(
    path("PodWarmPool"),
    obj("PodWarmPool", "node-pool", { templateRef: "node" }),
  );
  await kube.mustCreate(
    path("PodBox"),
    obj("PodBox", "existing", { templateRef: "python", rootfsGeneration: 3 }),
  );
  await kube.mustCreate(
    path("PodBox"),
    obj("PodBox", "forked", { templateRef: "python", forkFrom: "existing" }),
  );
});
afterAll(async () => {
  await kube.delete(`/api/v1/namespaces/${ns}`);
  kube.close();
});

/** Creates that only the validating webhook can refuse (the schema allows them). */
const CREATE_DENIALS: [string, string, object, string][] = [
  ["PodBox", "no-template", {}, "spec.templateRef: is required unless spec.warmPoolRef is set"],
  [
    "PodBox",
    "fork-and-pool",
    { templateRef: "python", warmPoolRef: "p", forkFrom: "existing" },
    "spec.forkFrom: cannot be combined with spec.warmPoolRef (a fork clones its parent and never claims a warm standby)",
  ],
  [
    "PodBox",
    "key-and-pool",
    { warmPoolRef: "p", volumeKey: "kept" },
    "spec.volumeKey: cannot be combined with spec.warmPoolRef (re-attached volumes never come from a warm standby)",
  ],
  [
    "PodBox",
    "fork-and-key",
    { templateRef: "python", forkFrom: "existing", volumeKey: "kept" },
    "spec.forkFrom: cannot be combined with spec.volumeKey (a box either clones a parent or re-attaches kept volumes)",
  ],
  [
    "PodBox",
    "selfish",
    { templateRef: "python", forkFrom: "selfish" },
    "spec.forkFrom: may not name the box itself",
  ],
  [
    "PodBox",
    "wrong-pool",
    { templateRef: "python", warmPoolRef: "node-pool" },
    'spec.warmPoolRef: PodWarmPool "node-pool" uses PodTemplate "node", not spec.templateRef "python"',
  ],
  [
    "PodBox",
    `a${"b".repeat(63)}`,
    { templateRef: "python" },
    "metadata.name: must be a lowercase RFC 1123 label of at most 63 characters (it becomes a label value)",
  ],
  [
    "PodBox",
    "dotted.name",
    { warmPoolRef: "p" },
    "metadata.name: must be a lowercase RFC 1123 label of at most 63 characters (it becomes a label value)",
  ],
  [
    "PodTemplate",
    "negative-disk",
    { image: "py:3", rootfs: { size: "-10Gi" } },
    "spec.rootfs.size: must be above 0",
  ],
  [
    "PodTemplate",
    "greedy-requests",
    { image: "py:3", resources: { requests: { cpu: "2" }, limits: { cpu: "1" } } },
    "spec.resources.requests.cpu: must not exceed spec.resources.limits.cpu (2 > 1)",
  ],
  [
    "PodTemplate",
    "no-memory",
    { image: "py:3", resources: { limits: { memory: "0" } } },
    "spec.resources.limits.memory: must be at least 6Mi: no container starts with less (got 0)",
  ],
  [
    "PodTemplate",
    "boundless",
    { image: "py:3", resources: { limits: { memory: "1e1000" } } },
    "spec.resources.limits.memory: must be at most 8Pi",
  ],
  [
    "PodTemplate",
    "block-on-gvisor",
    { image: "py:3", runtimeClassName: "gvisor" },
    `spec.volumeMode: Block needs a VM runtime, one of the RuntimeClasses ${localModuleEnv().CUBEPOD_VM_RUNTIME_CLASSES.split(",").join(", ")} (the module's CUBEPOD_VM_RUNTIME_CLASSES), as the sandbox formats and mounts its devices in its own kernel; runtimeClassName "gvisor" is not one: use Filesystem, or one of those`,
  ],
  // Rules of the Pod API itself, found by a dry run of the Pod the template makes.
  [
    "PodTemplate",
    "gpu",
    { image: "py:3", resources: { requests: { "example.com/gpu": "1" } } },
    "the sandbox Pod this template makes would be refused: spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources",
  ],
  [
    "PodTemplate",
    "hugepages",
    { image: "py:3", resources: { limits: { "hugepages-2Mi": "2Mi" } } },
    "the sandbox Pod this template makes would be refused: spec.containers[0].resources: Forbidden: HugePages require cpu or memory",
  ],
  [
    "PodTemplate",
    "placement",
    {
      image: "py:3",
      affinity: {
        nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [] } },
      },
    },
    "the sandbox Pod this template makes would be refused: spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms: Required value: must have at least one node selector term",
  ],
  [
    "PodTemplate",
    "t".repeat(64),
    { image: "py:3" },
    "metadata.name: must be at most 63 characters (it becomes the label value pod.cubeplex.ai/template on its Pods); got 64",
  ],
  [
    "PodWarmPool",
    "p".repeat(57),
    { templateRef: "python" },
    "metadata.name: must be at most 56 characters (its standbys are named <pool>-<6 characters>, used as label values); got 57",
  ],
];

/** Updates of stored boxes that are refused. */
const UPDATE_DENIALS: [string, object, string][] = [
  [
    "existing",
    { spec: { templateRef: "node" } },
    'spec.templateRef: is immutable (was "python", got "node")',
  ],
  [
    "existing",
    { spec: { warmPoolRef: "p" } },
    'spec.warmPoolRef: is immutable (was unset, got "p")',
  ],
  ["existing", { spec: { volumeKey: "k" } }, 'spec.volumeKey: is immutable (was unset, got "k")'],
  [
    "forked",
    { spec: { forkFrom: null } },
    'spec.forkFrom: is immutable (was "existing", got unset)',
  ],
  ["existing", { spec: { rootfsGeneration: 2 } }, "spec.rootfsGeneration: may not decrease"],
];

describe("the validating webhook, called by the API server", () => {
  it.each(CREATE_DENIALS)("denies %s %s", async (kind, name, spec, message) => {
    const r = await kube.create(path(kind), obj(kind, name, spec));
    expect([r.status, r.body.message]).toEqual([422, denied(message)]);
    expect((await kube.get(path(kind, name))).status).toBe(404);
  });

  it.each(UPDATE_DENIALS)(
    "the API server itself denies an update of %s: %s",
    async (name, patch, message) => {
      const before = await kube.get(path("PodBox", name));
      const r = await kube.mergePatch(path("PodBox", name), patch);
      // The CRD's transition rules, in the same words, with no webhook call.
      const [field, ...rule] = message.split(": ");
      expect(r.status).toBe(422);
      expect(r.body.message).toContain(`${field}: Invalid value`);
      expect(r.body.message).toContain(rule.join(": "));
      expect(r.body.message).not.toContain("admission webhook");
      // The operator may write the box's status and finalizer meanwhile; its spec stays.
      const after = await kube.get(path("PodBox", name));
      expect(after.body.metadata.generation).toBe(before.body.metadata.generation);
      expect(after.body.spec).toEqual(before.body.spec);
    },
  );

  it("the API server's schema refuses what no Pod could run from, naming each field", async () => {
    const r = await kube.create(
      path("PodTemplate"),
      obj("PodTemplate", "never", {
        image: `py:${"3".repeat(300 * 1024)}`,
        runtimeClassName: "a..b",
        env: [{ name: "A".repeat(10 * 1024) }],
      }),
    );
    expect(r.status).toBe(422);
    for (const field of ["spec.image", "spec.runtimeClassName", "spec.env[0].name"]) {
      expect(r.body.message).toContain(field);
    }
    expect((await kube.get(path("PodTemplate", "never"))).status).toBe(404);
  });

  it("the API server refuses spec.mtls, a removed field, under strict field validation", async () => {
    const spec = { image: "py:3", mtls: { enabled: true } };
    // kubectl's default: refused, naming the field.
    const strict = await kube.create(
      `${path("PodTemplate")}?fieldValidation=Strict`,
      obj("PodTemplate", "strict", spec),
    );
    expect(strict.status).toBe(400);
    expect(strict.body.message).toContain('unknown field "spec.mtls"');
    expect((await kube.get(path("PodTemplate", "strict"))).status).toBe(404);
    // A client that asks for less gets a warning, and the field is dropped before admission.
    const created = await kube.mustCreate(path("PodTemplate"), obj("PodTemplate", "lax", spec));
    expect(created.spec).not.toHaveProperty("mtls");
  });

  it("reports every broken rule of one request", async () => {
    const r = await kube.create(
      path("PodBox"),
      obj("PodBox", "many", {
        templateRef: "python",
        warmPoolRef: "p",
        forkFrom: "many",
        volumeKey: "k",
      }),
    );
    expect(r.status).toBe(422);
    expect(r.body.message.split("; ")).toHaveLength(4);
  });

  it("admits valid changes: desired state, a higher rootfs generation, a lease", async () => {
    const r = await kube.mergePatch(path("PodBox", "existing"), {
      spec: { desiredState: "Paused", rootfsGeneration: 4, leaseExpiresAt: "2030-01-01T00:00:00Z" },
    });
    expect(r.status).toBe(200);
    expect((r.body as Obj).spec).toMatchObject({ desiredState: "Paused", rootfsGeneration: 4 });
  });

  it("admits a box for a pool that does not exist yet (GitOps applies in any order)", async () => {
    const r = await kube.create(path("PodBox"), obj("PodBox", "early", { warmPoolRef: "later" }));
    expect(r.status).toBe(201);
  });
});

describe("the webhook server", () => {
  /** A GET of `/healthz` on the webhook's own address; whether its connection was reused. */
  const healthz = (url: URL, agent: https.Agent) =>
    new Promise<{ status?: number; reused: boolean }>((resolve, reject) => {
      const req = https.get(
        { host: url.hostname, port: url.port, path: "/healthz", agent },
        res => {
          res.resume();
          res.on("end", () => resolve({ status: res.statusCode, reused: req.reusedSocket }));
        },
      );
      req.on("error", reject);
    });

  // The API server keeps an idle connection to a webhook for 90 s and sends its next call on it;
  // a server that closes it sooner races that call, and the user's write fails.
  it("keeps an idle connection open past Node's default of 5 s", async () => {
    const hooks = await kube.get(
      "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/pepr-cubepod",
    );
    const url = hooks.body.webhooks[0].clientConfig.url;
    // Pepr's ephemeral certificate has an empty issuer name, which Go accepts and OpenSSL takes
    // for self-signed; what is checked here is the connection, and the API server checks the rest.
    const agent = new https.Agent({ keepAlive: true, maxSockets: 1, rejectUnauthorized: false });
    try {
      expect(await healthz(new URL(url), agent)).toEqual({ status: 200, reused: false });
      await new Promise(r => setTimeout(r, 7000));
      expect(await healthz(new URL(url), agent)).toEqual({ status: 200, reused: true });
    } finally {
      agent.destroy();
    }
  });
});
