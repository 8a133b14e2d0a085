import { Kube, Obj, paths } from "../../testkit/kube";
import { podBox, podTemplate } from "../../testkit/objects";
import { inNamespace, useTestNamespace } from "./lifecycle-helpers";

const kube = new Kube();
let ns: string;
let h: ReturnType<typeof inNamespace>;

useTestNamespace(kube, "it-pool", podTemplate("python"), (n, helpers) => {
  ns = n;
  h = helpers;
});

const createPool = (name: string, replicas: number) =>
  kube.mustCreate(paths.podwarmpools(ns), {
    apiVersion: "pod.cubeplex.ai/v1alpha1",
    kind: "PodWarmPool",
    metadata: { name },
    spec: { templateRef: "python", replicas },
  });
/** Waits until the pool reports exactly `n` standbys, all ready, for its current generation. */
const poolAt = (name: string, n: number, timeoutMs = 60_000) =>
  kube.waitFor(
    paths.podwarmpools(ns, name),
    o =>
      o?.status?.observedGeneration === o?.metadata.generation &&
      o?.status?.replicas === n &&
      o?.status?.readyReplicas === n,
    timeoutMs,
  ) as Promise<Obj>;
const standbys = (pool: string) => kube.names(paths.pods(ns), `pod.cubeplex.ai/pool=${pool}`);
const get = async (path: string) => (await kube.get(path)).body;

describe("PodWarmPool, observed in the API server", () => {
  it("keeps spec.replicas standbys: two PVCs and a Running Pod each, owned by the pool", async () => {
    const pool = await createPool("p", 3);
    await poolAt("p", 3);
    const pods = await standbys("p");
    expect(pods).toHaveLength(3);
    expect(await kube.names(paths.pvcs(ns), "pod.cubeplex.ai/pool=p")).toHaveLength(6);
    for (const name of pods) {
      const pod = await get(paths.pods(ns, name));
      expect(pod.status.phase).toBe("Running");
      expect(pod.status.podIP).toMatch(/^127\./);
      expect(pod.metadata.ownerReferences).toEqual([
        expect.objectContaining({ kind: "PodWarmPool", uid: pool.metadata.uid, controller: true }),
      ]);
      // Claims remove this reference; one that blocked owner deletion would cost a GC read of the pool.
      expect(pod.metadata.ownerReferences[0].blockOwnerDeletion).toBeUndefined();
      expect(pod.spec.initContainers[0].name).toBe("podd-installer");
      expect(pod.metadata.labels["pod.cubeplex.ai/box"]).toBeUndefined();
      // Its PVCs are owned by the pool and by the Pod: a claimed Pod keeps them from the pool's GC.
      for (const pvc of [`${name}-rootfs-g1`, `${name}-workspace`]) {
        expect((await get(paths.pvcs(ns, pvc))).metadata.ownerReferences).toEqual([
          expect.objectContaining({
            kind: "PodWarmPool",
            uid: pool.metadata.uid,
            controller: true,
          }),
          { apiVersion: "v1", kind: "Pod", name, uid: pod.metadata.uid },
        ]);
      }
    }
  });

  it("a box claims a ready standby: Running at once with its IP (WarmPoolClaimed), and the pool replenishes", async () => {
    const before = await standbys("p");
    const created = await h.createBox("claimer", { warmPoolRef: "p" });
    const box = await h.waitPhase("claimer", "Running", "WarmPoolClaimed");
    expect(before).toContain(box.status.podName);
    const pod = await get(paths.pods(ns, box.status.podName));
    expect(box.status).toMatchObject({
      podIP: pod.status.podIP,
      podUID: pod.metadata.uid,
      poddURL: `http://${pod.status.podIP}:49983`,
      rootfsPVCName: `${box.status.podName}-rootfs-g1`,
      workspacePVCName: `${box.status.podName}-workspace`,
      rootfsGeneration: 1,
    });
    expect(pod.metadata.ownerReferences).toEqual([
      expect.objectContaining({ kind: "PodBox", uid: created.metadata.uid }),
    ]);
    // Then, once claims are quiet: the finalizer, the Pod's labels the box's and no longer the
    // pool's, and the PVCs handed over (the box alone owns them).
    await kube.waitFor(paths.podboxes(ns, "claimer"), o =>
      (o?.metadata.finalizers ?? []).includes("pod.cubeplex.ai/cleanup"),
    );
    const relabelled = (await kube.waitFor(
      paths.pods(ns, box.status.podName),
      o => o?.metadata.labels?.["pod.cubeplex.ai/box"] === "claimer",
    )) as Obj;
    expect(relabelled.metadata.labels["pod.cubeplex.ai/pool"]).toBeUndefined();
    expect(relabelled.metadata.uid).toBe(pod.metadata.uid);
    for (const pvc of [box.status.rootfsPVCName, box.status.workspacePVCName]) {
      const handed = (await kube.waitFor(
        paths.pvcs(ns, pvc),
        o => o?.metadata.labels?.["pod.cubeplex.ai/box"] === "claimer",
      )) as Obj;
      expect(handed.metadata.ownerReferences).toEqual([
        expect.objectContaining({ kind: "PodBox", uid: created.metadata.uid, controller: true }),
      ]);
      expect(handed.metadata.labels["pod.cubeplex.ai/pool"]).toBeUndefined();
    }
    // Replenished: three ready standbys again, the claimed one no longer among them.
    const ready = (p: Obj) =>
      (p.status?.conditions ?? []).some((c: Obj) => c.type === "Ready" && c.status === "True");
    const pool = await kube.waitForItems(
      `${paths.pods(ns)}?labelSelector=${encodeURIComponent("pod.cubeplex.ai/pool=p")}`,
      pods => pods.filter(p => !p.metadata.deletionTimestamp && ready(p)).length === 3,
    );
    expect(pool.map(p => p.metadata.name)).not.toContain(box.status.podName);
    await poolAt("p", 3);
    await h.waitEvent("claimer", "WarmPoolClaimed");
  });

  it("pausing, resuming and deleting a claimed box never touch the pool", async () => {
    const pool = await standbys("p");
    const claimed = (await get(paths.podboxes(ns, "claimer"))).status;
    await h.patchBox("claimer", { desiredState: "Paused" });
    await h.waitPhase("claimer", "Paused");
    expect(await kube.names(paths.pvcs(ns), "pod.cubeplex.ai/box=claimer")).toEqual(
      [claimed.rootfsPVCName, claimed.workspacePVCName].sort(),
    );
    await h.patchBox("claimer", { desiredState: "Running" });
    const resumed = await h.waitPhase("claimer", "Running", "Resumed");
    expect(resumed.status).toMatchObject({
      podName: "claimer",
      rootfsPVCName: claimed.rootfsPVCName,
      workspacePVCName: claimed.workspacePVCName,
    });
    await kube.delete(paths.podboxes(ns, "claimer"));
    await h.waitGone(paths.podboxes(ns, "claimer"));
    await h.waitGone(paths.pvcs(ns, claimed.workspacePVCName));
    expect(await standbys("p")).toEqual(pool);
    await poolAt("p", 3);
  });

  it("scales down (unclaimed standbys removed) and up", async () => {
    await kube.mergePatch(paths.podwarmpools(ns, "p"), { spec: { replicas: 1 } });
    await poolAt("p", 1);
    for (let i = 0; i < 100 && (await standbys("p")).length !== 1; i++)
      await new Promise(r => setTimeout(r, 200));
    expect(await standbys("p")).toHaveLength(1);
    await kube.mergePatch(paths.podwarmpools(ns, "p"), { spec: { replicas: 2 } });
    await poolAt("p", 2);
  });

  it("scales through the scale subresource, as kubectl scale, an HPA or KEDA do, within its bounds", async () => {
    const scale = paths.podwarmpools(ns, "p") + "/scale";
    const now = await get(scale);
    expect(now).toMatchObject({
      kind: "Scale",
      spec: { replicas: 2 },
      status: { replicas: 2, selector: "pod.cubeplex.ai/pool=p" },
    });
    expect((await kube.mergePatch(scale, { spec: { replicas: 3 } })).status).toBe(200);
    await poolAt("p", 3);
    // The selector names the pool's standbys and nothing else: what an autoscaler counts.
    const selector = (await get(scale)).status.selector;
    expect(selector).toBe("pod.cubeplex.ai/pool=p");
    for (let i = 0; i < 100 && (await standbys("p")).length !== 3; i++)
      await new Promise(r => setTimeout(r, 200));
    expect(await kube.names(paths.pods(ns), selector)).toHaveLength(3);
    const refused = await kube.mergePatch(scale, { spec: { replicas: 1001 } });
    expect(refused.status).toBe(422);
    expect(refused.body.message).toContain("spec.replicas");
    expect((await get(paths.podwarmpools(ns, "p"))).spec.replicas).toBe(3);
    await kube.mergePatch(scale, { spec: { replicas: 2 } });
    await poolAt("p", 2);
  });

  it("a template change replaces stale standbys a few at a time, never emptying the pool", async () => {
    const oldHash = (await get(paths.podwarmpools(ns, "p"))).status.templateHash;
    let lowest = Infinity;
    const stop = kube.watchCollection(paths.podwarmpools(ns), (_, o) => {
      if (o.metadata.name === "p") lowest = Math.min(lowest, o.status?.readyReplicas ?? 0);
    });
    await kube.mergePatch(paths.podtemplates(ns, "python"), { spec: { image: "py:3.13" } });
    const done = await kube.waitFor(
      paths.podwarmpools(ns, "p"),
      o =>
        Boolean(
          o?.status?.templateHash &&
            o.status.templateHash !== oldHash &&
            o.status.updatedReplicas === 2 &&
            o.status.readyReplicas === 2 &&
            o.status.replicas === 2,
        ),
      120_000,
    );
    stop();
    for (const name of await standbys("p")) {
      const pod = await get(paths.pods(ns, name));
      expect(pod.metadata.labels["pod.cubeplex.ai/template-hash"]).toBe(done!.status.templateHash);
      expect(pod.spec.containers[0].image).toBe("py:3.13");
    }
    expect(lowest).toBeGreaterThanOrEqual(1);
  });

  it("a pool whose standbys the API server refuses says why in its status", async () => {
    await kube.mustCreate(
      paths.podtemplates(ns),
      podTemplate("no-runtime", {
        image: "py:3",
        runtimeClassName: "missing-class",
        volumeMode: "Filesystem",
      }),
    );
    await kube.mustCreate(paths.podwarmpools(ns), {
      apiVersion: "pod.cubeplex.ai/v1alpha1",
      kind: "PodWarmPool",
      metadata: { name: "refused" },
      spec: { templateRef: "no-runtime", replicas: 1 },
    });
    const pool = (await kube.waitFor(paths.podwarmpools(ns, "refused"), o =>
      (o?.status?.conditions ?? []).some((c: Obj) => c.reason === "StandbyWriteFailed"),
    )) as Obj;
    expect(pool.status.conditions[0]).toMatchObject({ type: "Ready", status: "False" });
    expect(pool.status.conditions[0].message).toContain('RuntimeClass "missing-class" not found');
    await kube.delete(paths.podwarmpools(ns, "refused"));
  });

  it("a deleted pool takes its unclaimed standbys with it, in the foreground too; a claimed one stays with its box", async () => {
    await createPool("gone", 2);
    await poolAt("gone", 2);
    await h.createBox("keeper", { warmPoolRef: "gone" });
    const box = await h.waitPhase("keeper", "Running", "WarmPoolClaimed");
    await kube.waitFor(
      paths.pvcs(ns, box.status.rootfsPVCName),
      o => o?.metadata.labels?.["pod.cubeplex.ai/pool"] === undefined,
    );
    const res = await kube.request("DELETE", paths.podwarmpools(ns, "gone"), {
      propagationPolicy: "Foreground",
    });
    expect(res.status).toBeLessThan(300);
    await kube.waitFor(paths.podwarmpools(ns, "gone"), o => o === undefined);
    const selector = encodeURIComponent("pod.cubeplex.ai/pool=gone");
    await kube.waitForItems(`${paths.pods(ns)}?labelSelector=${selector}`, i => i.length === 0);
    await kube.waitForItems(`${paths.pvcs(ns)}?labelSelector=${selector}`, i => i.length === 0);
    expect(
      (await get(paths.pods(ns, box.status.podName))).metadata.deletionTimestamp,
    ).toBeUndefined();
    for (const pvc of [box.status.rootfsPVCName, box.status.workspacePVCName]) {
      expect((await get(paths.pvcs(ns, pvc))).metadata.deletionTimestamp).toBeUndefined();
    }
    const kept = await get(paths.podboxes(ns, "keeper"));
    expect(kept.status).toMatchObject({ phase: "Running", templateName: "python" });
    // It outlives its pool: paused and resumed, its Pod is made from the template it recorded.
    await h.patchBox("keeper", { desiredState: "Paused" });
    await h.waitPhase("keeper", "Paused");
    await h.patchBox("keeper", { desiredState: "Running" });
    const resumed = await h.waitPhase("keeper", "Running", "Resumed");
    expect(resumed.status.workspacePVCName).toBe(box.status.workspacePVCName);
  });

  it("a pool deleted straight after a claim leaves the claimed standby's PVCs to the box", async () => {
    await createPool("brief", 1);
    await poolAt("brief", 1);
    await h.createBox("stayer", { warmPoolRef: "brief" });
    const box = await h.waitPhase("stayer", "Running", "WarmPoolClaimed");
    // Most likely before the claim is finished (the handover waits until claims are quiet).
    await kube.delete(paths.podwarmpools(ns, "brief"));
    await h.waitGone(paths.podwarmpools(ns, "brief"));
    const selector = encodeURIComponent("pod.cubeplex.ai/pool=brief");
    await kube.waitForItems(`${paths.pvcs(ns)}?labelSelector=${selector}`, i => i.length === 0);
    for (const pvc of [box.status.rootfsPVCName, box.status.workspacePVCName]) {
      const kept = (await kube.waitFor(
        paths.pvcs(ns, pvc),
        o => o?.metadata.labels?.["pod.cubeplex.ai/box"] === "stayer",
      )) as Obj;
      expect(kept.metadata.deletionTimestamp).toBeUndefined();
      expect(kept.metadata.ownerReferences).toEqual([
        expect.objectContaining({ kind: "PodBox", uid: box.metadata.uid }),
      ]);
    }
    expect((await get(paths.podboxes(ns, "stayer"))).status.phase).toBe("Running");
    await kube.delete(paths.podboxes(ns, "stayer"));
  });

  it("a box deleted straight after its claim takes the standby's PVCs along; none return to the pool", async () => {
    await createPool("quick", 2);
    await poolAt("quick", 2);
    await h.createBox("fleeting", { warmPoolRef: "quick" });
    const box = await h.waitPhase("fleeting", "Running", "WarmPoolClaimed");
    await kube.delete(paths.podboxes(ns, "fleeting"));
    await h.waitGone(paths.podboxes(ns, "fleeting"));
    await h.waitGone(paths.pods(ns, box.status.podName));
    await h.waitGone(paths.pvcs(ns, box.status.rootfsPVCName));
    await h.waitGone(paths.pvcs(ns, box.status.workspacePVCName));
    await poolAt("quick", 2);
    expect(await standbys("quick")).not.toContain(box.status.podName);
    await kube.delete(paths.podwarmpools(ns, "quick"));
  });

  it("the garbage collector keeps an object while any of its owners lives, in the foreground too", async () => {
    // The premise of standby PVCs owned by their pool and their Pod, checked on ConfigMaps.
    const cm = (name: string, ownerReferences?: object[]) =>
      kube.mustCreate(`/api/v1/namespaces/${ns}/configmaps`, {
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name, ownerReferences },
      });
    const ref = (o: Obj, controller?: boolean) => ({
      apiVersion: "v1",
      kind: "ConfigMap",
      name: o.metadata.name,
      uid: o.metadata.uid,
      ...(controller ? { controller } : {}),
    });
    const at = (name: string) => `/api/v1/namespaces/${ns}/configmaps/${name}`;
    for (const policy of ["Background", "Foreground"]) {
      const owner = await cm(`gc-owner-${policy.toLowerCase()}`);
      const other = await cm(`gc-other-${policy.toLowerCase()}`);
      const dep = await cm(`gc-dep-${policy.toLowerCase()}`, [ref(owner, true), ref(other)]);
      await kube.request("DELETE", at(owner.metadata.name), { propagationPolicy: policy });
      await h.waitGone(at(owner.metadata.name));
      const kept = (await kube.waitFor(
        at(dep.metadata.name),
        o => o?.metadata.ownerReferences?.length === 1,
      )) as Obj;
      expect(kept.metadata.ownerReferences).toEqual([ref(other)]);
      expect(kept.metadata.deletionTimestamp).toBeUndefined();
      await kube.delete(at(other.metadata.name));
      await h.waitGone(at(dep.metadata.name));
    }
  });

  it("an autoscaling pool keeps a standby per recent claim, and falls back to its floor after a quiet window", async () => {
    await kube.mustCreate(paths.podwarmpools(ns), {
      apiVersion: "pod.cubeplex.ai/v1alpha1",
      kind: "PodWarmPool",
      metadata: { name: "auto" },
      spec: {
        templateRef: "python",
        replicas: 1,
        autoscale: { maxReplicas: 3, windowSeconds: 10 },
      },
    });
    await poolAt("auto", 1);
    // Four boxes ask: the target follows them up to the ceiling, and the pool refills to it.
    for (const name of ["auto-a", "auto-b", "auto-c", "auto-d"]) {
      await h.createBox(name, { warmPoolRef: "auto" });
      await h.waitPhase(name, "Running");
    }
    const busy = await poolAt("auto", 3);
    expect(busy.status.desiredReplicas).toBe(3);
    expect(busy.spec.replicas).toBe(1);
    // No claim for a whole window: back to the floor, with no event to bring it.
    const quiet = await poolAt("auto", 1, 60_000);
    expect(quiet.status.desiredReplicas).toBe(1);
    for (let i = 0; i < 100 && (await standbys("auto")).length !== 1; i++)
      await new Promise(r => setTimeout(r, 200));
    expect(await standbys("auto")).toHaveLength(1);
    const refused = await kube.mergePatch(paths.podwarmpools(ns, "auto"), {
      spec: { replicas: 5 },
    });
    expect(refused.status).toBe(422);
    expect(refused.body.message).toContain("spec.autoscale.maxReplicas: must be >= spec.replicas");
  });

  it("an empty pool falls back to a cold start", async () => {
    await createPool("empty", 0);
    await h.createBox("cold", { warmPoolRef: "empty" });
    const box = await h.waitPhase("cold", "Running", "Started");
    expect(box.status.rootfsPVCName).toBe("cold-rootfs-g1");
    expect(await h.podsOf("cold")).toEqual(["cold"]);
  });

  it("50 boxes at once against a pool of 10: exactly 10 warm claims, 40 cold starts, no standby shared", async () => {
    await createPool("burst", 10);
    await poolAt("burst", 10, 120_000);
    const names = Array.from({ length: 50 }, (_, i) => `burst-${i}`);
    await Promise.all(
      names.map(n => kube.mustCreate(paths.podboxes(ns), podBox(n, { warmPoolRef: "burst" }))),
    );
    const boxes = await Promise.all(names.map(n => h.waitPhase(n, "Running", undefined, 180_000)));
    const claimed = boxes.filter(b => b.status.reason === "WarmPoolClaimed");
    const cold = boxes.filter(b => b.status.reason === "Started");
    expect([claimed.length, cold.length]).toEqual([10, 40]);
    const pods = claimed.map(b => b.status.podName);
    expect(new Set(pods).size).toBe(10);
    for (const b of claimed) {
      const pod = await get(paths.pods(ns, b.status.podName));
      expect(pod.metadata.ownerReferences).toEqual([
        expect.objectContaining({ kind: "PodBox", uid: b.metadata.uid }),
      ]);
    }
  });
});
