import { cluster, clusterWithEnv, Kube, paths } from "./kube";
import { inNamespace, podTemplate, TEMPLATE } from "./lifecycle-helpers";

const kube = new Kube();
let ns: string;
let h: ReturnType<typeof inNamespace>;

beforeAll(async () => {
  ns = await kube.namespace("it-faults");
  h = inNamespace(kube, ns);
  await kube.mustCreate(paths.podtemplates(ns), podTemplate("python"));
});
afterAll(async () => {
  cluster("module", "start");
  await kube.delete(`/api/v1/namespaces/${ns}`);
  kube.close();
});

/** Restarts the module as a crash would (SIGKILL, webhooks left registered), with a failpoint. */
function restartModule(failpoint?: string) {
  cluster("module", "kill");
  clusterWithEnv(failpoint ? { CUBEPOD_FAILPOINT: failpoint } : {}, "module", "start");
}

describe("bad input at runtime", () => {
  it("a template deleted under a running box: a clear status, the Pod and PVCs untouched", async () => {
    await kube.mustCreate(paths.podtemplates(ns), podTemplate("doomed"));
    await h.createBox("tplless", { templateRef: "doomed" });
    await h.waitPhase("tplless", "Running", "Started");
    await kube.delete(paths.podtemplates(ns, "doomed"));
    const box = await h.waitPhase("tplless", "Running", "TemplateNotFound");
    expect(box.status.message).toBe(
      "PodTemplate doomed not found: the running Pod is kept, but it cannot be recreated",
    );
    expect(await h.podsOf("tplless")).toEqual(["tplless"]);
    expect(await h.pvcsOf("tplless")).toEqual(["tplless-rootfs-g1", "tplless-workspace"]);
    // Paused without its template, it cannot start again until the template is back.
    await h.patchBox("tplless", { desiredState: "Paused" });
    await h.waitPhase("tplless", "Paused");
    await h.patchBox("tplless", { desiredState: "Running" });
    await h.waitPhase("tplless", "Pending", "TemplateNotFound");
    await kube.mustCreate(paths.podtemplates(ns), podTemplate("doomed"));
    await h.waitPhase("tplless", "Running");
  });

  it("a fork of a box that is being deleted fails clearly and touches no data", async () => {
    await h.createBox("parent", { templateRef: "python", volumeReclaimPolicy: "Retain" });
    await h.waitPhase("parent", "Running");
    // Another finalizer keeps the parent in its deletion while the fork is created.
    await kube.mergePatch(paths.podboxes(ns, "parent"), {
      metadata: { finalizers: ["pepr.dev/finalizer", "test.cubeplex.ai/hold"] },
    });
    await kube.delete(paths.podboxes(ns, "parent"));
    await h.createBox("fork", { templateRef: "python", forkFrom: "parent" });
    const box = await h.waitPhase("fork", "Failed", "ForkParentDeleting");
    expect(box.status.message).toBe(
      "PodBox parent is being deleted; a fork needs a parent that stays",
    );
    expect(await h.pvcsOf("fork")).toEqual([]);
    expect(await h.pvcsOf("parent")).toEqual(["parent-rootfs-g1", "parent-workspace"]);
    await kube.mergePatch(paths.podboxes(ns, "parent"), { metadata: { finalizers: null } });
    await h.waitGone(paths.podboxes(ns, "parent"));
  });

  it("an error the API server will repeat ends in Failed with its reason", async () => {
    // Requests above limits: the API server refuses the Pod (422) however often it is sent.
    await kube.mustCreate(
      paths.podtemplates(ns),
      podTemplate("greedy", {
        ...TEMPLATE,
        resources: { requests: { cpu: "2" }, limits: { cpu: "1" } },
      }),
    );
    await h.createBox("greedy", { templateRef: "greedy" });
    const box = await h.waitPhase("greedy", "Failed", "APIError");
    // The API server's own words, so that the user sees what to fix.
    expect(box.status.message).toMatch(
      /^createPod failed: HTTP 422: Pod "greedy" is invalid: .*cpu/,
    );
    expect(await h.podsOf("greedy")).toEqual([]);
    await h.waitEvent("greedy", "APIError");
  });
});

describe("restart safety: the module stopped in the middle of a transition", () => {
  it("after the PVCs, before the Pod: converges to one Pod on the two PVCs", async () => {
    restartModule("createPVC:2");
    await h.createBox("interrupted", { templateRef: "python" });
    await h.waitPVCs("interrupted", ["interrupted-rootfs-g1", "interrupted-workspace"]);
    expect(await h.podsOf("interrupted")).toEqual([]);
    restartModule();
    await h.waitPhase("interrupted", "Running", "Started");
    expect(await h.podsOf("interrupted")).toEqual(["interrupted"]);
    expect(await h.pvcsOf("interrupted")).toEqual([
      "interrupted-rootfs-g1",
      "interrupted-workspace",
    ]);
  });

  it("during a reset (new rootfs created, Pod not yet back): converges on the new generation", async () => {
    restartModule("createPVC:1");
    await h.patchBox("interrupted", { rootfsGeneration: 2 });
    await h.waitPVCs("interrupted", [
      "interrupted-rootfs-g1",
      "interrupted-rootfs-g2",
      "interrupted-workspace",
    ]);
    restartModule();
    const box = await h.waitPhase("interrupted", "Running", "RootFSReset");
    expect(box.status.rootfsGeneration).toBe(2);
    await h.waitPVCs("interrupted", ["interrupted-rootfs-g2", "interrupted-workspace"]);
    expect(await h.podsOf("interrupted")).toEqual(["interrupted"]);
  });

  it("during a deletion (one PVC deleted): the box, its Pod and its PVCs all go", async () => {
    restartModule("deletePVC:1");
    await kube.delete(paths.podboxes(ns, "interrupted"));
    // PVCs are deleted in name order: the rootfs went, the workspace is left.
    await h.waitPVCs("interrupted", ["interrupted-workspace"]);
    restartModule();
    await h.waitGone(paths.podboxes(ns, "interrupted"));
    expect(await h.podsOf("interrupted")).toEqual([]);
    await h.waitPVCs("interrupted", []);
  });

  it("deleted while the module is down: the finalizer holds it until the module cleans up", async () => {
    await h.createBox("late", { templateRef: "python" });
    await h.waitPhase("late", "Running");
    cluster("module", "kill");
    await kube.delete(paths.podboxes(ns, "late"));
    const held = (await kube.get(paths.podboxes(ns, "late"))).body;
    expect(held.metadata.deletionTimestamp).toBeDefined();
    expect(await h.podsOf("late")).toEqual(["late"]);
    cluster("module", "start");
    await h.waitGone(paths.podboxes(ns, "late"));
    expect(await h.podsOf("late")).toEqual([]);
    await h.waitPVCs("late", []);
  });
});
