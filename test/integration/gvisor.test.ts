import { randomBytes } from "node:crypto";
import { release } from "node:os";
import { CLUSTER_DIR, Kube, paths } from "../../testkit/kube";
import { podTemplate, realTemplate } from "../../testkit/objects";
import { PoddClient } from "../../testkit/podd-client";
import { ALL_INSTALLED, install, installed } from "./installed-tree";
import { inNamespace } from "./lifecycle-helpers";

/*
 * Sandboxes under gVisor on the real node (the RuntimeClass gvisor, handler runsc: real-node.sh):
 * the boundary their code meets, and the rootfs volume as their root there as under runc. The
 * module is the local one; each daemon is called on its Pod IP as the gateway calls it.
 */

const kube = new Kube();
const SIZE = "1Gi";
let ns: string;
let h: ReturnType<typeof inNamespace>;

beforeAll(async () => {
  ns = await kube.namespace("it-gvisor");
  h = inNamespace(kube, ns);
  const spec = { ...realTemplate("Filesystem", SIZE), runtimeClassName: "gvisor" };
  await kube.mustCreate(paths.podtemplates(ns), podTemplate("gvisor", spec));
  const seeded = { ...spec, rootfs: { size: SIZE, seed: true } };
  await kube.mustCreate(paths.podtemplates(ns), podTemplate("gvisor-seeded", seeded));
  await kube.mustCreate(
    paths.podtemplates(ns),
    podTemplate("runc", realTemplate("Filesystem", SIZE)),
  );
});
afterAll(async () => {
  await kube.delete(`/api/v1/namespaces/${ns}`);
  kube.close();
});

async function running(name: string, reason?: string): Promise<PoddClient> {
  return PoddClient.open(await h.waitPhase(name, "Running", reason, 120_000));
}

describe("a sandbox under gVisor", () => {
  it("runs on its own kernel and sees none of the node: processes, files, other sandboxes' volumes", async () => {
    // Another tenant's data, on a runc sandbox of the same node.
    const secret = `other-${randomBytes(6).toString("hex")}`;
    await h.createBox("neighbour", { templateRef: "runc" });
    await (await running("neighbour")).write(`/workspace/${secret}`, "theirs");

    await h.createBox("guest", { templateRef: "gvisor" });
    const podd = await running("guest");
    const root = (command: string) => podd.sh(command, "root");
    const pod = (await kube.get(paths.pods(ns, "guest"))).body;
    expect(pod.spec.runtimeClassName).toBe("gvisor");

    // gVisor's kernel, not the node's; its log is not even root's to read (no CAP_SYSLOG).
    const kernel = await root("uname -r");
    expect(kernel).not.toBe(`${release()}\n`);
    expect(kernel).toMatch(/gvisor/);
    expect((await podd.run("dmesg", "root")).exit).not.toBe(0);
    // Its processes are its own: podd and what it started, none of the node's.
    const processes = await root("cat /proc/[0-9]*/comm");
    expect(processes).toContain("podd");
    for (const node of ["kubelet", "containerd", "kube-apiserver", "etcd", "systemd"]) {
      expect(processes.split("\n")).not.toContain(node);
    }
    // Not the node's root: the cluster's state directory and the other sandbox's file are nowhere.
    expect(await root(`test -e ${CLUSTER_DIR} && echo seen || echo unseen`)).toBe("unseen\n");
    const found = await root(
      `find / -path /proc -prune -o -path /sys -prune -o -name ${secret} -print 2>/dev/null; true`,
    );
    expect(found).toBe("");
    // The template's seccomp filter holds inside gVisor's kernel too.
    expect(await root("grep '^Seccomp:' /proc/self/status")).toBe("Seccomp:\t2\n");
    // Even as root it cannot load kernel modules or reach the host's devices.
    expect(await root("ls /dev")).not.toMatch(/\b(sda|vda|nvme0n1|kvm|mem)\b/);
  });

  it("has the rootfs volume as its root: what it installs survives a pause (a new boot), goes with a fork (Clone), and a reset drops it", async () => {
    await h.createBox("installer", { templateRef: "gvisor" });
    let podd = await running("installer");
    // The image's tree as filled onto the volume: its user, and sudo for it (set-user-ID).
    expect(await podd.sh("id -un; sudo -n id -un", "user")).toBe("user\nroot\n");
    await install(podd);
    const bootId = () => podd.sh("cat /proc/sys/kernel/random/boot_id");
    const booted = await bootId();
    await h.patchBox("installer", { desiredState: "Paused" });
    await h.waitPhase("installer", "Paused", undefined, 60_000);
    await h.patchBox("installer", { desiredState: "Running" });
    podd = await running("installer", "Resumed");
    expect(await installed(podd)).toBe(ALL_INSTALLED);
    // A kernel of its own, booted anew (what E2B's filesystem-only pause tests read).
    expect(await bootId()).not.toBe(booted);

    await h.createBox("installer-fork", { templateRef: "gvisor", forkFrom: "installer" });
    const fork = await running("installer-fork", "ForkCloned");
    expect(await installed(fork)).toBe(ALL_INSTALLED);
    await fork.sh("echo mine > /etc/only-in-fork", "root");
    expect(await podd.sh("ls /etc/only-in-fork 2>/dev/null; true")).toBe("");

    await h.patchBox("installer", { rootfsGeneration: 2 });
    podd = await running("installer", "RootFSReset");
    expect(await installed(podd)).toBe("");
  });

  it("hands out a warm standby that starts from the image: a clone of the seed a gVisor Pod filled", async () => {
    await kube.waitForItems(
      `${paths.pvcs(ns)}?labelSelector=pod.cubeplex.ai/seed-filled=true`,
      items => items.length === 1,
      180_000,
    );
    await h.readyPool("gvisor-pool", "gvisor-seeded", 1, 180_000);
    const [standby] = await kube.names(paths.pods(ns), "pod.cubeplex.ai/pool=gvisor-pool");
    const pod = (await kube.get(paths.pods(ns, standby))).body;
    expect(pod.spec.initContainers ?? []).toEqual([]);
    await h.createBox("claimed", { warmPoolRef: "gvisor-pool" });
    const podd = await running("claimed", "WarmPoolClaimed");
    expect(await podd.sh("uname -r")).toMatch(/gvisor/);
    expect(await installed(podd)).toBe("");
    expect(await podd.sh("id -un; sudo -n id -un", "user")).toBe("user\nroot\n");
    await kube.mergePatch(paths.podwarmpools(ns, "gvisor-pool"), { spec: { replicas: 0 } });
  });
});
