import { Kube, Obj, paths } from "../../testkit/kube";
import { podTemplate, TEMPLATE } from "../../testkit/objects";
import { inNamespace, useTestNamespace } from "./lifecycle-helpers";

const kube = new Kube();
let ns: string;
let h: ReturnType<typeof inNamespace>;

useTestNamespace(
  kube,
  "it-life",
  podTemplate("python", { ...TEMPLATE, egress: { enabled: true, image: "proxy:1" } }),
  (n, helpers) => {
    ns = n;
    h = helpers;
  },
);

const claims = (pod: Obj) =>
  pod.spec.volumes.flatMap((v: Obj) =>
    v.persistentVolumeClaim ? [v.persistentVolumeClaim.claimName] : [],
  );

describe("PodBox lifecycle, observed in the API server", () => {
  let workspaceUid: string;

  it("Running: both PVCs, then the Pod through the mutate webhook, then status from the Pod's watch events", async () => {
    const created = await h.createBox("main", { templateRef: "python" });
    const box = await h.waitPhase("main", "Running", "Started");
    expect(await h.pvcsOf("main")).toEqual(["main-rootfs-g1", "main-workspace"]);
    expect(await h.podsOf("main")).toEqual(["main"]);
    const pod = (await kube.get(paths.pods(ns, "main"))).body;
    expect(box.status).toMatchObject({
      podName: "main",
      podIP: pod.status.podIP,
      podUID: pod.metadata.uid,
      poddURL: `http://${pod.status.podIP}:49983`,
      rootfsPVCName: "main-rootfs-g1",
      workspacePVCName: "main-workspace",
      rootfsGeneration: 1,
      message: "running",
    });
    expect(box.status.podIP).toMatch(/^127\./);
    expect(box.status.conditions[0]).toMatchObject({
      type: "Ready",
      status: "True",
      observedGeneration: 1,
    });
    // The Pod went through admission like any sandbox Pod, and belongs to the box.
    expect(pod.spec.initContainers.map((c: Obj) => c.name)).toEqual([
      "podd-installer",
      "rootfs-fill",
      "egress-isolate",
    ]);
    expect(pod.spec.containers.map((c: Obj) => c.name)).toEqual(["sandbox", "egress"]);
    expect(pod.metadata.ownerReferences).toEqual([
      expect.objectContaining({
        kind: "PodBox",
        name: "main",
        uid: created.metadata.uid,
        controller: true,
      }),
    ]);
    const ws = (await kube.get(paths.pvcs(ns, "main-workspace"))).body;
    expect(ws.metadata.ownerReferences[0].uid).toBe(created.metadata.uid);
    expect(ws.spec.volumeMode).toBe("Filesystem");
    workspaceUid = ws.metadata.uid;
    await h.waitEvent("main", "Started");
  });

  it("does not loop on its own status writes: a poke changes nothing", async () => {
    const before = (await kube.get(paths.podboxes(ns, "main"))).body;
    await kube.mergePatch(paths.podboxes(ns, "main"), { metadata: { annotations: { poke: "1" } } });
    const poked = (await kube.get(paths.podboxes(ns, "main"))).body;
    await new Promise(r => setTimeout(r, 1500));
    const after = (await kube.get(paths.podboxes(ns, "main"))).body;
    expect(after.metadata.resourceVersion).toBe(poked.metadata.resourceVersion);
    expect(after.status).toEqual(before.status);
  });

  it("Paused: the Pod goes, both PVCs stay, the IP and URL are cleared", async () => {
    await h.patchBox("main", { desiredState: "Paused" });
    const box = await h.waitPhase("main", "Paused", "Paused");
    expect(await h.podsOf("main")).toEqual([]);
    expect(await h.pvcsOf("main")).toEqual(["main-rootfs-g1", "main-workspace"]);
    expect(box.status.podIP).toBeUndefined();
    expect(box.status.poddURL).toBeUndefined();
    expect(box.status.conditions[0]).toMatchObject({
      type: "Ready",
      status: "False",
      reason: "Paused",
    });
  });

  it("Resume: a new Pod on the same PVCs", async () => {
    await h.patchBox("main", { desiredState: "Running" });
    const box = await h.waitPhase("main", "Running", "Resumed");
    const pod = (await kube.get(paths.pods(ns, "main"))).body;
    expect(claims(pod).sort()).toEqual(["main-rootfs-g1", "main-workspace"]);
    expect((await kube.get(paths.pvcs(ns, "main-workspace"))).body.metadata.uid).toBe(workspaceUid);
    expect(box.status.podIP).toBe(pod.status.podIP);
  });

  it("Rootfs reset: a new rootfs PVC, the old one deleted once unused, the same workspace PVC", async () => {
    await h.patchBox("main", { rootfsGeneration: 2 });
    const box = await h.waitPhase("main", "Running", "RootFSReset");
    expect(box.status).toMatchObject({ rootfsGeneration: 2, rootfsPVCName: "main-rootfs-g2" });
    await h.waitPVCs("main", ["main-rootfs-g2", "main-workspace"]);
    const pod = (await kube.get(paths.pods(ns, "main"))).body;
    expect(claims(pod).sort()).toEqual(["main-rootfs-g2", "main-workspace"]);
    expect((await kube.get(paths.pvcs(ns, "main-workspace"))).body.metadata.uid).toBe(workspaceUid);
    await h.waitEvent("main", "RootFSReset");
    expect(await h.events("main")).toEqual(
      expect.arrayContaining(["Started", "Paused", "Resumed", "RootFSReset"]),
    );
  });

  it("Fork: both PVCs cloned from the parent's through dataSource", async () => {
    await h.createBox("child", { templateRef: "python", forkFrom: "main" });
    await h.waitPhase("child", "Running", "ForkCloned");
    const rootfs = (await kube.get(paths.pvcs(ns, "child-rootfs-g1"))).body;
    const ws = (await kube.get(paths.pvcs(ns, "child-workspace"))).body;
    expect(rootfs.spec.dataSource).toEqual({
      apiGroup: null,
      kind: "PersistentVolumeClaim",
      name: "main-rootfs-g2",
    });
    expect(ws.spec.dataSource).toMatchObject({
      kind: "PersistentVolumeClaim",
      name: "main-workspace",
    });
    expect(await h.podsOf("child")).toEqual(["child"]);
  });

  it("Fork of a missing parent: a clear reason, then it starts when the parent appears", async () => {
    await h.createBox("orphan", { templateRef: "python", forkFrom: "later" });
    const waiting = await h.waitPhase("orphan", "Pending", "ForkParentNotFound");
    expect(waiting.status.message).toBe(
      `PodBox later (forkFrom) not found in namespace ${ns}; waiting for it`,
    );
    expect(await h.pvcsOf("orphan")).toEqual([]);
    await h.createBox("later", { templateRef: "python" });
    await h.waitPhase("orphan", "Running", "ForkCloned");
  });

  it("Terminated (volume policy Delete): the Pod and both PVCs go, the box stays", async () => {
    await h.patchBox("child", { desiredState: "Terminated" });
    const box = await h.waitPhase("child", "Terminated", "Terminated");
    expect(box.status.message).toBe("Pod deleted (volumes deleted)");
    expect(await h.podsOf("child")).toEqual([]);
    await h.waitPVCs("child", []);
  });

  it("Deletion with Retain keeps the PVCs, and a new box re-attaches them by volumeKey", async () => {
    await h.patchBox("main", { volumeReclaimPolicy: "Retain" });
    await kube.delete(paths.podboxes(ns, "main"));
    await h.waitGone(paths.podboxes(ns, "main"));
    expect(await h.podsOf("main")).toEqual([]);
    const kept = (await kube.get(paths.pvcs(ns, "main-workspace"))).body;
    expect(kept.metadata.uid).toBe(workspaceUid);
    expect(kept.metadata.ownerReferences).toBeUndefined();
    expect(await h.pvcsOf("main")).toEqual(["main-rootfs-g2", "main-workspace"]);

    const again = await h.createBox("main-again", { templateRef: "python", volumeKey: "main" });
    const box = await h.waitPhase("main-again", "Running");
    expect(box.status).toMatchObject({
      rootfsGeneration: 2,
      rootfsPVCName: "main-rootfs-g2",
      workspacePVCName: "main-workspace",
    });
    const adopted = (await kube.get(paths.pvcs(ns, "main-workspace"))).body;
    expect(adopted.metadata.uid).toBe(workspaceUid);
    expect(adopted.metadata.ownerReferences[0].uid).toBe(again.metadata.uid);
  });

  it("Deletion with Delete: the box, its Pod and its PVCs are gone", async () => {
    await kube.delete(paths.podboxes(ns, "later"));
    await h.waitGone(paths.podboxes(ns, "later"));
    expect(await h.podsOf("later")).toEqual([]);
    await h.waitPVCs("later", []);
  });
});
