import { buildCopyPod, copyPodName } from "../../../capabilities/manifests/copy-pod";
import { OWNER, template } from "../fixtures";

const input = (overrides: Record<string, unknown> = {}) => ({
  namespace: "ns",
  boxName: "child",
  template: template({ forkStrategy: "Copy", ...overrides }),
  target: { rootfsPVCName: "child-rootfs-g1", workspacePVCName: "child-workspace" },
  source: { rootfsPVCName: "parent-rootfs-g3", workspacePVCName: "parent-workspace" },
  owner: OWNER,
});

describe("buildCopyPod", () => {
  it("is named so that no box's Pod can hold the name", () => {
    expect(copyPodName("child")).toBe("child.copy");
    expect(buildCopyPod(input()).metadata).toEqual({
      name: "child.copy",
      namespace: "ns",
      labels: {
        "app.kubernetes.io/managed-by": "cubepod",
        "pod.cubeplex.ai/box": "child",
        "pod.cubeplex.ai/pod-role": "copy",
      },
      ownerReferences: [OWNER],
    });
  });

  it("copies mounted directories in Filesystem mode, the parent's read-only, retried by the kubelet", () => {
    const pod = buildCopyPod(input({ volumeMode: "Filesystem" }));
    expect(pod.spec!.restartPolicy).toBe("OnFailure");
    expect(pod.spec!.automountServiceAccountToken).toBe(false);
    const [c] = pod.spec!.containers;
    expect(c.image).toBe(template().spec.poddInjectorImage);
    expect(c.command).toEqual([
      "/opt/cubepod/bin/podd-copy",
      "Filesystem",
      "/cubepod/source-rootfs",
      "/cubepod/rootfs",
      "/cubepod/source-workspace",
      "/cubepod/workspace",
    ]);
    expect(c.volumeMounts).toEqual([
      { name: "source-rootfs", mountPath: "/cubepod/source-rootfs", readOnly: true },
      { name: "rootfs", mountPath: "/cubepod/rootfs", readOnly: false },
      { name: "source-workspace", mountPath: "/cubepod/source-workspace", readOnly: true },
      { name: "workspace", mountPath: "/cubepod/workspace", readOnly: false },
    ]);
    expect(c.volumeDevices).toBeUndefined();
  });

  it("copies whole devices in Block mode", () => {
    const [c] = buildCopyPod(input({ volumeMode: "Block" })).spec!.containers;
    expect(c.command).toEqual([
      "/opt/cubepod/bin/podd-copy",
      "Block",
      "/dev/cubepod-source-rootfs",
      "/dev/cubepod-rootfs",
      "/dev/cubepod-source-workspace",
      "/dev/cubepod-workspace",
    ]);
    expect(c.volumeDevices?.map(d => d.devicePath)).toEqual([
      "/dev/cubepod-source-rootfs",
      "/dev/cubepod-rootfs",
      "/dev/cubepod-source-workspace",
      "/dev/cubepod-workspace",
    ]);
    expect(c.volumeMounts).toBeUndefined();
  });

  it("is placed as the box's Pod is: the volumes may be local to those nodes", () => {
    const placement = {
      nodeSelector: { "cubepod.dev/node": "real" },
      tolerations: [{ key: "cubepod.dev/real-node", operator: "Exists", effect: "NoSchedule" }],
      priorityClassName: "sandboxes",
    };
    expect(buildCopyPod(input(placement)).spec).toMatchObject(placement);
  });
});
