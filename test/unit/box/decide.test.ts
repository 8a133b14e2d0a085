import { describeAction } from "../../../capabilities/kit/object-actions";
import type { PodBoxStatus } from "../../../capabilities/api/podbox";
import { decideBox, readsFromCache } from "../../../capabilities/box/decide";
import type { ObservedPod, ObservedPVC } from "../../../capabilities/box/types";
import {
  claimedStatus as statusOfClaim,
  claimPatch,
  mayClaim,
} from "../../../capabilities/claim/decide";
import { template } from "../fixtures";
import { EARLIER, NOW, obs, pod, pvc, snap, VOLUMES } from "./observation";
import { SNAPSHOT_FAILED_RECHECK_MS, SNAPSHOT_RECHECK_MS } from "../../../capabilities/box/decide";

/** The PVCs the plan's new Pod mounts, in its volumes' order; none without a new Pod. */
const podClaims = (p: ReturnType<typeof decideBox>) => {
  const created = p.actions.find(a => a.type === "createPod");
  return created?.type === "createPod"
    ? created.pod.spec?.volumes?.map(v => v.persistentVolumeClaim?.claimName)
    : [];
};
const types = (p: ReturnType<typeof decideBox>) => p.actions.map(describeAction);
/** A status as the operator wrote it for a box Running on generation `gen`. */
const running = (reason: PodBoxStatus["reason"] = "Started", gen = 1): PodBoxStatus =>
  decideBox(
    obs({
      status: { phase: "Pending", reason, rootfsGeneration: undefined },
      pvcs: [pvc("box-workspace"), pvc(`box-rootfs-g${gen}`)],
      pods: [pod({ rootfsClaim: `box-rootfs-g${gen}` })],
      spec: { rootfsGeneration: gen },
    }),
  ).status;

describe("decideBox: Running", () => {
  it("reports the running Pod's name, IP and UID, which the gateway's credential names", () => {
    expect(running()).toMatchObject({
      phase: "Running",
      podName: "box",
      podIP: "127.64.0.7",
      podUID: "pod-uid-1",
      poddURL: "http://127.64.0.7:49983",
    });
  });

  it("creates both PVCs, then the Pod, for a new box", () => {
    const p = decideBox(obs({}));
    expect(types(p)).toEqual([
      "createPVC box-workspace",
      "createPVC box-rootfs-g1",
      "createPod box",
    ]);
    expect(p.status).toMatchObject({
      phase: "Pending",
      reason: "Started",
      podName: "box",
      observedGeneration: 4,
    });
    expect(p.events).toEqual([
      { type: "Normal", reason: "Started", message: expect.stringContaining("Pending") },
    ]);
    const created = p.actions.filter(a => a.type === "createPVC" || a.type === "createPod");
    for (const a of created) {
      const meta =
        a.type === "createPod"
          ? a.pod.metadata
          : a.type === "createPVC"
            ? a.pvc.metadata
            : undefined;
      expect(meta?.ownerReferences).toEqual([
        expect.objectContaining({ kind: "PodBox", name: "box", uid: "uid-1", controller: true }),
      ]);
    }
  });

  it("creates only the Pod when the PVCs exist (restart after the PVCs, before the Pod)", () => {
    const p = decideBox(obs({ pvcs: VOLUMES, status: { phase: "Pending", reason: "Started" } }));
    expect(types(p)).toEqual(["createPod box"]);
  });

  it("labels the Pod of a box with egress None, which its template's egress policy leaves out", () => {
    const labelsOf = (spec: Record<string, unknown>) => {
      const p = decideBox(
        obs({ spec, pvcs: VOLUMES, status: { phase: "Pending", reason: "Started" } }),
      );
      const create = p.actions.find(a => a.type === "createPod");
      return create?.type === "createPod" ? create.pod.metadata?.labels : undefined;
    };
    expect(labelsOf({ egress: "None" })).toMatchObject({ "pod.cubeplex.ai/egress": "none" });
    expect(labelsOf({})).not.toHaveProperty(["pod.cubeplex.ai/egress"]);
  });

  it("creates the missing PVC only", () => {
    expect(types(decideBox(obs({ pvcs: [pvc("box-workspace")] })))).toEqual([
      "createPVC box-rootfs-g1",
      "createPod box",
    ]);
  });

  it("waits for the Pod to be ready", () => {
    const p = decideBox(
      obs({ pvcs: VOLUMES, pods: [pod({ phase: "Pending", ready: false, podIP: undefined })] }),
    );
    expect(p.actions).toEqual([]);
    expect(p.status).toMatchObject({
      phase: "Pending",
      message: "waiting for Pod box to be ready",
    });
    expect(p.status.podIP).toBeUndefined();
  });

  it("reports Running with the Pod IP and the podd URL once the Pod is ready", () => {
    const p = decideBox(
      obs({ pvcs: VOLUMES, pods: [pod()], status: { phase: "Pending", reason: "Started" } }),
    );
    expect(p.actions).toEqual([]);
    expect(p.status).toMatchObject({
      phase: "Running",
      reason: "Started",
      podName: "box",
      podIP: "127.64.0.7",
      poddURL: "http://127.64.0.7:49983",
      rootfsPVCName: "box-rootfs-g1",
      workspacePVCName: "box-workspace",
      rootfsGeneration: 1,
    });
    expect(p.status.conditions).toEqual([
      {
        type: "Ready",
        status: "True",
        observedGeneration: 4,
        lastTransitionTime: NOW,
        reason: "Started",
        message: "running",
      },
    ]);
  });

  it("uses the template's envd port in the podd URL", () => {
    const p = decideBox(
      obs({ pvcs: VOLUMES, pods: [pod()], template: template({ envdPort: 5000 }) }),
    );
    expect(p.status.poddURL).toBe("http://127.64.0.7:5000");
  });

  it("is idempotent: its own status fed back changes nothing, writes no event", () => {
    const first = decideBox(obs({ pvcs: VOLUMES, pods: [pod()] }));
    const again = decideBox(obs({ pvcs: VOLUMES, pods: [pod()], status: first.status }));
    expect(again).toEqual({ actions: [], status: first.status, events: [] });
  });

  it("keeps the Ready condition's transition time while its status holds", () => {
    const status = running();
    status.conditions![0].lastTransitionTime = EARLIER;
    const p = decideBox(obs({ pvcs: VOLUMES, pods: [pod()], status }));
    expect(p.status.conditions![0].lastTransitionTime).toBe(EARLIER);
  });

  it("says why a Pod keeps failing before it is ready, as a Warning, and leaves it to the kubelet", () => {
    const failure = "container rootfs-fill exited 1 (Error): podd-init: no space left on device";
    const p = decideBox(
      obs({ pvcs: VOLUMES, pods: [pod({ ready: false, phase: "Pending", restarts: 3, failure })] }),
    );
    expect(types(p)).toEqual([]);
    expect(p.status).toMatchObject({
      phase: "Pending",
      reason: "PodNotStarting",
      message: `Pod box is not starting: ${failure}; the kubelet retries it`,
    });
    expect(p.events[0]).toMatchObject({ type: "Warning", reason: "PodNotStarting" });
  });

  it("replaces a Pod that ended", () => {
    const failed = decideBox(
      obs({ pvcs: VOLUMES, pods: [pod({ phase: "Failed", ready: false })], status: running() }),
    );
    expect(types(failed)).toEqual(["deletePod box"]);
    expect(failed.status).toMatchObject({ phase: "Pending", reason: "PodFailed" });
    expect(failed.events[0].type).toBe("Warning");
    const after = decideBox(obs({ pvcs: VOLUMES, status: failed.status }));
    expect(types(after)).toEqual(["createPod box"]);
    expect(after.status.reason).toBe("Started");
  });

  it("deletes a second Pod of the same box", () => {
    const p = decideBox(
      obs({ pvcs: VOLUMES, pods: [pod(), pod({ name: "box-extra" })], status: running() }),
    );
    expect(types(p)).toEqual(["deletePod box-extra"]);
    expect(p.status.phase).toBe("Running");
  });

  it("waits for a Pod being deleted before creating it again (same name)", () => {
    const p = decideBox(
      obs({
        pvcs: VOLUMES,
        pods: [pod({ deleting: true })],
        status: { phase: "Paused", rootfsGeneration: 1 },
      }),
    );
    expect(p.actions).toEqual([]);
    expect(p.status).toMatchObject({
      phase: "Pending",
      reason: "Resumed",
      message: "waiting for the previous Pod to terminate",
    });
  });
});

describe("decideBox: template and volumes", () => {
  it("waits for a missing template, creating nothing", () => {
    const p = decideBox(obs({ template: null }));
    expect(p.actions).toEqual([]);
    expect(p.waitingFor).toEqual([{ kind: "PodTemplate", name: "python" }]);
    expect(p.status).toMatchObject({
      phase: "Pending",
      reason: "TemplateNotFound",
      message: "PodTemplate python not found in namespace ns",
    });
    expect(p.events[0]).toMatchObject({ type: "Warning", reason: "TemplateNotFound" });
  });

  it("gives its namespace a copy of the tenant default of its template's name, then waits", () => {
    const spec = { image: "base:1", runtimeClassName: "gvisor" };
    const p = decideBox(
      obs({ template: null, tenantDefault: { namespace: "defaults", name: "python", spec } }),
    );
    expect(p.actions).toEqual([
      {
        type: "createTemplate",
        template: {
          apiVersion: "pod.cubeplex.ai/v1alpha1",
          kind: "PodTemplate",
          metadata: {
            name: "python",
            annotations: { "pod.cubeplex.ai/tenant-default": "defaults/python" },
          },
          spec,
        },
      },
    ]);
    expect(p.waitingFor).toEqual([{ kind: "PodTemplate", name: "python" }]);
    expect(p.status).toMatchObject({
      phase: "Pending",
      reason: "TemplateNotFound",
      message:
        "PodTemplate python not found in namespace ns: making it from the tenant default defaults/python",
    });
  });

  it("keeps a running Pod whose template was deleted, and says so", () => {
    const p = decideBox(obs({ template: null, pvcs: VOLUMES, pods: [pod()], status: running() }));
    expect(p.actions).toEqual([]);
    expect(p.status).toMatchObject({
      phase: "Running",
      podIP: "127.64.0.7",
      reason: "TemplateNotFound",
      message: "PodTemplate python not found: the running Pod is kept, but it cannot be recreated",
    });
  });

  it("records the template it builds from, and keeps that record while the template is gone", () => {
    const started = decideBox(obs({ spec: { templateRef: undefined, warmPoolRef: "pool" } }));
    expect(started.status.templateName).toBe("python");
    const kept = decideBox(
      obs({
        template: null,
        pvcs: VOLUMES,
        pods: [pod()],
        status: { ...running(), templateName: "older" },
      }),
    );
    expect(kept.status.templateName).toBe("older");
  });

  it("starts once the template appears", () => {
    const waiting = decideBox(obs({ template: null })).status;
    const p = decideBox(obs({ status: waiting }));
    expect(types(p)).toHaveLength(3);
    expect(p.status.reason).toBe("Started");
  });

  it("waits for its pool, and for the pool's template once that is known", () => {
    const spec = { templateRef: undefined, warmPoolRef: "pool" };
    const noPool = decideBox(obs({ spec, template: null }));
    expect(noPool.waitingFor).toEqual([{ kind: "PodWarmPool", name: "pool" }]);
    const noTemplate = decideBox({ ...obs({ spec, template: null }), templateName: "python2" });
    expect(noTemplate.waitingFor).toEqual([
      { kind: "PodTemplate", name: "python2" },
      { kind: "PodWarmPool", name: "pool" },
    ]);
  });

  it("waits while one of its PVCs is being deleted", () => {
    const p = decideBox(
      obs({ pvcs: [pvc("box-workspace", { deleting: true }), pvc("box-rootfs-g1")] }),
    );
    expect(p.actions).toEqual([]);
    expect(p.waitingFor).toEqual([{ kind: "PersistentVolumeClaim", name: "box-workspace" }]);
    expect(p.status.message).toContain("PVC box-workspace is being deleted");
  });

  it("refuses volumes that belong to another object", () => {
    const p = decideBox(obs({ pvcs: [pvc("box-workspace", { owner: "other" })] }));
    expect(p.actions).toEqual([]);
    expect(p.status).toMatchObject({ phase: "Failed", reason: "VolumesInUse" });
  });
});

describe("decideBox: names another object holds", () => {
  it("fails on a PVC name that is taken, creating and deleting nothing", () => {
    const p = decideBox(
      obs({
        pvcs: [pvc("box-rootfs-g1")],
        conflict: { kind: "PersistentVolumeClaim", name: "box-workspace" },
      }),
    );
    expect(p.actions).toEqual([]);
    expect(p.status).toMatchObject({
      phase: "Failed",
      reason: "VolumesInUse",
      message: 'PVC box-workspace exists and is not this box\'s; volume key "box" is in use',
    });
    expect(p.events).toEqual([
      expect.objectContaining({ type: "Warning", reason: "VolumesInUse" }),
    ]);
    expect(p.waitingFor).toBeUndefined();
  });

  it("fails on a Pod name that is taken, leaving its own volumes and any Pod of its own alone", () => {
    const p = decideBox(
      obs({
        pvcs: VOLUMES,
        pods: [pod({ name: "box-old", phase: "Failed" })],
        conflict: { kind: "Pod", name: "box" },
      }),
    );
    expect(p.actions).toEqual([]);
    expect(p.status).toMatchObject({
      phase: "Failed",
      reason: "PodNameInUse",
      message: "Pod box exists and is not this box's; the box's Pod takes that name",
    });
  });

  it("starts over once the name is free (a problem reason is not kept)", () => {
    const failed = decideBox(obs({ conflict: { kind: "Pod", name: "box" } })).status;
    const p = decideBox(obs({ status: failed }));
    expect(types(p)).toEqual([
      "createPVC box-workspace",
      "createPVC box-rootfs-g1",
      "createPod box",
    ]);
    expect(p.status.reason).toBe("Started");
  });
});

describe("decideBox: fork", () => {
  const parent = {
    state: "ready" as const,
    rootfsPVCName: "parent-rootfs-g2",
    workspacePVCName: "parent-workspace",
  };

  it("clones both PVCs from the parent's", () => {
    const p = decideBox(obs({ spec: { forkFrom: "parent" }, parent }));
    expect(types(p)).toEqual([
      "createPVC box-workspace",
      "createPVC box-rootfs-g1",
      "createPod box",
    ]);
    const sources = p.actions.flatMap(a =>
      a.type === "createPVC" ? [a.pvc.spec?.dataSource?.name] : [],
    );
    expect(sources).toEqual(["parent-workspace", "parent-rootfs-g2"]);
    expect(p.status.reason).toBe("ForkCloned");
  });

  it.each([
    ["missing", "Pending", "ForkParentNotFound", [{ kind: "PodBox", name: "parent" }]],
    ["notReady", "Pending", "ForkParentNotReady", [{ kind: "PodBox", name: "parent" }]],
    ["deleting", "Failed", "ForkParentDeleting", undefined],
  ] as const)("with a parent %s: %s %s, nothing created", (state, phase, reason, waits) => {
    const p = decideBox(obs({ spec: { forkFrom: "parent" }, parent: { state } }));
    expect(p.actions).toEqual([]);
    expect(p.status).toMatchObject({ phase, reason });
    expect(p.waitingFor).toEqual(waits);
  });

  it("needs no parent once its own volumes exist", () => {
    const p = decideBox(
      obs({
        spec: { forkFrom: "parent" },
        parent: { state: "missing" },
        pvcs: VOLUMES,
        pods: [pod()],
      }),
    );
    expect(p.actions).toEqual([]);
    expect(p.status).toMatchObject({ phase: "Running", reason: "ForkCloned" });
  });

  it("finishes a clone interrupted after the first PVC with a clone, not an empty volume", () => {
    const p = decideBox(
      obs({ spec: { forkFrom: "parent" }, parent, pvcs: [pvc("box-workspace")] }),
    );
    const rootfs = p.actions.find(a => a.type === "createPVC");
    expect(rootfs?.type === "createPVC" && rootfs.pvc.spec?.dataSource?.name).toBe(
      "parent-rootfs-g2",
    );
  });
});

describe("decideBox: fork with forkStrategy Copy", () => {
  const parent = {
    state: "ready" as const,
    rootfsPVCName: "parent-rootfs-g2",
    workspacePVCName: "parent-workspace",
  };
  const copyTemplate = template({ forkStrategy: "Copy" });
  const copying = (p: Partial<ObservedPVC> = {}) => [
    pvc("box-workspace", { copyFrom: "parent-workspace", ...p }),
    pvc("box-rootfs-g1", { copyFrom: "parent-rootfs-g2", ...p }),
  ];
  const copyPod = (extra: Partial<ObservedPod> = {}) =>
    pod({ name: "box.copy", role: "copy", phase: "Running", ready: false, ...extra });
  const fork = (over: Parameters<typeof obs>[0]) =>
    decideBox(obs({ spec: { forkFrom: "parent" }, parent, template: copyTemplate, ...over }));

  it("creates empty PVCs and the copy Pod, not the box's Pod", () => {
    const p = fork({});
    expect(types(p)).toEqual([
      "createPVC box-workspace",
      "createPVC box-rootfs-g1",
      "createPod box.copy",
    ]);
    const copy = p.actions[2];
    expect(copy.type === "createPod" && copy.pod.spec?.volumes).toEqual([
      {
        name: "source-rootfs",
        persistentVolumeClaim: { claimName: "parent-rootfs-g2", readOnly: true },
      },
      { name: "rootfs", persistentVolumeClaim: { claimName: "box-rootfs-g1" } },
      {
        name: "source-workspace",
        persistentVolumeClaim: { claimName: "parent-workspace", readOnly: true },
      },
      { name: "workspace", persistentVolumeClaim: { claimName: "box-workspace" } },
    ]);
    expect(p.status).toMatchObject({ phase: "Pending", reason: "ForkCopying" });
    expect(p.events[0]).toMatchObject({ type: "Normal", reason: "ForkCopying" });
  });

  it("waits while the copy runs, whatever the parent does meanwhile", () => {
    const p = fork({ parent: { state: "missing" }, pvcs: copying(), pods: [copyPod()] });
    expect(p.actions).toEqual([]);
    expect(p.status).toMatchObject({ phase: "Pending", reason: "ForkCopying" });
  });

  it("recreates a copy Pod that is gone, from the PVCs' own record of their sources", () => {
    const p = fork({ parent: { state: "missing" }, pvcs: copying() });
    expect(types(p)).toEqual(["createPod box.copy"]);
  });

  it("marks both volumes copied, then deletes the copy Pod, once it Succeeded", () => {
    const p = fork({ pvcs: copying(), pods: [copyPod({ phase: "Succeeded" })] });
    expect(types(p)).toEqual([
      "markCopied box-workspace",
      "markCopied box-rootfs-g1",
      "deletePod box.copy",
    ]);
    expect(p.status.phase).toBe("Pending");
  });

  it("starts the box's Pod only once the volumes are copied and the copy Pod is gone", () => {
    const copied = copying({ copied: true });
    expect(
      types(fork({ pvcs: copied, pods: [copyPod({ phase: "Succeeded", deleting: true })] })),
    ).toEqual([]);
    expect(types(fork({ pvcs: copied, pods: [copyPod({ phase: "Succeeded" })] }))).toEqual([
      "deletePod box.copy",
    ]);
    const p = fork({ pvcs: copied });
    expect(types(p)).toEqual(["createPod box"]);
    expect(p.status).toMatchObject({ phase: "Pending", reason: "ForkCloned" });
  });

  it("never starts the box on a half-copied volume: one marked, the other not, copies again", () => {
    const half = [
      pvc("box-workspace", { copyFrom: "parent-workspace", copied: true }),
      pvc("box-rootfs-g1", { copyFrom: "parent-rootfs-g2" }),
    ];
    expect(types(fork({ pvcs: half }))).toEqual(["createPod box.copy"]);
  });

  it("reports failed attempts the kubelet retries, and replaces a copy Pod that Failed", () => {
    const failure = "container copy exited 1 (Error)";
    const retrying = fork({ pvcs: copying(), pods: [copyPod({ restarts: 2, failure })] });
    expect(retrying.actions).toEqual([]);
    expect(retrying.status).toMatchObject({ phase: "Pending", reason: "ForkCopyFailed" });
    expect(retrying.status.message).toContain("attempt 2 failed (container copy exited 1 (Error))");
    expect(retrying.events[0]).toMatchObject({ type: "Warning", reason: "ForkCopyFailed" });

    const failed = fork({ pvcs: copying(), pods: [copyPod({ phase: "Failed", failure })] });
    expect(types(failed)).toEqual(["deletePod box.copy"]);
    expect(failed.status.reason).toBe("ForkCopyFailed");
    // The next pass, with the failed Pod still going, waits for it before starting another.
    expect(types(fork({ pvcs: copying(), pods: [copyPod({ deleting: true })] }))).toEqual([]);
  });

  it("runs, once copied, as a fork whose volumes were copied", () => {
    const p = fork({
      status: { phase: "Pending", reason: "ForkCopying" },
      pvcs: copying({ copied: true }),
      pods: [pod()],
    });
    expect(p.status).toMatchObject({
      phase: "Running",
      reason: "ForkCloned",
      message: "running on volumes copied from the parent",
    });
  });

  it("deletes the copy Pod with the rest on pause and delete", () => {
    const paused = fork({
      spec: { forkFrom: "parent", desiredState: "Paused" },
      pvcs: copying(),
      pods: [copyPod()],
    });
    expect(types(paused)).toEqual(["deletePod box.copy"]);
    const deleted = fork({ deleting: true, pvcs: copying(), pods: [copyPod()] });
    expect(types(deleted)).toContain("deletePod box.copy");
    expect(deleted.cleanupDone).toBe(false);
  });
});

describe("decideBox: a fork created paused takes VolumeSnapshots", () => {
  const snapshotting = template({ volumeSnapshotClassName: "snaps" });
  const parent = {
    state: "ready" as const,
    rootfsPVCName: "parent-rootfs-g2",
    workspacePVCName: "parent-workspace",
    rootfsPoddImage: "podd:1",
  };
  const paused = (over: Parameters<typeof obs>[0] = {}) =>
    decideBox(
      obs({
        spec: { forkFrom: "parent", desiredState: "Paused" },
        template: snapshotting,
        parent,
        ...over,
      }),
    );

  it("takes the parent's current volumes as VolumeSnapshots of the class, with no Pod nor PVC", () => {
    const p = paused();
    expect(types(p)).toEqual([
      "createVolumeSnapshot box-rootfs-snapshot",
      "createVolumeSnapshot box-workspace-snapshot",
    ]);
    const [rootfs, workspace] = p.actions.map(a =>
      a.type === "createVolumeSnapshot" ? a.snapshot : undefined,
    );
    expect(rootfs).toMatchObject({
      apiVersion: "snapshot.storage.k8s.io/v1",
      metadata: {
        namespace: "ns",
        labels: { "pod.cubeplex.ai/box": "box", "pod.cubeplex.ai/volume": "rootfs" },
        annotations: { "pod.cubeplex.ai/podd-image": "podd:1" },
        ownerReferences: [{ kind: "PodBox", name: "box", uid: "uid-1", controller: true }],
      },
      spec: {
        volumeSnapshotClassName: "snaps",
        source: { persistentVolumeClaimName: "parent-rootfs-g2" },
      },
    });
    expect(workspace?.spec.source.persistentVolumeClaimName).toBe("parent-workspace");
    expect(p.status).toMatchObject({ phase: "Pending", reason: "Snapshotting" });
    expect(p.recheckAfterMs).toBe(SNAPSHOT_RECHECK_MS);
  });

  it("takes only the one missing after an interrupted pass", () => {
    expect(types(paused({ snapshots: [snap("rootfs", { ready: false })] }))).toEqual([
      "createVolumeSnapshot box-workspace-snapshot",
    ]);
  });

  it.each([
    ["missing", "Pending", "ForkParentNotFound", [{ kind: "PodBox", name: "parent" }]],
    ["notReady", "Pending", "ForkParentNotReady", [{ kind: "PodBox", name: "parent" }]],
    ["deleting", "Failed", "ForkParentDeleting", undefined],
  ] as const)(
    "with a parent %s and no snapshot: %s %s, nothing taken",
    (state, phase, reason, waits) => {
      const p = paused({ parent: { state } });
      expect(p.actions).toEqual([]);
      expect(p.status).toMatchObject({ phase, reason });
      expect(p.waitingFor).toEqual(waits);
    },
  );

  it("waits, looking again soon, until both are cut and ready", () => {
    const p = paused({ snapshots: [snap("rootfs"), snap("workspace", { ready: false })] });
    expect(p.actions).toEqual([]);
    expect(p.status).toMatchObject({ phase: "Pending", reason: "Snapshotting" });
    expect(p.recheckAfterMs).toBe(SNAPSHOT_RECHECK_MS);
  });

  it("says so when the driver fails to cut one, with its error, and keeps looking", () => {
    const p = paused({
      snapshots: [snap("rootfs", { ready: false, error: "pool full" }), snap("workspace")],
    });
    expect(p.status).toMatchObject({
      phase: "Pending",
      reason: "SnapshotFailed",
      message: "VolumeSnapshot box-rootfs-snapshot: pool full",
    });
    expect(p.events).toEqual([expect.objectContaining({ type: "Warning" })]);
    expect(p.recheckAfterMs).toBe(SNAPSHOT_FAILED_RECHECK_MS);
  });

  it("is Snapshotted once both are ready, whatever became of the parent; replayed, nothing more", () => {
    const snapshots = [snap("rootfs", { poddImage: "podd:1" }), snap("workspace")];
    const p = paused({ snapshots, parent: { state: "missing" } });
    expect(p.actions).toEqual([]);
    expect(p.status).toMatchObject({
      phase: "Paused",
      reason: "Snapshotted",
      rootfsSnapshotName: "box-rootfs-snapshot",
      workspaceSnapshotName: "box-workspace-snapshot",
      rootfsPoddImage: "podd:1",
    });
    expect(p.status.podName).toBeUndefined();
    expect(p.status.rootfsPVCName).toBeUndefined();
    expect(p.recheckAfterMs).toBeUndefined();
    const again = paused({ snapshots, parent: { state: "missing" }, status: p.status });
    expect(again).toMatchObject({ actions: [], events: [], status: p.status });
  });

  it("fails on a VolumeSnapshot of its name that is another's, and leaves it alone", () => {
    const p = paused({ snapshots: [snap("rootfs", { owner: "other" })] });
    expect(p.actions).toEqual([]);
    expect(p.status).toMatchObject({ phase: "Failed", reason: "VolumesInUse" });
  });

  it("is a plain paused fork without a class, with volumes of its own, or as a snapshot's fork", () => {
    expect(paused({ template: template() })).toMatchObject({
      actions: [],
      status: { phase: "Paused", reason: "Paused" },
    });
    expect(types(paused({ pvcs: VOLUMES }))).toEqual([]);
    expect(paused({ pvcs: VOLUMES }).status.reason).toBe("Paused");
    const ofSnapshot = paused({
      parent: {
        state: "snapshots",
        rootfsSnapshotName: "parent-rootfs-snapshot",
        workspaceSnapshotName: "parent-workspace-snapshot",
      },
    });
    expect(ofSnapshot).toMatchObject({ actions: [], status: { reason: "Paused" } });
  });

  it("deletes its VolumeSnapshots when deleted, and forgets them once its Pods are gone", () => {
    const snapshots = [snap("rootfs"), snap("workspace"), snap("workspace", { deleting: true })];
    const status = {
      phase: "Paused" as const,
      reason: "Snapshotted" as const,
      rootfsSnapshotName: "box-rootfs-snapshot",
      workspaceSnapshotName: "box-workspace-snapshot",
    };
    const p = paused({ deleting: true, snapshots: snapshots.slice(0, 2), status });
    expect(types(p)).toEqual([
      "deleteVolumeSnapshot box-rootfs-snapshot",
      "deleteVolumeSnapshot box-workspace-snapshot",
    ]);
    expect(p.cleanupDone).toBe(true);
    expect(p.status.rootfsSnapshotName).toBeUndefined();
    expect(types(paused({ deleting: true, snapshots: snapshots.slice(2), status }))).toEqual([]);
  });
});

describe("decideBox: a fork restores VolumeSnapshots", () => {
  const snapshots = {
    rootfsSnapshotName: "parent-rootfs-snapshot",
    workspaceSnapshotName: "parent-workspace-snapshot",
  };
  const sources = (p: ReturnType<typeof decideBox>) =>
    p.actions.flatMap(a => (a.type === "createPVC" ? [a.pvc.spec?.dataSource] : []));

  it("restores its parent's, with the podd they hold and no copy, whatever the fork strategy", () => {
    for (const forkStrategy of ["Clone", "Copy"]) {
      const p = decideBox(
        obs({
          spec: { forkFrom: "parent" },
          template: template({ forkStrategy, volumeSnapshotClassName: "snaps" }),
          parent: { state: "snapshots", ...snapshots, rootfsPoddImage: "podd:1" },
        }),
      );
      expect(types(p)).toEqual([
        "createPVC box-workspace",
        "createPVC box-rootfs-g1",
        "createPod box",
      ]);
      expect(sources(p)).toEqual([
        {
          apiGroup: "snapshot.storage.k8s.io",
          kind: "VolumeSnapshot",
          name: "parent-workspace-snapshot",
        },
        {
          apiGroup: "snapshot.storage.k8s.io",
          kind: "VolumeSnapshot",
          name: "parent-rootfs-snapshot",
        },
      ]);
      expect(p.status).toMatchObject({ reason: "ForkCloned", rootfsPoddImage: "podd:1" });
    }
  });

  it("restores its own when resumed, its parent gone; running, says so", () => {
    const status = {
      phase: "Paused" as const,
      reason: "Snapshotted" as const,
      rootfsSnapshotName: "box-rootfs-snapshot",
      workspaceSnapshotName: "box-workspace-snapshot",
    };
    const p = decideBox(
      obs({ spec: { forkFrom: "parent" }, status, parent: { state: "missing" } }),
    );
    expect(sources(p).map(s => s?.name)).toEqual(["box-workspace-snapshot", "box-rootfs-snapshot"]);
    expect(p.status).toMatchObject({ phase: "Pending", reason: "Resumed" });
    const up = decideBox(
      obs({
        spec: { forkFrom: "parent" },
        status: { ...p.status },
        parent: { state: "missing" },
        pvcs: VOLUMES,
        pods: [pod()],
      }),
    );
    expect(up.status).toMatchObject({
      phase: "Running",
      rootfsSnapshotName: "box-rootfs-snapshot",
    });
  });
});

describe("decideBox: rootfs reset", () => {
  const g1Running = running("Started", 1);

  it("deletes the Pod, creates the new rootfs, keeps the workspace and (while used) the old rootfs", () => {
    const p = decideBox(
      obs({ spec: { rootfsGeneration: 2 }, status: g1Running, pvcs: VOLUMES, pods: [pod()] }),
    );
    expect(types(p)).toEqual(["deletePod box", "createPVC box-rootfs-g2"]);
    expect(p.status).toMatchObject({
      phase: "Pending",
      reason: "RootFSReset",
      rootfsGeneration: 1,
    });
    expect(p.status.podIP).toBeUndefined();
  });

  it("deletes the old rootfs once no Pod uses it, and starts the Pod on the new one", () => {
    const pvcs = [...VOLUMES, pvc("box-rootfs-g2")];
    const waiting = decideBox(
      obs({
        spec: { rootfsGeneration: 2 },
        status: g1Running,
        pvcs,
        pods: [pod({ deleting: true })],
      }),
    );
    expect(waiting.actions).toEqual([]);
    const p = decideBox(obs({ spec: { rootfsGeneration: 2 }, status: waiting.status, pvcs }));
    expect(types(p)).toEqual(["deletePVC box-rootfs-g1", "createPod box"]);
    expect(podClaims(p)).toEqual(["box-rootfs-g2", "box-workspace"]);
  });

  it("reports the reset done when the Pod runs on the new generation", () => {
    const pvcs = [pvc("box-workspace"), pvc("box-rootfs-g2")];
    const p = decideBox(
      obs({
        spec: { rootfsGeneration: 2 },
        status: { ...g1Running, phase: "Pending", reason: "RootFSReset" },
        pvcs,
        pods: [pod({ rootfsClaim: "box-rootfs-g2" })],
      }),
    );
    expect(p.actions).toEqual([]);
    expect(p.status).toMatchObject({
      phase: "Running",
      reason: "RootFSReset",
      rootfsGeneration: 2,
      rootfsPVCName: "box-rootfs-g2",
      message: "running on a new rootfs (generation 2); workspace kept",
    });
    // And stays so: the next reconcile is a no-op.
    expect(
      decideBox(
        obs({
          spec: { rootfsGeneration: 2 },
          status: p.status,
          pvcs,
          pods: [pod({ rootfsClaim: "box-rootfs-g2" })],
        }),
      ).actions,
    ).toEqual([]);
  });

  it("replaces nothing for a status generation beyond the spec's with no rootfs of it", () => {
    const forged = { ...g1Running, rootfsGeneration: 9 };
    const p = decideBox(obs({ status: forged, pvcs: VOLUMES, pods: [pod()] }));
    expect(p.actions).toEqual([]);
    expect(p.status).toMatchObject({ phase: "Running", rootfsGeneration: 1 });
  });

  it("jumps straight to the newest generation when several resets pile up", () => {
    const p = decideBox(obs({ spec: { rootfsGeneration: 5 }, status: g1Running, pvcs: VOLUMES }));
    expect(types(p)).toEqual([
      "deletePVC box-rootfs-g1",
      "createPVC box-rootfs-g5",
      "createPod box",
    ]);
  });
});

describe("decideBox: volume key (re-attach)", () => {
  const keptBy = { owner: "none", retained: true } as const;
  const kept = [pvc("old-workspace", keptBy), pvc("old-rootfs-g3", keptBy)];

  it("adopts the kept PVCs at their generation and starts the Pod on them", () => {
    const p = decideBox(obs({ spec: { volumeKey: "old" }, pvcs: kept }));
    expect(types(p)).toEqual(["adoptPVC old-workspace", "adoptPVC old-rootfs-g3", "createPod box"]);
  });

  it("re-attaches no ownerless PVC the operator did not keep, and says whose key it is", () => {
    const stray = [
      pvc("old-workspace", { owner: "none" }),
      pvc("old-rootfs-g3", { owner: "none" }),
    ];
    const p = decideBox(obs({ spec: { volumeKey: "old" }, pvcs: stray }));
    expect(p.actions).toEqual([]);
    expect(p.status).toMatchObject({ phase: "Failed", reason: "VolumesInUse" });
  });

  it("takes no standby's volumes, even with a Pod of its own on that key", () => {
    const standby = [
      pvc("sb-workspace", { owner: "pool" }),
      pvc("sb-rootfs-g1", { owner: "pool" }),
    ];
    const p = decideBox(
      obs({ spec: { volumeKey: "sb" }, pvcs: standby, pods: [pod({ volumeKey: "sb" })] }),
    );
    expect(p.actions.filter(a => a.type === "adoptPVC")).toEqual([]);
    expect(p.status).toMatchObject({ phase: "Failed", reason: "VolumesInUse" });
  });

  it("waits when there is no workspace to re-attach", () => {
    const p = decideBox(obs({ spec: { volumeKey: "gone" } }));
    expect(p.actions).toEqual([]);
    expect(p.status).toMatchObject({ phase: "Pending", reason: "VolumesNotFound" });
    expect(p.waitingFor).toEqual([{ kind: "PersistentVolumeClaim", name: "gone-workspace" }]);
  });
});

describe("decideBox: Paused and resume", () => {
  it("deletes the Pod, clears the IP, keeps the volumes", () => {
    const p = decideBox(
      obs({ spec: { desiredState: "Paused" }, status: running(), pvcs: VOLUMES, pods: [pod()] }),
    );
    expect(types(p)).toEqual(["deletePod box"]);
    expect(p.status).toMatchObject({
      phase: "Pending",
      reason: "Paused",
      rootfsPVCName: "box-rootfs-g1",
    });
    expect(p.status.podIP).toBeUndefined();
    expect(p.status.poddURL).toBeUndefined();
  });

  it("is Paused once the Pod is gone, and stays so", () => {
    const p = decideBox(
      obs({ spec: { desiredState: "Paused" }, status: running(), pvcs: VOLUMES }),
    );
    expect(p.actions).toEqual([]);
    expect(p.status).toMatchObject({
      phase: "Paused",
      reason: "Paused",
      workspacePVCName: "box-workspace",
      rootfsGeneration: 1,
    });
    expect(p.status.conditions![0]).toMatchObject({ type: "Ready", status: "False" });
    const again = decideBox(
      obs({ spec: { desiredState: "Paused" }, status: p.status, pvcs: VOLUMES }),
    );
    expect(again).toEqual({ actions: [], status: p.status, events: [] });
  });

  it("resumes on the same PVCs", () => {
    const paused = decideBox(
      obs({ spec: { desiredState: "Paused" }, status: running(), pvcs: VOLUMES }),
    ).status;
    const p = decideBox(obs({ status: paused, pvcs: VOLUMES }));
    expect(types(p)).toEqual(["createPod box"]);
    expect(p.status.reason).toBe("Resumed");
    const up = decideBox(obs({ status: p.status, pvcs: VOLUMES, pods: [pod()] }));
    expect(up.status).toMatchObject({
      phase: "Running",
      reason: "Resumed",
      message: "resumed on its volumes",
    });
  });
});

describe("decideBox: a rootfs volume that holds podd starts its next Pod without init containers", () => {
  const fs = template({ volumeMode: "Filesystem" });
  const injector = fs.spec.poddInjectorImage;
  const label = (p: ReturnType<typeof decideBox>) => {
    const a = p.actions.find(x => x.type === "createPod");
    return a?.type === "createPod" ? a.pod.metadata?.labels?.["pod.cubeplex.ai/rootfs-podd"] : "-";
  };
  const ran = decideBox(
    obs({
      template: fs,
      status: { phase: "Pending", reason: "Started" },
      pvcs: VOLUMES,
      pods: [pod({ poddImage: injector })],
    }),
  ).status;
  const paused = decideBox(
    obs({ template: fs, spec: { desiredState: "Paused" }, status: ran, pvcs: VOLUMES }),
  ).status;

  it("records the podd its running Pod left on the volume, and keeps it across a pause", () => {
    expect(ran.rootfsPoddImage).toBe(injector);
    expect(paused).toMatchObject({ phase: "Paused", rootfsPoddImage: injector });
  });

  it("labels the resume's Pod with it, so the webhook brings podd and fills nothing", () => {
    const p = decideBox(obs({ template: fs, status: paused, pvcs: VOLUMES }));
    expect(types(p)).toEqual(["createPod box"]);
    expect(label(p)).toMatch(/^[0-9a-f]{10}$/);
    expect(p.status.rootfsPoddImage).toBe(injector);
  });

  it("brings podd again when the template's injector changed, or the rootfs is new", () => {
    const newer = template({ volumeMode: "Filesystem", poddInjectorImage: "podd:2" });
    expect(label(decideBox(obs({ template: newer, status: paused, pvcs: VOLUMES })))).toBe(
      undefined,
    );
    const reset = decideBox(
      obs({ template: fs, spec: { rootfsGeneration: 2 }, status: ran, pvcs: VOLUMES }),
    );
    expect(types(reset)).toContain("createPVC box-rootfs-g2");
    expect(reset.status.rootfsPoddImage).toBeUndefined();
    expect(label(reset)).toBe(undefined);
  });

  it("a fork's first Pod takes its parent's record: its volume is a copy or a clone of the parent's", () => {
    const parent = {
      state: "ready" as const,
      rootfsPVCName: "p-rootfs-g1",
      workspacePVCName: "p-workspace",
      rootfsPoddImage: injector,
    };
    const first = decideBox(obs({ template: fs, spec: { forkFrom: "parent" }, parent }));
    expect(first.status.rootfsPoddImage).toBe(injector);
    const next = decideBox(
      obs({
        template: fs,
        spec: { forkFrom: "parent" },
        parent,
        status: first.status,
        pvcs: VOLUMES,
      }),
    );
    expect(label(next)).toMatch(/^[0-9a-f]{10}$/);
  });

  it("replaces such a Pod that does not start by one that brings podd, and forgets the record", () => {
    const resumed = decideBox(obs({ template: fs, status: paused, pvcs: VOLUMES })).status;
    const failing = pod({
      phase: "Pending",
      ready: false,
      podIP: undefined,
      rootfsPodd: true,
      failure: "container sandbox exited 127 (Error)",
    });
    const p = decideBox(obs({ template: fs, status: resumed, pvcs: VOLUMES, pods: [failing] }));
    expect(types(p)).toEqual(["deletePod box"]);
    expect(p.status.rootfsPoddImage).toBeUndefined();
    expect(p.status.message).toMatch(/starting one that brings podd$/);
    const again = decideBox(obs({ template: fs, status: p.status, pvcs: VOLUMES }));
    expect(types(again)).toEqual(["createPod box"]);
    expect(label(again)).toBe(undefined);
  });

  it("a claim records its standby's podd", () => {
    const s = {
      namespace: "ns",
      pool: "pool",
      name: "pool-abc123",
      resourceVersion: "7",
      uid: "u",
      podIP: "127.64.0.9",
      rootfsPVCName: "pool-abc123-rootfs-g1",
      workspacePVCName: "pool-abc123-workspace",
      poddImage: injector,
    };
    const box = { metadata: { name: "box", uid: "uid-1" }, spec: {} } as Parameters<
      typeof statusOfClaim
    >[0];
    expect(statusOfClaim(box, s, undefined, NOW).rootfsPoddImage).toBe(injector);
  });
});

describe("decideBox: a new rootfs is cloned from the template's filled seed", () => {
  const seeded = { ...template({ volumeMode: "Filesystem" }), seed: { pvcName: "python-seed-k" } };
  const injector = seeded.spec.poddInjectorImage;
  const created = (p: ReturnType<typeof decideBox>, kind: "createPVC" | "createPod") =>
    p.actions.flatMap(a =>
      a.type === kind ? [a.type === "createPVC" ? a.pvc.metadata! : a.pod.metadata!] : [],
    );
  const createdRootfs = (p: ReturnType<typeof decideBox>) =>
    p.actions.flatMap(a =>
      a.type === "createPVC" && a.pvc.metadata?.name?.includes("-rootfs-") ? [a.pvc] : [],
    );

  it("a first start clones the seed and starts a Pod that brings nothing", () => {
    const p = decideBox(obs({ template: seeded }));
    expect(types(p)).toEqual([
      "createPVC box-workspace",
      "createPVC box-rootfs-g1",
      "createPod box",
    ]);
    const [rootfs] = createdRootfs(p);
    expect(rootfs.spec?.dataSource).toEqual({
      kind: "PersistentVolumeClaim",
      name: "python-seed-k",
    });
    expect(rootfs.metadata?.labels?.["pod.cubeplex.ai/rootfs-podd"]).toMatch(/^[0-9a-f]{10}$/);
    const [pod] = created(p, "createPod");
    expect(pod.labels?.["pod.cubeplex.ai/rootfs-podd"]).toBe(
      rootfs.metadata?.labels?.["pod.cubeplex.ai/rootfs-podd"],
    );
    expect(p.status.rootfsPoddImage).toBe(injector);
  });

  it("the next pass reads the seeded volume's podd from the PVC, whatever the index says", () => {
    const hash = createdRootfs(decideBox(obs({ template: seeded })))[0].metadata!.labels![
      "pod.cubeplex.ai/rootfs-podd"
    ];
    const volumes = [pvc("box-workspace"), pvc("box-rootfs-g1", { rootfsPodd: hash })];
    const p = decideBox(obs({ template: template({ volumeMode: "Filesystem" }), pvcs: volumes }));
    expect(types(p)).toEqual(["createPod box"]);
    expect(created(p, "createPod")[0].labels?.["pod.cubeplex.ai/rootfs-podd"]).toBe(hash);
    // A volume whose podd is another injector's is filled by the Pod as any other.
    const other = [pvc("box-workspace"), pvc("box-rootfs-g1", { rootfsPodd: "0123456789" })];
    const q = decideBox(obs({ template: seeded, pvcs: other }));
    expect(created(q, "createPod")[0].labels?.["pod.cubeplex.ai/rootfs-podd"]).toBeUndefined();
  });

  it("a volume made before the seed was filled is filled by its own Pod", () => {
    const p = decideBox(obs({ template: seeded, pvcs: VOLUMES }));
    expect(created(p, "createPod")[0].labels?.["pod.cubeplex.ai/rootfs-podd"]).toBeUndefined();
  });

  it("a reset clones the seed; a fork's first volumes are its parent's, not the seed", () => {
    const reset = decideBox(
      obs({ template: seeded, spec: { rootfsGeneration: 2 }, status: running(), pvcs: VOLUMES }),
    );
    expect(createdRootfs(reset)[0].spec?.dataSource?.name).toBe("python-seed-k");
    const parent = {
      state: "ready" as const,
      rootfsPVCName: "p-rootfs-g1",
      workspacePVCName: "p-ws",
    };
    const fork = decideBox(obs({ template: seeded, spec: { forkFrom: "parent" }, parent }));
    expect(createdRootfs(fork)[0].spec?.dataSource?.name).toBe("p-rootfs-g1");
    expect(fork.status.rootfsPoddImage).toBeUndefined();
  });

  it("after a seeded Pod failed to start, the record wins: the next Pod brings podd", () => {
    const hash = createdRootfs(decideBox(obs({ template: seeded })))[0].metadata!.labels![
      "pod.cubeplex.ai/rootfs-podd"
    ];
    const volumes = [pvc("box-workspace"), pvc("box-rootfs-g1", { rootfsPodd: hash })];
    const forgot: PodBoxStatus = {
      phase: "Pending",
      reason: "Started",
      rootfsPVCName: "box-rootfs-g1",
      workspacePVCName: "box-workspace",
    };
    const p = decideBox(obs({ template: seeded, status: forgot, pvcs: volumes }));
    expect(created(p, "createPod")[0].labels?.["pod.cubeplex.ai/rootfs-podd"]).toBeUndefined();
  });
});

describe("decideBox: Terminated and deletion", () => {
  const retain = { volumeReclaimPolicy: "Retain" };

  it("Terminated deletes the Pod and (policy Delete) its PVCs", () => {
    const p = decideBox(
      obs({
        spec: { desiredState: "Terminated" },
        status: running(),
        pvcs: VOLUMES,
        pods: [pod()],
      }),
    );
    expect(types(p)).toEqual([
      "deletePod box",
      "deletePVC box-workspace",
      "deletePVC box-rootfs-g1",
    ]);
    expect(p.status).toMatchObject({ phase: "Pending", reason: "Terminated" });
    expect(p.cleanupDone).toBeUndefined();
  });

  it("Terminated with Retain keeps the PVCs (and their ownership)", () => {
    const p = decideBox(
      obs({ spec: { desiredState: "Terminated", ...retain }, status: running(), pvcs: VOLUMES }),
    );
    expect(p.actions).toEqual([]);
    expect(p.status).toMatchObject({
      phase: "Terminated",
      message: "Pod deleted (volumes kept)",
      rootfsPVCName: "box-rootfs-g1",
    });
  });

  it("never deletes PVCs it does not own", () => {
    const p = decideBox(
      obs({
        spec: { desiredState: "Terminated" },
        pvcs: [pvc("box-workspace", { owner: "none" })],
      }),
    );
    expect(p.actions).toEqual([]);
  });

  it("deletion: cleans up, and is done once the Pod is gone (the PVCs go in that pass)", () => {
    const first = decideBox(
      obs({ deleting: true, status: running(), pvcs: VOLUMES, pods: [pod()] }),
    );
    expect(types(first)).toEqual([
      "deletePod box",
      "deletePVC box-workspace",
      "deletePVC box-rootfs-g1",
    ]);
    expect(first.cleanupDone).toBe(false);
    expect(first.status.reason).toBe("Deleting");
    const going = VOLUMES.map(v => ({ ...v, deleting: true }));
    expect(
      decideBox(obs({ deleting: true, pvcs: going, pods: [pod({ deleting: true })] })).cleanupDone,
    ).toBe(false);
    const done = decideBox(obs({ deleting: true, pvcs: going }));
    expect(done.actions).toEqual([]);
    expect(done.cleanupDone).toBe(true);
    // A pass that finds the Pod gone and the PVCs still there deletes them and is done.
    const last = decideBox(obs({ deleting: true, pvcs: VOLUMES }));
    expect(types(last)).toEqual(["deletePVC box-workspace", "deletePVC box-rootfs-g1"]);
    expect(last.cleanupDone).toBe(true);
  });

  it("deletion with Retain orphans the PVCs so that garbage collection keeps them", () => {
    const p = decideBox(obs({ deleting: true, spec: retain, pvcs: VOLUMES, pods: [pod()] }));
    expect(types(p)).toEqual([
      "deletePod box",
      "orphanPVC box-workspace",
      "orphanPVC box-rootfs-g1",
    ]);
    expect(p.cleanupDone).toBe(false);
    const noPod = decideBox(obs({ deleting: true, spec: retain, pvcs: VOLUMES }));
    expect(types(noPod)).toEqual(["orphanPVC box-workspace", "orphanPVC box-rootfs-g1"]);
    expect(noPod.cleanupDone).toBe(true);
    const orphaned = VOLUMES.map(v => ({ ...v, owner: "none" as const }));
    expect(decideBox(obs({ deleting: true, spec: retain, pvcs: orphaned })).cleanupDone).toBe(true);
  });

  it("deletion wins over any desired state", () => {
    for (const desiredState of ["Running", "Paused"]) {
      expect(
        decideBox(obs({ deleting: true, spec: { desiredState }, pods: [pod()] })).status.reason,
      ).toBe("Deleting");
    }
  });
});

describe("decideBox: idle pause, activity and leases", () => {
  const idleSpec = { idleTimeoutSeconds: 600 };
  const since = (seconds: number) => new Date(Date.parse(NOW) - seconds * 1000).toISOString();
  const runningSince = (seconds: number) => ({ ...running(), lastActivityAt: since(seconds) });

  it("records the start of a run as activity", () => {
    expect(running().lastActivityAt).toBe(NOW);
  });

  it("pauses a box idle past its timeout (IdlePaused), leaving the spec alone", () => {
    const p = decideBox(
      obs({ spec: idleSpec, status: runningSince(601), pvcs: VOLUMES, pods: [pod()] }),
    );
    expect(types(p)).toEqual(["deletePod box"]);
    expect(p.status).toMatchObject({ phase: "Pending", reason: "IdlePaused" });
    const paused = decideBox(obs({ spec: idleSpec, status: p.status, pvcs: VOLUMES }));
    expect(paused.status).toMatchObject({ phase: "Paused", reason: "IdlePaused" });
  });

  it("keeps a box with recent activity running", () => {
    const p = decideBox(
      obs({
        spec: idleSpec,
        status: runningSince(601),
        activity: since(5),
        pvcs: VOLUMES,
        pods: [pod()],
      }),
    );
    expect(p.actions).toEqual([]);
    expect(p.status).toMatchObject({ phase: "Running", lastActivityAt: since(5) });
  });

  it("resumes an idle-paused box on new activity", () => {
    const idle = { ...runningSince(700), phase: "Paused" as const, reason: "IdlePaused" as const };
    const p = decideBox(obs({ spec: idleSpec, status: idle, activity: since(1), pvcs: VOLUMES }));
    expect(types(p)).toEqual(["createPod box"]);
    expect(p.status.reason).toBe("Resumed");
  });

  it("counts a resume the user asked for as activity, so an old box is not paused at once", () => {
    const userPaused = {
      ...runningSince(7200),
      phase: "Paused" as const,
      reason: "Paused" as const,
    };
    const p = decideBox(obs({ spec: idleSpec, status: userPaused, pvcs: VOLUMES }));
    expect(types(p)).toEqual(["createPod box"]);
    expect(p.status).toMatchObject({ reason: "Resumed", lastActivityAt: NOW });
  });

  it.each(["2030", "Tue, 01 Dec 2026 10:00:00 GMT", "yesterday"])(
    "ignores an activity annotation that is not RFC 3339 (%s), and says so in a condition",
    bad => {
      const p = decideBox(
        obs({
          spec: idleSpec,
          status: runningSince(30),
          activity: bad,
          pvcs: VOLUMES,
          pods: [pod()],
        }),
      );
      expect(p.actions).toEqual([]);
      expect(p.status.lastActivityAt).toBe(since(30));
      expect(p.status.conditions).toContainEqual(
        expect.objectContaining({
          type: "ActivityRecorded",
          status: "False",
          reason: "InvalidAnnotation",
          message: expect.stringContaining(`${JSON.stringify(bad)} is not an RFC 3339 time`),
        }),
      );
      // The box still goes idle on its real activity.
      const later = decideBox(
        obs({ spec: idleSpec, status: runningSince(601), activity: bad, pods: [pod()] }),
      );
      expect(later.status.reason).toBe("IdlePaused");
    },
  );

  it("drops the condition once the annotation is fixed, and a bad time an earlier version stored", () => {
    const reported = decideBox(
      obs({ status: runningSince(30), activity: "2030", pvcs: VOLUMES, pods: [pod()] }),
    ).status;
    const fixed = decideBox(
      obs({ status: reported, activity: since(1), pvcs: VOLUMES, pods: [pod()] }),
    );
    expect(fixed.status.conditions?.map(c => c.type)).toEqual(["Ready"]);
    expect(fixed.status.lastActivityAt).toBe(since(1));
    const stored = { ...running(), lastActivityAt: "2030" };
    const healed = decideBox(obs({ status: stored, pvcs: VOLUMES, pods: [pod()] }));
    expect(healed.status.lastActivityAt).toBeUndefined();
  });

  it("never pauses a box with a live lease", () => {
    const spec = { ...idleSpec, leaseExpiresAt: "2026-11-30T11:00:00Z" };
    expect(
      decideBox(obs({ spec, status: runningSince(9999), pvcs: VOLUMES, pods: [pod()] })).actions,
    ).toEqual([]);
  });

  it("terminates a paused box whose lease expired (LeaseExpired), deleting its volumes", () => {
    const spec = { desiredState: "Paused", leaseExpiresAt: "2026-11-30T09:59:00Z" };
    const p = decideBox(
      obs({ spec, status: { ...running(), phase: "Paused", reason: "Paused" }, pvcs: VOLUMES }),
    );
    expect(types(p)).toEqual(["deletePVC box-workspace", "deletePVC box-rootfs-g1"]);
    expect(p.status).toMatchObject({ phase: "Terminated", reason: "LeaseExpired" });
    expect(p.status.message).toMatch(/^lease expired: /);
  });

  it("ends an expired box: Expired, its Pod and volumes gone, or paused with onExpiry: Pause", () => {
    const expired = { expiresAt: "2026-11-30T09:59:00Z" };
    const ended = decideBox(obs({ spec: expired, status: running(), pvcs: VOLUMES }));
    expect(types(ended)).toEqual(["deletePVC box-workspace", "deletePVC box-rootfs-g1"]);
    expect(ended.status).toMatchObject({ phase: "Terminated", reason: "Expired" });
    expect(ended.status.message).toMatch(/^expired: /);
    const spec = { ...expired, onExpiry: "Pause" };
    const paused = decideBox(obs({ spec, status: running(), pvcs: VOLUMES, pods: [pod()] }));
    expect(types(paused)).toEqual(["deletePod box"]);
    expect(paused.status).toMatchObject({ phase: "Pending", reason: "Expired" });
    // A new expiry ahead: it runs again, as a resume.
    const later = { expiresAt: "2026-11-30T11:00:00Z", onExpiry: "Pause" };
    const stored = { ...paused.status, phase: "Paused" as const };
    const resumed = decideBox(obs({ spec: later, status: stored, pvcs: VOLUMES }));
    expect(types(resumed)).toEqual(["createPod box"]);
  });

  it("decides an expiry to the millisecond, within the second `now` rounds off", () => {
    const spec = { expiresAt: new Date(Date.parse(NOW) + 300).toISOString() };
    const at = (ms: number) =>
      decideBox({
        ...obs({ spec, status: running(), pvcs: VOLUMES }),
        nowMs: Date.parse(NOW) + ms,
      });
    expect(at(299).status.reason).not.toBe("Expired");
    expect(at(300).status).toMatchObject({ phase: "Terminated", reason: "Expired" });
  });
});

/** A ready standby of pool "pool", as the index hands it to a claim. */
const STANDBY = {
  name: "pool-x1",
  pool: "pool",
  namespace: "ns",
  podIP: "127.64.0.7",
  uid: "pod-uid-1",
  resourceVersion: "7",
  templateHash: "h",
  rootfsPVCName: "pool-x1-rootfs-g1",
  workspacePVCName: "pool-x1-workspace",
};

describe("decideBox: a claimed warm standby", () => {
  const claimedPVCs = (owner: ObservedPVC["owner"]) => [
    pvc("pool-x1-workspace", { owner, volumeKey: "pool-x1" }),
    pvc("pool-x1-rootfs-g1", { owner, volumeKey: "pool-x1" }),
  ];
  const claimedPod = pod({
    name: "pool-x1",
    rootfsClaim: "pool-x1-rootfs-g1",
    workspaceClaim: "pool-x1-workspace",
    volumeKey: "pool-x1",
  });
  const claimedStatus: PodBoxStatus = {
    ...running("WarmPoolClaimed"),
    podName: "pool-x1",
    rootfsPVCName: "pool-x1-rootfs-g1",
    workspacePVCName: "pool-x1-workspace",
  };

  it("takes over the standby's PVCs still owned by the pool, and changes nothing else", () => {
    const p = decideBox(
      obs({
        spec: { warmPoolRef: "pool" },
        status: claimedStatus,
        pvcs: claimedPVCs("pool"),
        pods: [claimedPod],
      }),
    );
    expect(types(p)).toEqual(["adoptPVC pool-x1-workspace", "adoptPVC pool-x1-rootfs-g1"]);
    expect(p.status).toMatchObject({
      phase: "Running",
      reason: "WarmPoolClaimed",
      podName: "pool-x1",
      rootfsPVCName: "pool-x1-rootfs-g1",
    });
  });

  it("gives its Pod the box's label when the claim's finish did not (a restart), and only then", () => {
    const unlabelled = { ...claimedPod, unlabelled: true };
    const mine = claimedPVCs("this");
    const p = decideBox(
      obs({ spec: { warmPoolRef: "pool" }, status: claimedStatus, pvcs: mine, pods: [unlabelled] }),
    );
    expect(types(p)).toEqual(["labelClaimedPod pool-x1"]);
    expect(p.status).toMatchObject({ phase: "Running", podName: "pool-x1" });
    const going = { ...unlabelled, deleting: true };
    expect(
      types(
        decideBox(
          obs({ spec: { warmPoolRef: "pool" }, status: claimedStatus, pvcs: mine, pods: [going] }),
        ),
      ),
    ).toEqual([]);
  });

  it("takes them over when the pool went first (nobody's, its Pod mounts them), with no status yet", () => {
    const p = decideBox(
      obs({ spec: { warmPoolRef: "pool" }, pvcs: claimedPVCs("none"), pods: [claimedPod] }),
    );
    expect(types(p)).toEqual(["adoptPVC pool-x1-workspace", "adoptPVC pool-x1-rootfs-g1"]);
    expect(p.status).toMatchObject({ phase: "Running", podName: "pool-x1" });
  });

  it("keeps running on them once they are its own, and resumes on them after a pause", () => {
    const mine = claimedPVCs("this");
    expect(
      decideBox(
        obs({
          spec: { warmPoolRef: "pool" },
          status: claimedStatus,
          pvcs: mine,
          pods: [claimedPod],
        }),
      ).actions,
    ).toEqual([]);
    const paused = { ...claimedStatus, phase: "Paused" as const, reason: "Paused" as const };
    const p = decideBox(obs({ spec: { warmPoolRef: "pool" }, status: paused, pvcs: mine }));
    expect(podClaims(p)).toEqual(["pool-x1-rootfs-g1", "pool-x1-workspace"]);
  });

  it("resets on a new rootfs of the standby's volume key: the PVC it creates is the one its status and Pod name", () => {
    const mine = claimedPVCs("this");
    const spec = { warmPoolRef: "pool", rootfsGeneration: 2 };
    const first = decideBox(obs({ spec, status: claimedStatus, pvcs: mine, pods: [claimedPod] }));
    expect(types(first)).toEqual(["deletePod pool-x1", "createPVC pool-x1-rootfs-g2"]);
    const created = first.actions.find(a => a.type === "createPVC");
    expect(created?.type === "createPVC" && created.pvc.metadata?.labels).toMatchObject({
      "pod.cubeplex.ai/box": "box",
      "pod.cubeplex.ai/volume-key": "pool-x1",
      "pod.cubeplex.ai/rootfs-generation": "2",
    });
    expect(first.status).toMatchObject({
      phase: "Pending",
      reason: "RootFSReset",
      rootfsPVCName: "pool-x1-rootfs-g2",
      workspacePVCName: "pool-x1-workspace",
    });

    const pvcs = [...mine, pvc("pool-x1-rootfs-g2", { volumeKey: "pool-x1" })];
    const next = decideBox(obs({ spec, status: first.status, pvcs }));
    expect(types(next)).toEqual(["deletePVC pool-x1-rootfs-g1", "createPod box"]);
    expect(podClaims(next)).toEqual(["pool-x1-rootfs-g2", "pool-x1-workspace"]);

    const onNew = pod({
      rootfsClaim: "pool-x1-rootfs-g2",
      workspaceClaim: "pool-x1-workspace",
      volumeKey: "pool-x1",
    });
    const done = decideBox(
      obs({
        spec,
        status: next.status,
        pvcs: pvcs.filter(v => !v.name.endsWith("-g1")),
        pods: [onNew],
      }),
    );
    expect(done.actions).toEqual([]);
    expect(done.status).toMatchObject({
      phase: "Running",
      reason: "RootFSReset",
      podName: "box",
      rootfsGeneration: 2,
      rootfsPVCName: "pool-x1-rootfs-g2",
    });
  });

  it("reset before its PVCs were handed over: takes both over, then replaces the Pod, and never calls the old rootfs another's", () => {
    const spec = { warmPoolRef: "pool", rootfsGeneration: 2 };
    const p = decideBox(
      obs({ spec, status: claimedStatus, pvcs: claimedPVCs("pool"), pods: [claimedPod] }),
    );
    expect(types(p)).toEqual([
      "adoptPVC pool-x1-workspace",
      "adoptPVC pool-x1-rootfs-g1",
      "deletePod pool-x1",
      "createPVC pool-x1-rootfs-g2",
    ]);
    // Once the Pod is gone the old rootfs is the box's and goes; no VolumesInUse.
    const pvcs = [...claimedPVCs("this"), pvc("pool-x1-rootfs-g2", { volumeKey: "pool-x1" })];
    const next = decideBox(obs({ spec, status: p.status, pvcs }));
    expect(types(next)).toEqual(["deletePVC pool-x1-rootfs-g1", "createPod box"]);
  });

  // Before the claim's finish (lost to a restart, or failed), a pool removes a standby's PVCs once
  // their Pod is gone: a pause or an ending takes them over before it deletes the Pod.
  it("paused before its PVCs were handed over: takes them over, then deletes the Pod", () => {
    const p = decideBox(
      obs({
        spec: { warmPoolRef: "pool", desiredState: "Paused" },
        status: claimedStatus,
        pvcs: claimedPVCs("pool"),
        pods: [claimedPod],
      }),
    );
    expect(types(p)).toEqual([
      "adoptPVC pool-x1-workspace",
      "adoptPVC pool-x1-rootfs-g1",
      "deletePod pool-x1",
    ]);
  });

  it("ended before its PVCs were handed over: takes them over first, then keeps or deletes them", () => {
    const ending = (spec: object, deleting = false) =>
      types(
        decideBox(
          obs({
            spec: { warmPoolRef: "pool", ...spec },
            status: claimedStatus,
            pvcs: claimedPVCs("pool"),
            pods: [claimedPod],
            deleting,
          }),
        ),
      );
    const adopt = ["adoptPVC pool-x1-workspace", "adoptPVC pool-x1-rootfs-g1"];
    expect(ending({ desiredState: "Terminated", volumeReclaimPolicy: "Retain" })).toEqual([
      ...adopt,
      "deletePod pool-x1",
    ]);
    expect(ending({ volumeReclaimPolicy: "Retain" }, true)).toEqual([
      ...adopt,
      "deletePod pool-x1",
      "orphanPVC pool-x1-workspace",
      "orphanPVC pool-x1-rootfs-g1",
    ]);
    expect(ending({ desiredState: "Terminated" })).toEqual([
      ...adopt,
      "deletePod pool-x1",
      "deletePVC pool-x1-workspace",
      "deletePVC pool-x1-rootfs-g1",
    ]);
  });

  it("writes nothing after the claim: the claim's own status is what it decides", () => {
    const box = { metadata: { name: "box", namespace: "ns", uid: "uid-1", generation: 4 } };
    const written = statusOfClaim(box, STANDBY, { name: "python", envdPort: 49983 }, EARLIER);
    expect(written.templateName).toBe("python");
    for (const owner of ["pool", "this"] as const) {
      const p = decideBox(
        obs({
          spec: { warmPoolRef: "pool" },
          status: written,
          pvcs: claimedPVCs(owner),
          pods: [claimedPod],
        }),
      );
      expect(p.status).toEqual(written);
      expect(p.events).toEqual([]);
    }
  });

  it("claims with one JSON patch that tests the standby's resourceVersion first and keeps its labels", () => {
    const box = { metadata: { name: "box", namespace: "ns", uid: "uid-1" } };
    expect(claimPatch(box, STANDBY)).toEqual([
      { op: "test", path: "/metadata/resourceVersion", value: "7" },
      {
        op: "replace",
        path: "/metadata/ownerReferences",
        value: [
          {
            apiVersion: "pod.cubeplex.ai/v1alpha1",
            kind: "PodBox",
            name: "box",
            uid: "uid-1",
            controller: true,
            blockOwnerDeletion: true,
          },
        ],
      },
    ]);
  });

  it("lets only a new box of a pool claim, and only before its cold start began", () => {
    const box = (spec: object, metadata: object = {}, status: object = {}) =>
      ({ metadata: { name: "b", uid: "u", ...metadata }, spec, status }) as never;
    expect(mayClaim(box({ warmPoolRef: "pool" }))).toBe(true);
    expect(mayClaim(box({ templateRef: "python" }))).toBe(false);
    expect(mayClaim(box({ warmPoolRef: "pool", forkFrom: "parent" }))).toBe(false);
    expect(mayClaim(box({ warmPoolRef: "pool", volumeKey: "kept" }))).toBe(false);
    // Its own Pod is labelled from the start: a standby's new label would apply a moment late.
    expect(mayClaim(box({ warmPoolRef: "pool", egress: "None" }))).toBe(false);
    expect(mayClaim(box({ warmPoolRef: "pool", desiredState: "Paused" }))).toBe(false);
    expect(mayClaim(box({ warmPoolRef: "pool" }, {}, { phase: "Pending" }))).toBe(false);
    expect(mayClaim(box({ warmPoolRef: "pool" }, { deletionTimestamp: NOW }))).toBe(false);
    // The finalizer without a status: the reconciler has started creating the box's own volumes.
    const started = { finalizers: ["pod.cubeplex.ai/cleanup"] };
    expect(mayClaim(box({ warmPoolRef: "pool" }, started))).toBe(false);
    expect(mayClaim(box({ warmPoolRef: "pool" }, { finalizers: ["other.io/hold"] }))).toBe(true);
  });

  it("refuses pool PVCs its Pod does not mount", () => {
    const p = decideBox(obs({ pvcs: [pvc("box-workspace", { owner: "pool" })] }));
    expect(p.status).toMatchObject({ phase: "Failed", reason: "VolumesInUse" });
  });
});

describe("readsFromCache", () => {
  const box = { name: "box", deleting: false };

  it("lets a new box, or one on volumes named after it, list from the watch cache", () => {
    expect(readsFromCache(box)).toBe(true);
    expect(readsFromCache({ ...box, workspacePVCName: "box-workspace" })).toBe(true);
  });

  it("counts the volume key a box re-attaches as its own", () => {
    const kept = { ...box, volumeKey: "old" };
    expect(readsFromCache({ ...kept, workspacePVCName: "old-workspace" })).toBe(true);
    expect(readsFromCache({ ...kept, workspacePVCName: "box-workspace" })).toBe(false);
  });

  it("reads a box on a claimed standby's volumes consistently", () => {
    expect(readsFromCache({ ...box, workspacePVCName: "pool-1a2b3c-workspace" })).toBe(false);
  });

  it("reads a box being deleted consistently", () => {
    expect(readsFromCache({ ...box, deleting: true })).toBe(false);
    expect(readsFromCache({ ...box, deleting: true, workspacePVCName: "box-workspace" })).toBe(
      false,
    );
  });
});
