import { denied, Kube, Obj, paths } from "../../testkit/kube";
import { templateHashOf as hash } from "../../testkit/objects";

const kube = new Kube();
let ns: string;

const template = (name: string, spec: object) => ({
  apiVersion: "pod.cubeplex.ai/v1alpha1",
  kind: "PodTemplate",
  metadata: { name },
  spec,
});
const pod = (name: string, labels: Record<string, string> = {}) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, labels },
  spec: { containers: [{ name: "sandbox", image: "py:3" }] },
});
const names = (list?: { name: string }[]) => (list ?? []).map(x => x.name);

beforeAll(async () => {
  ns = await kube.namespace("it-inject");
  await kube.mustCreate(
    paths.podtemplates(ns),
    template("with-egress", {
      image: "py:3",
      egress: { enabled: true, image: "proxy:1", allowHosts: ["pypi.org"] },
    }),
  );
  await kube.mustCreate(paths.podtemplates(ns), template("plain", { image: "py:3" }));
});
afterAll(async () => {
  await kube.delete(`/api/v1/namespaces/${ns}`);
  kube.close();
});

describe("the mutating webhook, called by the API server", () => {
  it("injects podd-installer, the bin emptyDir and the egress sidecar into a labelled Pod", async () => {
    const created = await kube.mustCreate(
      paths.pods(ns),
      pod("hand-made", { "pod.cubeplex.ai/template": "with-egress" }),
    );
    const spec = created.spec as Obj;
    expect(names(spec.initContainers)).toEqual(["podd-installer", "egress-isolate"]);
    // A template naming no injector gets the module's (local-module-env.ts: the local registry's).
    expect(spec.initContainers[0].image).toBe("cubepod.local/podd-injector:dev");
    expect(names(spec.containers)).toEqual(["sandbox", "egress"]);
    // The token the API server's ServiceAccount plugin mounted is gone again.
    expect(spec.automountServiceAccountToken).toBe(false);
    expect(names(spec.volumes).filter((n: string) => n.startsWith("kube-api-access"))).toEqual([]);
    expect(spec.containers[1].image).toBe("proxy:1");
    expect(spec.volumes).toContainEqual({ name: "cubepod-bin", emptyDir: {} });
    // No Secret: the template names none.
    expect(spec.volumes.filter((v: Obj) => v.secret)).toEqual([]);
    expect(spec.containers[0].volumeMounts).toContainEqual({
      name: "cubepod-bin",
      mountPath: "/opt/cubepod/bin",
      readOnly: true,
    });
    expect(created.metadata.annotations["pod.cubeplex.ai/injected"]).toBe("true");
  });

  it("adds no sidecar when the template's egress is off", async () => {
    const created = await kube.mustCreate(
      paths.pods(ns),
      pod("no-egress", { "pod.cubeplex.ai/template": "plain" }),
    );
    expect(names(created.spec.containers)).toEqual(["sandbox"]);
    expect(names(created.spec.initContainers)).toEqual(["podd-installer"]);
  });

  it("denies a labelled Pod whose PodTemplate does not exist, and stores nothing", async () => {
    const r = await kube.create(
      paths.pods(ns),
      pod("orphan", { "pod.cubeplex.ai/template": "missing" }),
    );
    expect(r.status).toBe(400);
    expect(r.body.message).toBe(
      denied(
        `PodTemplate "missing" not found in namespace "${ns}" (label pod.cubeplex.ai/template="missing")`,
      ),
    );
    expect((await kube.get(paths.pods(ns, "orphan"))).status).toBe(404);
  });

  it("injects a Pod made with generateName, as a Deployment's, like any other", async () => {
    const unnamed = pod("", { "pod.cubeplex.ai/template": "with-egress" });
    const created = await kube.mustCreate(paths.pods(ns), {
      ...unnamed,
      metadata: { generateName: "replica-", labels: unnamed.metadata.labels },
    });
    expect(created.metadata.name).toMatch(/^replica-/);
    expect(names(created.spec.initContainers)).toEqual(["podd-installer", "egress-isolate"]);
    expect(names(created.spec.containers)).toEqual(["sandbox", "egress"]);
  });

  it("leaves a Pod without the label exactly as sent", async () => {
    const created = await kube.mustCreate(paths.pods(ns), pod("bystander", { app: "web" }));
    expect(created.spec.initContainers).toBeUndefined();
    expect(names(created.spec.containers)).toEqual(["sandbox"]);
    expect(created.metadata.annotations).toBeUndefined();
    // Only the API server's own ServiceAccount plugin added a volume: its token's.
    expect(names(created.spec.volumes).filter(n => !n.startsWith("kube-api-access-"))).toEqual([]);
  });

  it("injects the template version a Pod's template-hash label names, read once and cached", async () => {
    const v1 = { image: "py:3", poddInjectorImage: "injector:1" };
    const v2 = { image: "py:3", poddInjectorImage: "injector:2" };
    const injector = async (name: string, labels: Record<string, string>) => {
      const labelled = { "pod.cubeplex.ai/template": "pinned", ...labels };
      return (await kube.mustCreate(paths.pods(ns), pod(name, labelled))).spec.initContainers[0]
        .image;
    };
    const path = paths.podtemplates(ns, "pinned");
    await kube.mustCreate(paths.podtemplates(ns), template("pinned", v1));
    // Read (nothing cached yet), then cached as the version with that hash.
    expect(await injector("pin-a", { "pod.cubeplex.ai/template-hash": hash(v1) })).toBe(
      "injector:1",
    );
    expect((await kube.mergePatch(path, { spec: v2 })).status).toBe(200);
    // A read now would give injector:2: the version the Pod names comes from the cache.
    expect(await injector("pin-b", { "pod.cubeplex.ai/template-hash": hash(v1) })).toBe(
      "injector:1",
    );
    // A Pod without the label (declared by hand) always reads, and that read is cached.
    expect(await injector("pin-c", {})).toBe("injector:2");
    expect(await injector("pin-d", { "pod.cubeplex.ai/template-hash": hash(v2) })).toBe(
      "injector:2",
    );
    expect((await kube.delete(path)).status).toBe(200);
    // Gone: a read is refused; the version a Pod was built from is still known.
    const r = await kube.create(
      paths.pods(ns),
      pod("pin-e", { "pod.cubeplex.ai/template": "pinned" }),
    );
    expect(r.status).toBe(400);
    expect(await injector("pin-f", { "pod.cubeplex.ai/template-hash": hash(v2) })).toBe(
      "injector:2",
    );
  });

  it("runs the sandbox Pod on the fake node with a loopback IP", async () => {
    const ip = await waitFor(async () => {
      const r = await kube.get(paths.pods(ns, "no-egress"));
      return r.body.status?.phase === "Running" ? r.body.status.podIP : undefined;
    });
    expect(ip).toMatch(/^127\./);
  });
});

/** Polls an observation: fine for a test's own assertions, never in the operator. */
async function waitFor<T>(probe: () => Promise<T | undefined>, attempts = 150): Promise<T> {
  for (let i = 0; i < attempts; i++) {
    const v = await probe();
    if (v !== undefined) return v;
    await new Promise(r => setTimeout(r, 200));
  }
  throw new Error("condition not reached");
}
