import { buildBoxPVCs } from "../../../capabilities/manifests/pvcs";
import { OWNER, template } from "../fixtures";

const base = { namespace: "ns", boxName: "box", rootfsGeneration: 1 };

describe("buildBoxPVCs", () => {
  it("builds two Block PVCs named after the box and the rootfs generation", () => {
    const { rootfs, workspace } = buildBoxPVCs({ ...base, template: template(), owner: OWNER });
    expect(rootfs.metadata?.name).toBe("box-rootfs-g1");
    expect(workspace.metadata?.name).toBe("box-workspace");
    for (const pvc of [rootfs, workspace]) {
      expect(pvc.metadata?.namespace).toBe("ns");
      expect(pvc.spec?.volumeMode).toBe("Block");
      expect(pvc.spec?.accessModes).toEqual(["ReadWriteOnce"]);
      expect(pvc.spec?.storageClassName).toBeUndefined();
      expect(pvc.spec?.dataSource).toBeUndefined();
      expect(pvc.metadata?.ownerReferences).toEqual([OWNER]);
      expect(pvc.metadata?.labels).toMatchObject({
        "pod.cubeplex.ai/box": "box",
        "pod.cubeplex.ai/template": "python",
        "pod.cubeplex.ai/volume-key": "box",
        "app.kubernetes.io/managed-by": "cubepod",
      });
    }
    expect(rootfs.metadata?.labels?.["pod.cubeplex.ai/volume"]).toBe("rootfs");
    expect(rootfs.metadata?.labels?.["pod.cubeplex.ai/rootfs-generation"]).toBe("1");
    expect(workspace.metadata?.labels?.["pod.cubeplex.ai/volume"]).toBe("workspace");
    expect(rootfs.spec?.resources?.requests?.storage).toBe("10Gi");
    expect(workspace.spec?.resources?.requests?.storage).toBe("20Gi");
  });

  it("uses the template's volume mode, storage class and sizes", () => {
    const t = template({
      volumeMode: "Filesystem",
      storageClassName: "nfs",
      rootfs: { size: "3Gi" },
      workspace: { size: "7Gi" },
    });
    const { rootfs, workspace } = buildBoxPVCs({ ...base, template: t });
    expect(rootfs.spec).toMatchObject({ volumeMode: "Filesystem", storageClassName: "nfs" });
    expect(workspace.spec).toMatchObject({ volumeMode: "Filesystem", storageClassName: "nfs" });
    expect(rootfs.spec?.resources?.requests?.storage).toBe("3Gi");
    expect(workspace.spec?.resources?.requests?.storage).toBe("7Gi");
    expect(rootfs.metadata?.ownerReferences).toBeUndefined();
  });

  it("gives a reset a new rootfs PVC and the same workspace PVC", () => {
    const g1 = buildBoxPVCs({ ...base, template: template() });
    const g3 = buildBoxPVCs({ ...base, template: template(), rootfsGeneration: 3 });
    expect(g3.rootfs.metadata?.name).toBe("box-rootfs-g3");
    expect(g3.rootfs.metadata?.labels?.["pod.cubeplex.ai/rootfs-generation"]).toBe("3");
    expect(g3.workspace).toEqual(g1.workspace);
  });

  it("names re-attached volumes after the volume key", () => {
    const { rootfs, workspace } = buildBoxPVCs({ ...base, volumeKey: "old", template: template() });
    expect(rootfs.metadata?.name).toBe("old-rootfs-g1");
    expect(workspace.metadata?.name).toBe("old-workspace");
    expect(rootfs.metadata?.labels?.["pod.cubeplex.ai/volume-key"]).toBe("old");
    expect(rootfs.metadata?.labels?.["pod.cubeplex.ai/box"]).toBe("box");
  });

  it.each(["Block", "Filesystem"])("clones both parent PVCs through dataSource (%s)", mode => {
    const forkFrom = { rootfsPVCName: "parent-rootfs-g2", workspacePVCName: "parent-workspace" };
    const { rootfs, workspace } = buildBoxPVCs({
      ...base,
      template: template({ volumeMode: mode }),
      forkFrom,
    });
    expect(rootfs.spec?.dataSource).toEqual({
      kind: "PersistentVolumeClaim",
      name: "parent-rootfs-g2",
    });
    expect(workspace.spec?.dataSource).toEqual({
      kind: "PersistentVolumeClaim",
      name: "parent-workspace",
    });
    expect(rootfs.metadata?.annotations).toBeUndefined();
  });

  it("omits dataSource and records the parent when the class cannot clone (Copy)", () => {
    const forkFrom = { rootfsPVCName: "parent-rootfs-g1", workspacePVCName: "parent-workspace" };
    const { rootfs, workspace } = buildBoxPVCs({
      ...base,
      template: template({ volumeMode: "Filesystem", forkStrategy: "Copy" }),
      forkFrom,
    });
    expect(rootfs.spec?.dataSource).toBeUndefined();
    expect(workspace.spec?.dataSource).toBeUndefined();
    expect(rootfs.metadata?.annotations).toEqual({
      "pod.cubeplex.ai/copy-from": "parent-rootfs-g1",
    });
    expect(workspace.metadata?.annotations).toEqual({
      "pod.cubeplex.ai/copy-from": "parent-workspace",
    });
  });

  it("is deterministic", () => {
    const input = { ...base, template: template(), owner: OWNER };
    expect(buildBoxPVCs(input)).toEqual(buildBoxPVCs(input));
  });

  it("restores VolumeSnapshots: their data source, no seed, no copy whatever the fork strategy", () => {
    const t = template({ forkStrategy: "Copy", rootfs: { seed: true } });
    const { rootfs, workspace } = buildBoxPVCs({
      ...base,
      template: { ...t, seed: { pvcName: "seed" } },
      restoreFrom: { rootfsSnapshotName: "p-rootfs-snapshot", workspaceSnapshotName: "p-ws" },
    });
    const group = "snapshot.storage.k8s.io";
    expect(rootfs.spec?.dataSource).toEqual({
      apiGroup: group,
      kind: "VolumeSnapshot",
      name: "p-rootfs-snapshot",
    });
    expect(workspace.spec?.dataSource).toEqual({
      apiGroup: group,
      kind: "VolumeSnapshot",
      name: "p-ws",
    });
    for (const pvc of [rootfs, workspace]) expect(pvc.metadata?.annotations).toBeUndefined();
    expect(rootfs.metadata?.labels?.["pod.cubeplex.ai/rootfs-podd"]).toBeUndefined();
  });
});
