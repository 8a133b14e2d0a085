import { buildBoxPod } from "../../../capabilities/manifests/pod";
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
    expect(envOf(pod).CUBEPOD_SKIP_PIVOT).toBeUndefined();
    expect(envOf(pod).CUBEPOD_VOLUME_MODE).toBe("Block");
  });

  it("mounts the rootfs and workspace in Filesystem mode, keeping the pivot under a VM runtime", () => {
    const pod = buildBoxPod(input(template({ volumeMode: "Filesystem" })));
    const c = pod.spec!.containers[0];
    expect(c.volumeMounts).toEqual([
      { name: "rootfs", mountPath: "/mnt/cubepod/rootfs" },
      { name: "workspace", mountPath: "/workspace" },
    ]);
    expect(c.volumeDevices).toBeUndefined();
    expect(pod.spec?.runtimeClassName).toBe("kata-qemu");
    expect(envOf(pod).CUBEPOD_SKIP_PIVOT).toBeUndefined();
  });

  it("omits the runtime class and skips the pivot for Filesystem without a runtime class", () => {
    const pod = buildBoxPod(input(template({ volumeMode: "Filesystem", runtimeClassName: "" })));
    expect(pod.spec).not.toHaveProperty("runtimeClassName");
    expect(envOf(pod).CUBEPOD_SKIP_PIVOT).toBe("1");
  });

  it("omits the runtime class in Block mode without one, and still does not skip the pivot", () => {
    const pod = buildBoxPod(input(template({ runtimeClassName: "" })));
    expect(pod.spec).not.toHaveProperty("runtimeClassName");
    expect(envOf(pod).CUBEPOD_SKIP_PIVOT).toBeUndefined();
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
});
