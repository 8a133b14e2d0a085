import { buildBoxPod } from "../../../capabilities/manifests/pod";
import { DEFAULT_ROOTFS_PATHS } from "../../../capabilities/api/podtemplate";
import { templateHash } from "../../../capabilities/manifests/template-hash";
import { OWNER, template } from "../fixtures";

const input = (t = template()) => ({
  namespace: "ns",
  podName: "box",
  boxName: "box",
  template: t,
  rootfsPVCName: "box-rootfs-g1",
  workspacePVCName: "box-workspace",
});
const envOf = (pod: ReturnType<typeof buildBoxPod>) =>
  Object.fromEntries((pod.spec?.containers[0].env ?? []).map(e => [e.name, e.value]));

describe("buildBoxPod", () => {
  it("runs podd-init then podd in the template's image and runtime class", () => {
    const pod = buildBoxPod({ ...input(), owner: OWNER, labels: { "pod.cubeplex.ai/pool": "p" } });
    const c = pod.spec!.containers[0];
    expect(pod.metadata).toMatchObject({
      name: "box",
      namespace: "ns",
      ownerReferences: [OWNER],
      labels: {
        "pod.cubeplex.ai/box": "box",
        "pod.cubeplex.ai/template": "python",
        "pod.cubeplex.ai/template-hash": templateHash(template().spec),
        "pod.cubeplex.ai/pool": "p",
        "app.kubernetes.io/managed-by": "cubepod",
      },
    });
    expect(pod.spec?.runtimeClassName).toBe("kata-qemu");
    expect(c.image).toBe("ghcr.io/x/sandbox:1");
    expect(c.command).toEqual(["/opt/cubepod/bin/podd-init", "/opt/cubepod/bin/podd"]);
    expect(c.ports).toEqual([{ name: "envd", containerPort: 49983, protocol: "TCP" }]);
    expect(c.readinessProbe?.httpGet).toEqual({ path: "/health", port: "envd" });
    expect(pod.spec?.automountServiceAccountToken).toBe(false);
    expect(pod.spec?.volumes).toEqual([
      { name: "rootfs", persistentVolumeClaim: { claimName: "box-rootfs-g1" } },
      { name: "workspace", persistentVolumeClaim: { claimName: "box-workspace" } },
    ]);
  });

  it("attaches raw block devices in Block mode", () => {
    const pod = buildBoxPod(input());
    const c = pod.spec!.containers[0];
    expect(c.volumeDevices).toEqual([
      { name: "rootfs", devicePath: "/dev/cubepod-rootfs" },
      { name: "workspace", devicePath: "/dev/cubepod-workspace" },
    ]);
    expect(c.volumeMounts).toBeUndefined();
    expect(envOf(pod).CUBEPOD_VOLUME_MODE).toBe("Block");
  });

  it("mounts the template's root directories from the rootfs volume in Filesystem mode", () => {
    const pod = buildBoxPod(input(template({ volumeMode: "Filesystem" })));
    const c = pod.spec!.containers[0];
    expect(c.volumeMounts).toEqual([
      ...DEFAULT_ROOTFS_PATHS.map(p => ({ name: "rootfs", mountPath: `/${p}`, subPath: p })),
      { name: "workspace", mountPath: "/workspace" },
    ]);
    expect(c.volumeDevices).toBeUndefined();
    expect(pod.spec?.runtimeClassName).toBe("kata-qemu");
  });

  it("mounts only the directories a template names", () => {
    const tpl = template({ volumeMode: "Filesystem" });
    tpl.spec.rootfs.paths = ["usr", "etc"];
    expect(buildBoxPod(input(tpl)).spec!.containers[0].volumeMounts).toEqual([
      { name: "rootfs", mountPath: "/usr", subPath: "usr" },
      { name: "rootfs", mountPath: "/etc", subPath: "etc" },
      { name: "workspace", mountPath: "/workspace" },
    ]);
  });

  it("omits the runtime class when the template has none, in either mode", () => {
    for (const volumeMode of ["Filesystem", "Block"] as const) {
      const pod = buildBoxPod(input(template({ volumeMode, runtimeClassName: "" })));
      expect(pod.spec).not.toHaveProperty("runtimeClassName");
    }
  });

  it("carries the template's env, resources and envd port", () => {
    const pod = buildBoxPod(
      input(
        template({
          envdPort: 5000,
          env: [{ name: "A", value: "1" }],
          resources: { limits: { memory: "1Gi" } },
        }),
      ),
    );
    const c = pod.spec!.containers[0];
    expect(envOf(pod)).toMatchObject({ A: "1", CUBEPOD_ENVD_PORT: "5000" });
    expect(c.resources).toEqual({ limits: { memory: "1Gi" } });
    expect(c.ports?.[0].containerPort).toBe(5000);
  });

  it("places the Pod where the template says: node selector, tolerations, affinity, priority", () => {
    const scheduling = {
      nodeSelector: { "cubepod.dev/node": "real" },
      tolerations: [{ key: "cubepod.dev/real-node", operator: "Exists", effect: "NoSchedule" }],
      affinity: {
        nodeAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: {
            nodeSelectorTerms: [{ matchExpressions: [{ key: "kata", operator: "Exists" }] }],
          },
        },
      },
      priorityClassName: "sandboxes",
    };
    const pod = buildBoxPod(input(template(scheduling)));
    expect(pod.spec).toMatchObject(scheduling);
    // Unset, none of them is written.
    const plain = buildBoxPod(input()).spec!;
    for (const f of Object.keys(scheduling)) expect(plain).not.toHaveProperty(f);
    // A placement change is a new version of the template: its standbys are replaced.
    expect(templateHash(template(scheduling).spec)).not.toBe(templateHash(template().spec));
  });

  it("keeps a template's version when it only names how paused forks take volumes", () => {
    const snapshots = template({ volumeSnapshotClassName: "snaps" });
    expect(templateHash(snapshots.spec)).toBe(templateHash(template().spec));
  });
});
