import type { kind } from "pepr";
import { observedPod, observedPVC, observedSnapshot } from "../../../capabilities/box/observe";
import type { VolumeSnapshot } from "../../../capabilities/manifests/snapshots";

const pvc = (
  owners: { kind: string; uid: string; controller?: boolean }[],
  labels: Record<string, string> = { "pod.cubeplex.ai/volume": "workspace" },
): kind.PersistentVolumeClaim => ({
  metadata: {
    name: "v",
    labels,
    ownerReferences: owners.map(o => ({ apiVersion: "x", name: "o", ...o })),
  },
});

describe("observedPVC: whose a PVC is", () => {
  it.each([
    ["this", [{ kind: "PodBox", uid: "box-uid", controller: true }]],
    ["pool", [{ kind: "PodWarmPool", uid: "pool-uid", controller: true }]],
    ["other", [{ kind: "PodBox", uid: "another-box", controller: true }]],
    ["other", [{ kind: "StatefulSet", uid: "s", controller: true }]],
    ["none", []],
    // A plain reference (a standby's Pod) is not a controller: it decides nothing.
    ["none", [{ kind: "PodBox", uid: "box-uid" }]],
    [
      "pool",
      [
        { kind: "Pod", uid: "pod-uid" },
        { kind: "PodWarmPool", uid: "pool-uid", controller: true },
      ],
    ],
  ] as const)("%s for owners %j", (owner, owners) => {
    expect(observedPVC(pvc([...owners]), "box-uid")).toEqual([
      expect.objectContaining({ name: "v", role: "workspace", owner }),
    ]);
  });

  it("reads the role, rootfs generation, volume key, retention and deletion from the labels", () => {
    const p = pvc([], {
      "pod.cubeplex.ai/volume": "rootfs",
      "pod.cubeplex.ai/rootfs-generation": "3",
      "pod.cubeplex.ai/volume-key": "k",
      "pod.cubeplex.ai/retained": "old-box",
    });
    p.metadata!.deletionTimestamp = new Date();
    expect(observedPVC(p, "box-uid")).toEqual([
      {
        name: "v",
        role: "rootfs",
        generation: 3,
        deleting: true,
        volumeKey: "k",
        retained: true,
        owner: "none",
        copied: false,
      },
    ]);
  });

  it("reads a fork's copy source and whether the copy is complete from its annotations", () => {
    const p = pvc([]);
    p.metadata!.annotations = { "pod.cubeplex.ai/copy-from": "parent-workspace" };
    expect(observedPVC(p, "box-uid")[0]).toMatchObject({
      copyFrom: "parent-workspace",
      copied: false,
    });
    p.metadata!.annotations["pod.cubeplex.ai/copied"] = "true";
    expect(observedPVC(p, "box-uid")[0].copied).toBe(true);
  });

  it("ignores a PVC without a CubePod volume role", () => {
    expect(observedPVC(pvc([], {}), "box-uid")).toEqual([]);
    expect(observedPVC(pvc([], { "pod.cubeplex.ai/volume": "data" }), "box-uid")).toEqual([]);
  });
});

describe("observedPod", () => {
  it("reads readiness from the Ready condition, and the claims by volume name", () => {
    const pod: kind.Pod = {
      metadata: { name: "p", labels: { "pod.cubeplex.ai/volume-key": "k" } },
      spec: {
        containers: [],
        volumes: [
          { name: "workspace", persistentVolumeClaim: { claimName: "k-workspace" } },
          { name: "rootfs", persistentVolumeClaim: { claimName: "k-rootfs-g1" } },
        ],
      },
      status: {
        phase: "Running",
        podIP: "127.64.0.9",
        conditions: [{ type: "Ready", status: "True" }],
      },
    };
    expect(observedPod(pod)).toEqual({
      name: "p",
      phase: "Running",
      podIP: "127.64.0.9",
      ready: true,
      deleting: false,
      rootfsClaim: "k-rootfs-g1",
      workspaceClaim: "k-workspace",
      volumeKey: "k",
      restarts: 0,
      // A claimed standby's Pod before the claim's finish: no box label yet.
      unlabelled: true,
    });
    pod.metadata!.labels!["pod.cubeplex.ai/box"] = "b";
    expect(observedPod(pod).unlabelled).toBeUndefined();
    pod.status!.conditions = [{ type: "Ready", status: "False" }];
    expect(observedPod(pod).ready).toBe(false);
  });

  it("reads a copy Pod's role, its restarts and why its last attempt failed", () => {
    const pod: kind.Pod = {
      metadata: { name: "box.copy", labels: { "pod.cubeplex.ai/pod-role": "copy" } },
      spec: { containers: [] },
      status: {
        phase: "Running",
        containerStatuses: [
          {
            name: "copy",
            image: "i",
            imageID: "",
            ready: false,
            restartCount: 2,
            state: { waiting: { reason: "CrashLoopBackOff" } },
            lastState: { terminated: { exitCode: 1, reason: "Error", message: "no space\n" } },
          },
        ],
      },
    };
    expect(observedPod(pod)).toMatchObject({
      role: "copy",
      restarts: 2,
      failure: "container copy exited 1 (Error): no space",
    });
    pod.status = { phase: "Failed", reason: "Evicted", message: "the node ran out of disk" };
    expect(observedPod(pod).failure).toBe("Evicted: the node ran out of disk");
    pod.status = { phase: "Succeeded" };
    expect(observedPod(pod).failure).toBeUndefined();
  });

  it("names a failing init container first: the sandbox's own never started", () => {
    const status = (name: string, exitCode: number, restartCount: number) => ({
      name,
      image: "i",
      imageID: "",
      ready: false,
      restartCount,
      lastState: { terminated: { exitCode, reason: "Error", message: `${name} failed` } },
    });
    const pod: kind.Pod = {
      metadata: { name: "box" },
      spec: { containers: [] },
      status: {
        phase: "Pending",
        initContainerStatuses: [status("podd-installer", 0, 0), status("rootfs-fill", 1, 3)],
        containerStatuses: [status("sandbox", 2, 1)],
      },
    };
    expect(observedPod(pod)).toMatchObject({
      restarts: 4,
      failure: "container rootfs-fill exited 1 (Error): rootfs-fill failed",
    });
  });
});

describe("observedSnapshot: a VolumeSnapshot of a box's snapshot names", () => {
  const vs = (over: Partial<VolumeSnapshot["metadata"]>, status?: VolumeSnapshot["status"]) =>
    ({
      apiVersion: "snapshot.storage.k8s.io/v1",
      kind: "VolumeSnapshot",
      metadata: { name: "box-rootfs-snapshot", ...over },
      spec: { source: { persistentVolumeClaimName: "p" } },
      ...(status ? { status } : {}),
    }) as VolumeSnapshot;
  const ref = (uid: string, controller = true) => ({
    apiVersion: "x",
    kind: "PodBox",
    name: "o",
    uid,
    controller,
  });

  it.each([
    ["this", [ref("box-uid")]],
    ["other", [ref("another")]],
    ["none", [ref("box-uid", false)]],
    ["none", []],
  ] as const)("%s for owners %j", (owner, owners) => {
    expect(
      observedSnapshot(vs({ ownerReferences: [...owners] }), "box-uid", "rootfs"),
    ).toMatchObject({
      owner,
    });
  });

  it("reads readiness, the driver's error, deletion and the podd it holds", () => {
    expect(observedSnapshot(vs({}), "u", "rootfs")).toEqual({
      name: "box-rootfs-snapshot",
      role: "rootfs",
      owner: "none",
      ready: false,
      deleting: false,
    });
    const seen = observedSnapshot(
      vs(
        {
          deletionTimestamp: "2026-12-07T10:00:00Z",
          annotations: { "pod.cubeplex.ai/podd-image": "podd:1" },
        },
        { readyToUse: true, error: { message: "pool full" } },
      ),
      "u",
      "workspace",
    );
    expect(seen).toMatchObject({
      role: "workspace",
      ready: true,
      error: "pool full",
      deleting: true,
      poddImage: "podd:1",
    });
  });
});
