import { Kube, paths } from "../../testkit/kube";

const kube = new Kube();
let ns: string;

beforeAll(async () => {
  ns = await kube.namespace("it-crds");
});
afterAll(async () => {
  await kube.delete(`/api/v1/namespaces/${ns}`);
  kube.close();
});

const box = (name: string, spec: object) => ({
  apiVersion: "pod.cubeplex.ai/v1alpha1",
  kind: "PodBox",
  metadata: { name },
  spec,
});

describe("CRDs on the real API server", () => {
  it.each(["podtemplates", "podwarmpools", "podboxes", "podapikeys"])(
    "%s is established",
    async plural => {
      const r = await kube.get(
        `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${plural}.pod.cubeplex.ai`,
      );
      expect(r.status).toBe(200);
      const established = r.body.status.conditions.find(
        (c: { type: string }) => c.type === "Established",
      );
      expect(established.status).toBe("True");
      // A non-structural schema would show up as a NonStructuralSchema condition.
      expect(r.body.status.conditions.map((c: { type: string }) => c.type)).not.toContain(
        "NonStructuralSchema",
      );
    },
  );

  it("stores a PodBox with the schema's defaults applied by the API server", async () => {
    const created = await kube.mustCreate(
      paths.podboxes(ns),
      box("defaults", { templateRef: "t" }),
    );
    expect(created.spec).toEqual({
      templateRef: "t",
      desiredState: "Running",
      rootfsGeneration: 1,
      volumeReclaimPolicy: "Delete",
    });
  });

  it.each([
    [{ templateRef: "t", rootfsGeneration: "two" }, "spec.rootfsGeneration: Invalid value"],
    [
      { templateRef: "t", desiredState: "Stopped" },
      'spec.desiredState: Unsupported value: "Stopped"',
    ],
    [{ templateRef: "t", rootfsGeneration: 0 }, "spec.rootfsGeneration: Invalid value: 0"],
    [{ templateRef: "Bad_Name" }, "spec.templateRef: Invalid value"],
    [{ templateRef: "t", leaseExpiresAt: "soon" }, "spec.leaseExpiresAt: Invalid value"],
  ])("the API server itself rejects a structurally invalid PodBox %#", async (spec, message) => {
    const name = `invalid-${Math.random().toString(36).slice(2, 7)}`;
    const r = await kube.create(paths.podboxes(ns), box(name, spec));
    expect(r.status).toBe(422);
    expect(r.body.reason).toBe("Invalid");
    expect(r.body.message).toContain(message);
    // The schema, not the webhook, refused it.
    expect(r.body.message).not.toContain("admission webhook");
    expect((await kube.get(paths.podboxes(ns, name))).status).toBe(404);
  });

  it("the API server itself bounds a pool's replicas, so no pool can ask for millions", async () => {
    const r = await kube.create(paths.podwarmpools(ns), {
      apiVersion: "pod.cubeplex.ai/v1alpha1",
      kind: "PodWarmPool",
      metadata: { name: "huge" },
      spec: { templateRef: "missing", replicas: 3_000_000 },
    });
    expect(r.status).toBe(422);
    expect(r.body.message).toContain("spec.replicas: Invalid value: 3000000");
    expect(r.body.message).toContain("less than or equal to 1000");
    expect(r.body.message).not.toContain("admission webhook");
  });

  it("serves the printer columns and short names", async () => {
    const r = await kube.get("/apis/pod.cubeplex.ai/v1alpha1");
    const byName = Object.fromEntries(
      r.body.resources.map((x: { name: string; shortNames?: string[] }) => [x.name, x.shortNames]),
    );
    expect(byName).toMatchObject({
      podboxes: ["pbox"],
      podtemplates: ["ptpl"],
      podwarmpools: ["pwp"],
    });
  });
});
