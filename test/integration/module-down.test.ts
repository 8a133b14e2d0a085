import { cluster, Kube, paths } from "./kube";

const kube = new Kube();
let ns: string;

beforeAll(async () => {
  ns = await kube.namespace("it-down");
  await kube.mustCreate(paths.podtemplates(ns), {
    apiVersion: "pod.cubeplex.ai/v1alpha1",
    kind: "PodTemplate",
    metadata: { name: "python" },
    spec: { image: "py:3" },
  });
  await kube.mustCreate(paths.podboxes(ns), {
    apiVersion: "pod.cubeplex.ai/v1alpha1",
    kind: "PodBox",
    metadata: { name: "box" },
    spec: { templateRef: "python" },
  });
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

  it("fails closed for a change of a PodBox spec: it must be validated", async () => {
    const r = await kube.mergePatch(paths.podboxes(ns, "box"), {
      spec: { desiredState: "Paused" },
    });
    expect(r.status).toBe(500);
    expect(r.body.message).toContain('failed calling webhook "pepr-cubepod.pepr.dev"');
    expect((await kube.get(paths.podboxes(ns, "box"))).body.spec.desiredState).not.toBe("Paused");
  });
});
