import { cluster, Kube, paths } from "../../testkit/kube";

const kube = new Kube();
let ns: string;

const box = (name: string, spec: object) => ({
  apiVersion: "pod.cubeplex.ai/v1alpha1",
  kind: "PodBox",
  metadata: { name },
  spec,
});

beforeAll(async () => {
  ns = await kube.namespace("it-down");
  await kube.mustCreate(paths.podtemplates(ns), {
    apiVersion: "pod.cubeplex.ai/v1alpha1",
    kind: "PodTemplate",
    metadata: { name: "python" },
    spec: { image: "py:3" },
  });
  await kube.mustCreate(paths.podboxes(ns), box("box", { templateRef: "python" }));
  // As a crash would: the process is gone, its webhook configurations stay registered.
  cluster("module", "kill");
});
afterAll(async () => {
  cluster("module", "start");
  await kube.delete(`/api/v1/namespaces/${ns}`);
  kube.close();
});

const pod = (name: string, labels: Record<string, string>) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, labels },
  spec: { containers: [{ name: "c", image: "nginx" }] },
});

describe("while the module is down", () => {
  it("still has its webhook configurations registered", async () => {
    const r = await kube.get(
      "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/pepr-cubepod",
    );
    expect(r.status).toBe(200);
    expect(r.body.webhooks[0].failurePolicy).toBe("Fail");
  });

  it("admits a Pod without the CubePod label", async () => {
    const r = await kube.create(paths.pods(ns), pod("bystander", { app: "web" }));
    expect(r.status).toBe(201);
  });

  it("fails closed for a sandbox Pod: it would start without podd", async () => {
    const r = await kube.create(
      paths.pods(ns),
      pod("sandbox", { "pod.cubeplex.ai/template": "python" }),
    );
    expect(r.status).toBe(500);
    expect(r.body.message).toContain('failed calling webhook "pepr-cubepod.pepr.dev"');
    expect((await kube.get(paths.pods(ns, "sandbox"))).status).toBe(404);
  });

  it("lets a gateway record activity on a PodBox: a metadata-only update is never sent", async () => {
    const r = await kube.mergePatch(paths.podboxes(ns, "box"), {
      metadata: { annotations: { "pod.cubeplex.ai/last-activity": new Date().toISOString() } },
    });
    expect(r.status).toBe(200);
  });

  it("creates the common PodBoxes, whose every rule the API server checks itself", async () => {
    // A warm claim and a cold start: one reference, no field a rule across fields concerns; with
    // a lease and an expiry too, as the gateway creates them.
    for (const [name, spec] of [
      ["claimer", { warmPoolRef: "pool" }],
      ["cold", { templateRef: "python", idleTimeoutSeconds: 600, desiredState: "Paused" }],
      [
        "expiring",
        {
          warmPoolRef: "pool",
          leaseExpiresAt: "2030-01-01T00:00:00.123Z",
          expiresAt: "2030-01-01T01:00:00+02:00",
          onExpiry: "Pause",
        },
      ],
    ] as const) {
      const r = await kube.create(paths.podboxes(ns), box(name, spec));
      expect([name, r.status]).toEqual([name, 201]);
    }
  });

  it.each([
    // Refused by the CRD schema, as with the module up (the schema is checked first).
    ["bad-state", { warmPoolRef: "pool", desiredState: "Stopped" }, 422],
    ["bad-generation", { templateRef: "python", rootfsGeneration: 0 }, 422],
    ["bad-timeout", { warmPoolRef: "pool", idleTimeoutSeconds: -1 }, 422],
    ["bad-ref", { warmPoolRef: "ns/pool" }, 422],
    // Sent to the module, which is down: the API server fails closed.
    ["dotted.name", { warmPoolRef: "pool" }, 500],
    [`n${"x".repeat(63)}`, { templateRef: "python" }, 500],
    ["no-ref", {}, 500],
    ["both-refs", { templateRef: "python", warmPoolRef: "pool" }, 500],
    ["fork", { templateRef: "python", forkFrom: "box" }, 500],
    ["kept", { templateRef: "python", volumeKey: "box" }, 500],
    ["bad-date", { warmPoolRef: "pool", expiresAt: "2030-02-30T00:00:00Z" }, 422],
    // A shape the format allows and zod's reading is not checked here: the module decides.
    ["ten-digits", { warmPoolRef: "pool", expiresAt: "2030-01-01T00:00:00.1234567890Z" }, 500],
    ["huge-timeout", { warmPoolRef: "pool", idleTimeoutSeconds: 2 ** 62 }, 500],
  ])("never creates %s unchecked (%j)", async (name, spec, status) => {
    const r = await kube.create(paths.podboxes(ns), box(name, spec));
    expect(r.status).toBe(status);
    expect((await kube.get(paths.podboxes(ns, name))).status).toBe(404);
  });

  it("takes a pause and a rootfs reset: the API server checks a spec change itself", async () => {
    const r = await kube.mergePatch(paths.podboxes(ns, "box"), {
      spec: { desiredState: "Paused", rootfsGeneration: 2 },
    });
    expect(r.status).toBe(200);
    expect(r.body.spec).toMatchObject({ desiredState: "Paused", rootfsGeneration: 2 });
  });

  it.each([
    [
      { templateRef: "other" },
      'spec.templateRef: Invalid value: is immutable (was "python", got "other")',
    ],
    [{ rootfsGeneration: 1 }, "spec.rootfsGeneration: Invalid value: may not decrease"],
  ])("still refuses a change its rules forbid (%j), by the CRD", async (spec, message) => {
    const r = await kube.mergePatch(paths.podboxes(ns, "box"), { spec });
    expect(r.status).toBe(422);
    expect(r.body.message).toContain(message);
    expect((await kube.get(paths.podboxes(ns, "box"))).body.spec.rootfsGeneration).toBe(2);
  });

  it("takes a new lease and expiry: the API server checks their shape itself", async () => {
    const spec = { leaseExpiresAt: "2030-01-01T00:00:00Z", expiresAt: "2030-01-02T00:00:00Z" };
    const r = await kube.mergePatch(paths.podboxes(ns, "box"), { spec });
    expect(r.status).toBe(200);
    expect(r.body.spec).toMatchObject(spec);
  });

  it("fails closed for a timestamp of another shape than zod's: the module decides", async () => {
    const r = await kube.mergePatch(paths.podboxes(ns, "box"), {
      spec: { leaseExpiresAt: "2030-01-01T00:00:00.1234567890Z" },
    });
    expect(r.status).toBe(500);
    expect(r.body.message).toContain('failed calling webhook "pepr-cubepod.pepr.dev"');
    expect((await kube.get(paths.podboxes(ns, "box"))).body.spec.leaseExpiresAt).toBe(
      "2030-01-01T00:00:00Z",
    );
  });
});
