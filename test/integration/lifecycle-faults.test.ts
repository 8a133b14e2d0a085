import { cluster, clusterWithEnv, Kube, Obj, paths } from "../../testkit/kube";
import { podTemplate, TEMPLATE } from "../../testkit/objects";
import { inNamespace } from "./lifecycle-helpers";
import { isNamespaceTerminating } from "../../capabilities/kit/api-errors";

// Each restart rebuilds the module under pepr dev, and a test here restarts it up to three times.
jest.setTimeout(420_000);

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

/** Creates a pool of the "python" template and waits until its standbys are all ready. */
async function readyPool(name: string, replicas: number) {
  await kube.mustCreate(paths.podwarmpools(ns), {
    apiVersion: "pod.cubeplex.ai/v1alpha1",
    kind: "PodWarmPool",
    metadata: { name },
    spec: { templateRef: "python", replicas },
  });
  await kube.waitFor(paths.podwarmpools(ns, name), o => o?.status?.readyReplicas === replicas);
}

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
    // A cluster policy that calls this box's Pod invalid (422), however often it is sent.
    const policy = `it-invalid-${ns}`;
    const vap = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies";
    const binding = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings";
    await kube.mustCreate(vap, {
      metadata: { name: policy },
      spec: {
        matchConstraints: {
          resourceRules: [
            { apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["pods"] },
          ],
        },
        validations: [
          {
            expression: `!has(object.metadata.labels) || !("pod.cubeplex.ai/box" in object.metadata.labels) || object.metadata.labels["pod.cubeplex.ai/box"] != "greedy"`,
            message: "no Pod of greedy here",
            reason: "Invalid",
          },
        ],
      },
    });
    await kube.mustCreate(binding, {
      metadata: { name: policy },
      spec: {
        policyName: policy,
        validationActions: ["Deny"],
        matchResources: {
          namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": ns } },
        },
      },
    });
    try {
      // The API server evaluates a new policy once its informer has it: until a dry run says so.
      const probe = {
        metadata: { name: "greedy", labels: { "pod.cubeplex.ai/box": "greedy" } },
        spec: { containers: [{ name: "c", image: "py:3" }] },
      };
      for (let i = 0; i < 100; i++) {
        if ((await kube.create(`${paths.pods(ns)}?dryRun=All`, probe)).status === 422) break;
        await new Promise(r => setTimeout(r, 100));
      }
      await h.createBox("greedy", { templateRef: "python" });
      const box = await h.waitPhase("greedy", "Failed", "APIError");
      // The API server's own words, so that the user sees what to fix.
      expect(box.status.message).toMatch(/^createPod failed: HTTP 422: .*no Pod of greedy here/);
      expect(await h.podsOf("greedy")).toEqual([]);
      await h.waitEvent("greedy", "APIError");
    } finally {
      await kube.delete(`${binding}/${policy}`);
      await kube.delete(`${vap}/${policy}`);
    }
  });
});

describe("refusals that can heal", () => {
  it("a Pod refused by admission: Pending (Forbidden) with the cause, Running once it is gone", async () => {
    const runtimeClass = `later-${Math.random().toString(36).slice(2, 7)}`;
    await kube.mustCreate(
      paths.podtemplates(ns),
      podTemplate("later", { ...TEMPLATE, runtimeClassName: runtimeClass }),
    );
    await h.createBox("patient", { templateRef: "later" });
    const waiting = await h.waitPhase("patient", "Pending", "Forbidden");
    expect(waiting.status.message).toContain(`RuntimeClass "${runtimeClass}" not found`);
    expect(waiting.status.message).toMatch(/; retrying$/);
    await h.waitEvent("patient", "Forbidden");
    // The cause goes: the next retry starts the box.
    const rc = `/apis/node.k8s.io/v1/runtimeclasses`;
    await kube.mustCreate(rc, {
      apiVersion: "node.k8s.io/v1",
      kind: "RuntimeClass",
      metadata: { name: runtimeClass },
      handler: "runc",
    });
    try {
      const box = await h.waitPhase("patient", "Running", undefined, 60_000);
      expect(box.status.podName).toBe("patient");
    } finally {
      await kube.delete(`${rc}/${runtimeClass}`);
    }
  });
});

describe("names taken by objects that are not the box's", () => {
  it("a PVC of the box's volume name: Failed (VolumesInUse), the PVC neither mounted nor changed", async () => {
    const squatter = await kube.mustCreate(paths.pvcs(ns), {
      metadata: { name: "squat-workspace", labels: { owner: "someone-else" } },
      spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } },
    });
    await h.createBox("squat", { templateRef: "python" });
    const box = await h.waitPhase("squat", "Failed", "VolumesInUse");
    expect(box.status.message).toBe(
      'PVC squat-workspace exists and is not this box\'s; volume key "squat" is in use',
    );
    // Nothing was made next to it: no Pod, and not the rootfs either (creation stops at the conflict).
    expect(await h.podsOf("squat")).toEqual([]);
    expect((await kube.get(paths.pods(ns, "squat"))).status).toBe(404);
    expect((await kube.get(paths.pvcs(ns, "squat-rootfs-g1"))).status).toBe(404);
    await h.waitEvent("squat", "VolumesInUse");
    // Deleting the box leaves the other PVC as it was.
    await kube.delete(paths.podboxes(ns, "squat"));
    await h.waitGone(paths.podboxes(ns, "squat"));
    const after = (await kube.get(paths.pvcs(ns, "squat-workspace"))).body;
    // (kwok binds it, so its status moves; its metadata is the user's and stays theirs.)
    expect(after.metadata).toMatchObject({
      uid: squatter.metadata.uid,
      labels: { owner: "someone-else" },
    });
    expect(after.metadata.ownerReferences).toBeUndefined();
    expect(after.metadata.deletionTimestamp).toBeUndefined();
  });

  it("a Pod of the box's name: Failed (PodNameInUse), the Pod left alone; once it is gone, a poke starts the box", async () => {
    const squatter = await kube.mustCreate(paths.pods(ns), {
      metadata: { name: "taken" },
      spec: { containers: [{ name: "c", image: "busybox:1" }] },
    });
    await h.createBox("taken", { templateRef: "python" });
    const box = await h.waitPhase("taken", "Failed", "PodNameInUse");
    expect(box.status.message).toBe(
      "Pod taken exists and is not this box's; the box's Pod takes that name",
    );
    expect(await h.podsOf("taken")).toEqual([]);
    expect(await h.pvcsOf("taken")).toEqual(["taken-rootfs-g1", "taken-workspace"]);
    const pod = (await kube.get(paths.pods(ns, "taken"))).body;
    expect(pod.metadata.uid).toBe(squatter.metadata.uid);
    expect(pod.metadata.deletionTimestamp).toBeUndefined();
    expect(pod.metadata.ownerReferences).toBeUndefined();
    // The user removes the other Pod and touches the box: it starts on its own volumes.
    await kube.delete(paths.pods(ns, "taken"));
    await h.waitGone(paths.pods(ns, "taken"));
    await kube.mergePatch(paths.podboxes(ns, "taken"), {
      metadata: { annotations: { poke: "1" } },
    });
    await h.waitPhase("taken", "Running", "Started");
    expect(await h.podsOf("taken")).toEqual(["taken"]);
  });
});

describe("a namespace being deleted", () => {
  it("refuses creates with the cause the reconcilers recognise as nothing to do", async () => {
    const doomed = await kube.namespace("it-doomed");
    // A finalizer keeps the namespace in its deletion while the create is tried.
    await kube.mustCreate(`/api/v1/namespaces/${doomed}/configmaps`, {
      metadata: { name: "hold", finalizers: ["test.cubeplex.ai/hold"] },
    });
    try {
      await kube.delete(`/api/v1/namespaces/${doomed}`);
      const refused = await kube.create(paths.pvcs(doomed), {
        metadata: { name: "late" },
        spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } },
      });
      expect(refused.status).toBe(403);
      // Shaped as the module's client throws it: the HTTP status, and the Status body as `data`.
      expect(isNamespaceTerminating({ status: refused.status, data: refused.body })).toBe(true);
    } finally {
      await kube.mergePatch(`/api/v1/namespaces/${doomed}/configmaps/hold`, {
        metadata: { finalizers: null },
      });
    }
  });
});

describe("a standby watch that lags the boxes", () => {
  it("a claim that finds no standby in the index reads the pool before it starts cold", async () => {
    // The index never hears from its watch: every claim must find its standby by its own read.
    restartModule("standby-watch-lags");
    try {
      await readyPool("lagging", 2);
      await h.createBox("first", { warmPoolRef: "lagging" });
      const first = await h.waitPhase("first", "Running", "WarmPoolClaimed");
      await h.createBox("second", { warmPoolRef: "lagging" });
      const second = await h.waitPhase("second", "Running", "WarmPoolClaimed");
      expect(second.status.podName).not.toBe(first.status.podName);
      // Both taken: the read finds none ready, and the third starts cold.
      await h.createBox("third", { warmPoolRef: "lagging" });
      await h.waitPhase("third", "Running", "Started");
      expect(await h.podsOf("third")).toEqual(["third"]);
      // The module started fresh for this test, so its counter holds this test's reads alone: the
      // first claim's read found both standbys (the second came from the index), the third's none.
      const metrics = await (await fetch("http://127.0.0.1:8081/metrics")).text();
      expect(metrics).toContain('cubepod_claim_index_misses_total{found="standby"} 1\n');
      expect(metrics).toContain('cubepod_claim_index_misses_total{found="none"} 1\n');
    } finally {
      restartModule();
    }
    await kube.delete(paths.podwarmpools(ns, "lagging"));
    for (const name of ["first", "second", "third"]) {
      await kube.delete(paths.podboxes(ns, name));
      await h.waitGone(paths.podboxes(ns, name));
    }
  });
});

describe("restart safety: the module stopped in the middle of a transition", () => {
  it("after a claim's Pod patch, before the box status: the restart finishes it, claims no more", async () => {
    await readyPool("crashy", 2);
    restartModule("claimStandby:1");
    try {
      await h.createBox("claimed-once", { warmPoolRef: "crashy" });
      // The Pod patch landed: the box controls a standby's Pod (still labelled as the pool's),
      // and its status says nothing yet.
      const ownedByBox = (p: Obj) =>
        (p.metadata.ownerReferences ?? []).some(
          (r: Obj) => r.controller && r.kind === "PodBox" && r.name === "claimed-once",
        );
      const [pod] = (
        await kube.waitForItems(
          `${paths.pods(ns)}?labelSelector=${encodeURIComponent("pod.cubeplex.ai/pool=crashy")}`,
          items => items.filter(ownedByBox).length === 1,
        )
      ).filter(ownedByBox);
      expect(
        (await kube.get(paths.podboxes(ns, "claimed-once"))).body.status?.phase,
      ).toBeUndefined();
      restartModule();
      const box = await h.waitPhase("claimed-once", "Running");
      expect(box.status.podName).toBe(pod.metadata.name);
      // The full reconcile also gave the Pod its box's label, which the lost finish would have.
      await kube.waitFor(
        paths.pods(ns, pod.metadata.name),
        o => o?.metadata.labels?.["pod.cubeplex.ai/box"] === "claimed-once",
      );
      expect(await h.podsOf("claimed-once")).toEqual([pod.metadata.name]);
      // The other standby is still the pool's, and the claimed one's volumes are the box's.
      const pool = await kube.waitFor(
        paths.podwarmpools(ns, "crashy"),
        o => o?.status?.readyReplicas === 2,
      );
      expect(pool!.status.readyReplicas).toBe(2);
      const key = pod.metadata.labels["pod.cubeplex.ai/volume-key"];
      await kube.waitForItems(
        `${paths.pvcs(ns)}?labelSelector=${encodeURIComponent(`pod.cubeplex.ai/volume-key=${key}`)}`,
        items =>
          items.length === 2 &&
          items.every(p =>
            p.metadata.ownerReferences?.some((o: Obj) => o.kind === "PodBox" && o.controller),
          ),
      );
    } finally {
      restartModule();
    }
    await kube.delete(paths.podwarmpools(ns, "crashy"));
    await kube.delete(paths.podboxes(ns, "claimed-once"));
    await h.waitGone(paths.podboxes(ns, "claimed-once"));
  });

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

  it("claims whose finish waits: a Retain box's does not; an event runs it first; a restart finishes it, after the pool's deletion too", async () => {
    // Claims finish once quiet; here not for a minute, so that the module dies first.
    cluster("module", "kill");
    const slow = {
      CUBEPOD_CLAIM_FINISH_QUIET_MS: "60000",
      CUBEPOD_CLAIM_FINISH_MAX_DELAY_MS: "60000",
    };
    clusterWithEnv(slow, "module", "start");
    await readyPool("unfinished", 3);
    const claim = async (name: string, spec: object = {}) => {
      await h.createBox(name, { warmPoolRef: "unfinished", ...spec });
      return (await h.waitPhase(name, "Running", "WarmPoolClaimed")) as Obj;
    };
    const finished = async (box: Obj) => {
      await kube.waitFor(paths.podboxes(ns, box.metadata.name), o =>
        (o?.metadata.finalizers ?? []).includes("pod.cubeplex.ai/cleanup"),
      );
      await kube.waitFor(
        paths.pods(ns, box.status.podName),
        o => !o || o.metadata.labels?.["pod.cubeplex.ai/box"] === box.metadata.name,
      );
      for (const name of [box.status.rootfsPVCName, box.status.workspacePVCName]) {
        await kube.waitFor(
          paths.pvcs(ns, name),
          o =>
            o?.metadata.labels?.["pod.cubeplex.ai/box"] === box.metadata.name &&
            o?.metadata.ownerReferences?.length === 1 &&
            o?.metadata.ownerReferences[0].uid === box.metadata.uid,
        );
      }
    };
    const claimant = await claim("claimant");
    const sleeper = await claim("sleeper");
    // A box that keeps its volumes finishes at once: deleted without its finalizer, it would lose them.
    const keeper = await claim("keeper", { volumeReclaimPolicy: "Retain" });
    await finished(keeper);
    // The others wait: their PVCs are still the pool's and their Pod's, they have no finalizer.
    for (const box of [claimant, sleeper]) {
      const pvc = (await kube.get(paths.pvcs(ns, box.status.workspacePVCName))).body;
      expect(pvc.metadata.labels["pod.cubeplex.ai/pool"]).toBe("unfinished");
      expect(pvc.metadata.ownerReferences.map((r: Obj) => r.kind)).toEqual(["PodWarmPool", "Pod"]);
      const pod = (await kube.get(paths.pods(ns, box.status.podName))).body;
      expect(pod.metadata.labels["pod.cubeplex.ai/pool"]).toBe("unfinished");
      const stored = (await kube.get(paths.podboxes(ns, box.metadata.name))).body;
      expect(stored.metadata.finalizers).toBeUndefined();
    }
    // An event while the finish waits: the finish runs first, then the pause.
    await h.patchBox("sleeper", { desiredState: "Paused" });
    await h.waitPhase("sleeper", "Paused");
    await finished(sleeper);
    expect(await h.podsOf("sleeper")).toEqual([]);
    expect(
      (await kube.get(paths.podboxes(ns, "claimant"))).body.metadata.finalizers,
    ).toBeUndefined();
    await h.patchBox("sleeper", { desiredState: "Running" });
    const resumed = await h.waitPhase("sleeper", "Running", "Resumed");
    expect(resumed.status.workspacePVCName).toBe(sleeper.status.workspacePVCName);
    // The module dies with the claimant's finish still waiting; the pool is deleted meanwhile. Its
    // garbage collection leaves the PVCs that the claimed Pod owns.
    cluster("module", "kill");
    await kube.delete(paths.podwarmpools(ns, "unfinished"));
    await h.waitGone(paths.podwarmpools(ns, "unfinished"));
    for (const name of [claimant.status.rootfsPVCName, claimant.status.workspacePVCName]) {
      const left = await kube.waitFor(
        paths.pvcs(ns, name),
        o => o?.metadata.ownerReferences?.length === 1,
      );
      expect(left?.metadata.ownerReferences[0].kind).toBe("Pod");
    }
    cluster("module", "start");
    await finished(claimant);
    expect(await h.podsOf("claimant")).toEqual([claimant.status.podName]);
    for (const box of [claimant, sleeper]) {
      await kube.delete(paths.podboxes(ns, box.metadata.name));
      await h.waitGone(paths.podboxes(ns, box.metadata.name));
      // Their volume key is the standby's name.
      await h.waitPVCs(box.status.podName, []);
    }
    await kube.delete(paths.podboxes(ns, "keeper"));
    await h.waitGone(paths.podboxes(ns, "keeper"));
    const kept = (await kube.get(paths.pvcs(ns, keeper.status.workspacePVCName))).body;
    expect(kept.metadata.ownerReferences).toBeUndefined();
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
