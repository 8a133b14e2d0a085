import { DEFAULT_PODD_INJECTOR_IMAGE } from "../../../capabilities/api/podd-injector";
import type { V1Pod } from "@kubernetes/client-node";
import { DEFAULT_VM_RUNTIME_CLASSES } from "../../../capabilities/config";
import {
  BLOCK_CAPABILITIES,
  injectRuntime,
  SANDBOX_CAPABILITIES,
} from "../../../capabilities/manifests/injection";
import { buildBoxPod } from "../../../capabilities/manifests/pod";
import { template } from "../fixtures";

const KEY = Buffer.alloc(32, 7).toString("base64");
const VM = DEFAULT_VM_RUNTIME_CLASSES;
const EGRESS = { enabled: true, image: "proxy:1", allowHosts: ["pypi.org", "*.github.com"] };

const built = (t = template(), rootfsPodd?: string) =>
  buildBoxPod({
    namespace: "ns",
    podName: "box",
    boxName: "box",
    template: t,
    rootfsPVCName: "r",
    workspacePVCName: "w",
    rootfsPodd,
  });

const handWritten = (): V1Pod => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "hand", labels: { "pod.cubeplex.ai/template": "python" } },
  spec: { containers: [{ name: "main", image: "img" }] },
});

describe("injectRuntime", () => {
  it("adds podd-installer and mounts its emptyDir at /opt/cubepod/bin", () => {
    const t = template({ runtimeClassName: "" });
    const pod = injectRuntime(built(t), t.spec, KEY, VM);
    expect(pod.spec?.initContainers).toEqual([
      {
        name: "podd-installer",
        image: DEFAULT_PODD_INJECTOR_IMAGE,
        command: ["cp", "/opt/cubepod/bin/podd-init", "/opt/cubepod/bin/podd", "/cubepod-bin/"],
        volumeMounts: [{ name: "cubepod-bin", mountPath: "/cubepod-bin" }],
        securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } },
      },
    ]);
    expect(pod.spec?.volumes).toContainEqual({ name: "cubepod-bin", emptyDir: {} });
    expect(pod.spec?.containers[0].volumeMounts).toContainEqual({
      name: "cubepod-bin",
      mountPath: "/opt/cubepod/bin",
      readOnly: true,
    });
    expect(pod.spec?.containers).toHaveLength(1);
    expect(pod.metadata?.annotations?.["pod.cubeplex.ai/injected"]).toBe("true");
  });

  it("adds the egress sidecar and points the sandbox's proxy at it", () => {
    const t = template({ egress: { ...EGRESS, secretName: "egress-creds" } });
    const pod = injectRuntime(built(t), t.spec, KEY, VM);
    const sidecar = pod.spec?.containers.find(c => c.name === "egress");
    expect(sidecar).toMatchObject({ image: "proxy:1", ports: [{ containerPort: 15001 }] });
    expect(sidecar?.env).toContainEqual({
      name: "CUBEPOD_EGRESS_ALLOW_HOSTS",
      value: "pypi.org,*.github.com",
    });
    expect(sidecar?.volumeMounts).toEqual([
      { name: "cubepod-egress", mountPath: "/etc/cubepod/egress", readOnly: true },
    ]);
    expect(pod.spec?.volumes).toContainEqual({
      name: "cubepod-egress",
      secret: { secretName: "egress-creds", defaultMode: 0o400 },
    });
    expect(pod.spec?.containers[0].env).toContainEqual({
      name: "HTTPS_PROXY",
      value: "http://127.0.0.1:15001",
    });
  });

  it("leaves the sidecar out when egress is disabled", () => {
    const t = template({ egress: { ...EGRESS, enabled: false } });
    const pod = injectRuntime(built(t), t.spec, KEY, VM);
    expect(pod.spec?.containers.map(c => c.name)).toEqual(["sandbox"]);
    expect(pod.spec?.containers[0].env?.map(e => e.name)).not.toContain("HTTPS_PROXY");
  });

  it("gives the daemon the gateway's public key and its Pod's UID", () => {
    const t = template();
    const pod = injectRuntime(built(t), t.spec, KEY, VM);
    const sandbox = pod.spec!.containers[0];
    expect(sandbox.env).toContainEqual({ name: "CUBEPOD_CONTROL_PUBLIC_KEY", value: KEY });
    expect(sandbox.env).toContainEqual({
      name: "CUBEPOD_POD_UID",
      valueFrom: { fieldRef: { fieldPath: "metadata.uid" } },
    });
    // A key declared in Git is replaced.
    const hand = handWritten();
    hand.spec!.containers[0].env = [{ name: "CUBEPOD_CONTROL_PUBLIC_KEY", value: "forged" }];
    const main = injectRuntime(hand, t.spec, KEY, VM).spec!.containers[0];
    expect(main.env?.filter(e => e.name === "CUBEPOD_CONTROL_PUBLIC_KEY")).toEqual([
      { name: "CUBEPOD_CONTROL_PUBLIC_KEY", value: KEY },
    ]);
  });

  it("hardens the sandbox: podd's capabilities only, no escalation, the runtime's seccomp filter", () => {
    const t = template({ runtimeClassName: "" });
    const pod = injectRuntime(built(t), t.spec, KEY, VM);
    expect(pod.spec?.containers[0].securityContext).toEqual({
      privileged: false,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ["ALL"], add: SANDBOX_CAPABILITIES },
      seccompProfile: { type: "RuntimeDefault" },
    });
    expect(pod.spec?.securityContext?.seccompProfile).toEqual({ type: "RuntimeDefault" });
    expect(SANDBOX_CAPABILITIES).not.toContain("NET_RAW");
    expect(SANDBOX_CAPABILITIES).not.toContain("SYS_ADMIN");
  });

  it("relaxes only what the template says, and nothing a Pod declares", () => {
    const t = template({
      runtimeClassName: "",
      security: { allowPrivilegeEscalation: true, seccompProfile: "Unconfined" },
    });
    const hand = handWritten();
    hand.spec!.securityContext = { seccompProfile: { type: "Localhost", localhostProfile: "x" } };
    hand.spec!.containers[0].securityContext = {
      privileged: true,
      runAsUser: 0,
      capabilities: { add: ["SYS_ADMIN", "NET_RAW"] },
    };
    const pod = injectRuntime(hand, t.spec, KEY, VM);
    expect(pod.spec?.containers[0].securityContext).toEqual({
      runAsUser: 0,
      privileged: false,
      allowPrivilegeEscalation: true,
      capabilities: { drop: ["ALL"], add: SANDBOX_CAPABILITIES },
      seccompProfile: { type: "Unconfined" },
    });
    expect(pod.spec?.securityContext?.seccompProfile).toEqual({ type: "Unconfined" });
  });

  it("with egress, isolates the Pod before the sandbox starts: only the sidecar's marked sockets leave", () => {
    const t = template({ egress: { enabled: true } });
    const pod = injectRuntime(built(t), t.spec, KEY, VM);
    expect(pod.spec?.initContainers?.map(c => c.name)).toEqual([
      "podd-installer",
      "egress-isolate",
    ]);
    expect(pod.spec?.initContainers?.[1]).toMatchObject({
      image: t.spec.poddInjectorImage,
      command: ["/opt/cubepod/bin/cubepod-egress", "isolate"],
      env: [{ name: "CUBEPOD_EGRESS_MARK", value: "0x4350" }],
      securityContext: { capabilities: { drop: ["ALL"], add: ["NET_ADMIN"] } },
    });
    // CubePod's own proxy when the template names none; a named image keeps its entrypoint.
    const own = pod.spec?.containers.find(c => c.name === "egress");
    expect(own).toMatchObject({
      image: t.spec.poddInjectorImage,
      command: ["/opt/cubepod/bin/cubepod-egress", "proxy"],
      securityContext: { capabilities: { drop: ["ALL"], add: ["NET_RAW"] } },
    });
    expect(own?.env).toContainEqual({ name: "CUBEPOD_EGRESS_MARK", value: "0x4350" });
    const t2 = template({ egress: EGRESS });
    const theirs = injectRuntime(built(t2), t2.spec, KEY, VM).spec?.containers.find(
      c => c.name === "egress",
    );
    expect(theirs?.image).toBe("proxy:1");
    expect(theirs?.command).toBeUndefined();
    // The sandbox container never gets the sidecar's credentials.
    const creds = template({ egress: { enabled: true, secretName: "creds" } });
    const sandbox = injectRuntime(built(creds), creds.spec, KEY, VM).spec!.containers[0];
    expect(sandbox.volumeMounts?.map(m => m.name)).not.toContain("cubepod-egress");
  });

  it("removes the service account token the API server gave a hand-written Pod", () => {
    const t = template();
    const pod = handWritten();
    const tokenMount = {
      name: "kube-api-access-x1",
      mountPath: "/var/run/secrets/kubernetes.io/serviceaccount",
      readOnly: true,
    };
    pod.spec!.volumes = [
      { name: "data", emptyDir: {} },
      {
        name: "kube-api-access-x1",
        projected: { sources: [{ serviceAccountToken: { path: "token" } }] },
      },
    ];
    pod.spec!.containers[0].volumeMounts = [{ name: "data", mountPath: "/data" }, tokenMount];
    pod.spec!.initContainers = [{ name: "prep", image: "img", volumeMounts: [tokenMount] }];
    const out = injectRuntime(pod, t.spec, KEY, VM);
    expect(out.spec!.automountServiceAccountToken).toBe(false);
    const all = [...out.spec!.initContainers!, ...out.spec!.containers];
    expect(all.flatMap(c => c.volumeMounts ?? []).map(m => m.name)).not.toContain(tokenMount.name);
    expect(out.spec!.volumes!.map(v => v.name)).toEqual(["data", "cubepod-bin"]);
    expect(out.spec!.containers[0].volumeMounts).toContainEqual({
      name: "data",
      mountPath: "/data",
    });
  });

  it("injects a Pod whose name is not known yet (generateName), as a Deployment's", () => {
    const t = template({ egress: EGRESS });
    const unnamed = { ...built(t), metadata: { generateName: "web-", labels: {} } };
    const pod = injectRuntime(unnamed, t.spec, KEY, VM);
    expect(pod.spec?.initContainers?.map(c => c.name)).toContain("podd-installer");
    // Nothing injected is named after the Pod; this template names no Secret, so none is mounted.
    expect(pod.spec?.volumes?.filter(v => v.secret)).toEqual([]);
  });

  it.each([
    ["plain", template()],
    ["egress", template({ egress: { ...EGRESS, secretName: "egress-creds" } })],
  ])("is idempotent (%s)", (_, t) => {
    const once = injectRuntime(built(t), t.spec, KEY, VM);
    expect(injectRuntime(once, t.spec, KEY, VM)).toEqual(once);
  });

  it("in Filesystem mode, fills the rootfs volume from the template's image before the sandbox starts", () => {
    const t = template({ volumeMode: "Filesystem", egress: EGRESS });
    const pod = injectRuntime(built(t), t.spec, KEY, VM);
    const names = pod.spec?.initContainers?.map(c => c.name);
    // After podd-installer (it runs the copied podd-init), before any sandbox code.
    expect(names).toEqual(["podd-installer", "rootfs-fill", "egress-isolate"]);
    expect(pod.spec?.initContainers?.[1]).toEqual({
      name: "rootfs-fill",
      image: "ghcr.io/x/sandbox:1",
      command: ["/opt/cubepod/bin/podd-init", "fill"],
      terminationMessagePolicy: "FallbackToLogsOnError",
      env: [
        { name: "CUBEPOD_ROOTFS_DIRS", value: "etc,home,opt,root,srv,tmp,usr,var" },
        { name: "CUBEPOD_ROOTFS_IMAGE", value: "ghcr.io/x/sandbox:1" },
      ],
      volumeMounts: [
        { name: "cubepod-bin", mountPath: "/opt/cubepod/bin", readOnly: true },
        { name: "rootfs", mountPath: "/mnt/cubepod/rootfs" },
      ],
      securityContext: {
        runAsUser: 0,
        runAsGroup: 0,
        allowPrivilegeEscalation: false,
        capabilities: {
          drop: ["ALL"],
          add: ["CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "SETFCAP"],
        },
      },
    });
    // The sandbox has the volume's copies as its directories, podd from where the fill keeps
    // it, and the whole volume nowhere.
    const mounts = pod.spec?.containers[0].volumeMounts ?? [];
    expect(mounts.filter(m => m.name === "rootfs").map(m => [m.mountPath, m.subPath])).toEqual([
      ...["etc", "home", "opt", "root", "srv", "tmp", "usr", "var"].map(p => [`/${p}`, p]),
      ["/opt/cubepod/bin", ".cubepod/bin"],
    ]);
    expect(mounts.find(m => m.mountPath === "/opt/cubepod/bin")?.readOnly).toBe(true);
    // podd measures the sandbox's disk on the volume, by its directories.
    expect(pod.spec?.containers[0].env).toContainEqual({
      name: "CUBEPOD_ROOTFS_DIRS",
      value: "etc,home,opt,root,srv,tmp,usr,var",
    });
    expect(pod.metadata?.annotations?.["pod.cubeplex.ai/podd-image"]).toBe(
      t.spec.poddInjectorImage,
    );
  });

  it("starts a Pod on a volume an earlier Pod filled with no init container but the egress rules", () => {
    const t = template({ volumeMode: "Filesystem", egress: EGRESS });
    const pod = (rootfsPodd: string) => injectRuntime(built(t, rootfsPodd), t.spec, KEY, VM);
    const prepared = pod(t.spec.poddInjectorImage);
    expect(prepared.spec?.initContainers?.map(c => c.name)).toEqual(["egress-isolate"]);
    expect(prepared.spec?.volumes?.map(v => v.name)).not.toContain("cubepod-bin");
    expect(prepared.spec?.containers[0].volumeMounts).toContainEqual({
      name: "rootfs",
      mountPath: "/opt/cubepod/bin",
      subPath: ".cubepod/bin",
      readOnly: true,
    });
    // A volume whose podd came from another injector image gets this one's, and a fill.
    const older = pod("ghcr.io/cubeplex/podd-injector:v0.0.9");
    expect(older.spec?.initContainers?.map(c => c.name)).toEqual([
      "podd-installer",
      "rootfs-fill",
      "egress-isolate",
    ]);
  });

  it("fills nothing in Block mode: podd-init mounts the devices, with rights a VM runtime gets", () => {
    const t = template({ runtimeClassName: "kata-qemu", rootfs: { paths: ["usr", "etc"] } });
    const pod = injectRuntime(built(t), t.spec, KEY, VM);
    expect(pod.spec?.initContainers?.map(c => c.name)).toEqual(["podd-installer"]);
    expect(pod.spec?.initContainers?.[0].command).toEqual([
      "cp",
      "-r",
      "/opt/cubepod/bin/mke2fs",
      "/opt/cubepod/bin/podd-init",
      "/opt/cubepod/bin/podd",
      "/cubepod-bin/",
    ]);
    const main = pod.spec!.containers[0];
    expect(main.securityContext?.capabilities).toEqual({
      drop: ["ALL"],
      add: [...SANDBOX_CAPABILITIES, ...BLOCK_CAPABILITIES].sort(),
    });
    expect(main.securityContext?.privileged).toBe(false);
    expect(main.env).toEqual(
      expect.arrayContaining([
        { name: "CUBEPOD_ROOTFS_DIRS", value: "usr,etc" },
        { name: "CUBEPOD_ROOTFS_IMAGE", value: "ghcr.io/x/sandbox:1" },
      ]),
    );
    expect(main.volumeDevices?.map(d => d.devicePath)).toEqual([
      "/dev/cubepod-rootfs",
      "/dev/cubepod-workspace",
    ]);
  });

  it("gives a Block mode sandbox outside a VM runtime no right to mount", () => {
    for (const runtimeClassName of ["", "gvisor"]) {
      const t = template({ runtimeClassName });
      const pod = injectRuntime(built(t), t.spec, KEY, VM);
      expect(pod.spec!.containers[0].securityContext?.capabilities?.add).toEqual(
        SANDBOX_CAPABILITIES,
      );
      expect(pod.spec?.initContainers?.[0].command).not.toContain("/opt/cubepod/bin/mke2fs");
    }
    // What the module is told is a VM decides, not the name.
    const t = template({ runtimeClassName: "vm-standin" });
    const pod = injectRuntime(built(t), t.spec, KEY, ["vm-standin"]);
    expect(pod.spec!.containers[0].securityContext?.capabilities?.add).toContain("SYS_ADMIN");
  });

  it("gives a hand-written Filesystem Pod with a rootfs volume the same root as a built one", () => {
    const t = template({ volumeMode: "Filesystem" });
    const hand = handWritten();
    hand.spec!.volumes = [{ name: "rootfs", persistentVolumeClaim: { claimName: "r" } }];
    // A mount of its own at one of the paths is replaced, not doubled.
    hand.spec!.containers[0].volumeMounts = [{ name: "rootfs", mountPath: "/usr" }];
    const out = injectRuntime(hand, t.spec, KEY, VM);
    const ours = injectRuntime(built(t), t.spec, KEY, VM);
    expect(out.spec?.initContainers).toEqual(ours.spec?.initContainers);
    const rootfs = (p: V1Pod) =>
      p.spec?.containers[0].volumeMounts
        ?.filter(m => m.name === "rootfs")
        .sort((a, b) => a.mountPath.localeCompare(b.mountPath));
    expect(rootfs(out)).toEqual(rootfs(ours));
    // Without a rootfs volume, nothing to fill.
    expect(injectRuntime(handWritten(), t.spec, KEY, VM).spec?.initContainers).toHaveLength(1);
  });

  it("does not change its input", () => {
    const t = template({ egress: EGRESS });
    const pod = built(t);
    const copy = structuredClone(pod);
    injectRuntime(pod, t.spec, KEY, VM);
    expect(pod).toEqual(copy);
  });

  it("makes a hand-written Pod match an operator-built one in its runtime parts", () => {
    const t = template({ egress: EGRESS });
    const hand = injectRuntime(handWritten(), t.spec, KEY, VM);
    const ours = injectRuntime(built(t), t.spec, KEY, VM);
    expect(hand.spec?.initContainers).toEqual(ours.spec?.initContainers);
    expect(hand.spec?.containers.find(c => c.name === "egress")).toEqual(
      ours.spec?.containers.find(c => c.name === "egress"),
    );
    // The first container is the sandbox when none is called "sandbox".
    expect(hand.spec?.containers[0].volumeMounts?.[0].mountPath).toBe("/opt/cubepod/bin");
  });

  it("replaces a stale installer declared in Git instead of adding a second one", () => {
    const t = template();
    const pod = handWritten();
    pod.spec!.initContainers = [{ name: "podd-installer", image: "old:0" }];
    const out = injectRuntime(pod, t.spec, KEY, VM);
    expect(out.spec?.initContainers).toHaveLength(1);
    expect(out.spec?.initContainers?.[0].image).toBe(DEFAULT_PODD_INJECTOR_IMAGE);
  });
});
