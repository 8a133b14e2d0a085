import { buildBoxSnapshots } from "../../../capabilities/manifests/snapshots";
import { OWNER, template } from "../fixtures";

describe("buildBoxSnapshots", () => {
  const input = {
    namespace: "ns",
    boxName: "box",
    template: template({ volumeSnapshotClassName: "snaps" }),
    source: { rootfsPVCName: "parent-rootfs-g3", workspacePVCName: "parent-workspace" },
    owner: OWNER,
  };

  it("takes the parent's two volumes as VolumeSnapshots of the template's class, owned by the box", () => {
    const { rootfs, workspace } = buildBoxSnapshots(input);
    expect(rootfs).toEqual({
      apiVersion: "snapshot.storage.k8s.io/v1",
      kind: "VolumeSnapshot",
      metadata: {
        name: "box-rootfs-snapshot",
        namespace: "ns",
        labels: {
          "app.kubernetes.io/managed-by": "cubepod",
          "pod.cubeplex.ai/box": "box",
          "pod.cubeplex.ai/template": "python",
          "pod.cubeplex.ai/volume": "rootfs",
        },
        ownerReferences: [OWNER],
      },
      spec: {
        volumeSnapshotClassName: "snaps",
        source: { persistentVolumeClaimName: "parent-rootfs-g3" },
      },
    });
    expect(workspace.metadata.name).toBe("box-workspace-snapshot");
    expect(workspace.spec.source.persistentVolumeClaimName).toBe("parent-workspace");
  });

  it("records the podd the rootfs holds, and is the same for the same input", () => {
    const withPodd = { ...input, source: { ...input.source, rootfsPoddImage: "podd:2" } };
    expect(buildBoxSnapshots(withPodd).rootfs.metadata.annotations).toEqual({
      "pod.cubeplex.ai/podd-image": "podd:2",
    });
    expect(buildBoxSnapshots(withPodd).workspace.metadata.annotations).toBeUndefined();
    expect(buildBoxSnapshots(withPodd)).toEqual(buildBoxSnapshots(withPodd));
  });
});
