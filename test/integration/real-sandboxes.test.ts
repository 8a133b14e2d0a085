import { execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { Sandbox } from "e2b";
import { closeSync, openSync, readdirSync, readFileSync, readSync, writeSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { TENANT_DEFAULTS, useTenantDefault } from "../../testkit/tenant";
import { auditEvents } from "../../testkit/audit-log";
import { eventsAbout, Kube, KUBECONFIG, Obj, paths, REGISTRY, ROOT } from "../../testkit/kube";
import { podAPIKey, podTemplate, realTemplate } from "../../testkit/objects";
import {
  DEPLOYMENTS,
  deployedGatewayUrl,
  deployedTokenKey,
  deployModule,
  MODULE_NAMESPACE,
  restartDeployments,
  undeployModule,
} from "../../testkit/deployed-module";
import { inNamespace } from "./lifecycle-helpers";
import { PoddClient } from "../../testkit/podd-client";
import { ALL_INSTALLED, install, installed } from "./installed-tree";

/*
 * Sandboxes that really run, on the real node (local-cluster/real-node.sh): podd under runc, on
 * local volumes of the class cubepod-local (directories, and loop devices for Block). Data is
 * written and read through the daemon's own API on the Pod IP, as the gateway and the E2B SDK do.
 * The module runs here as a cluster runs it: installed from its Helm chart, on the real node, as
 * its own ServiceAccount, its webhooks called through their Service (deployed-module.ts).
 */

const kube = new Kube();
let ns: string;
let h: ReturnType<typeof inNamespace>;
/** The deployed gateway's token key, from which its credentials for the daemons follow. */
let tokenKey: string;
const WORKSPACE_FILE = "/workspace/notes.txt";
const VOLUME_SIZE = "1Gi";

beforeAll(async () => {
  await deployModule(kube);
  tokenKey = await deployedTokenKey(kube);
  ns = await kube.namespace("it-real");
  h = inNamespace(kube, ns);
  await kube.mustCreate(
    paths.podtemplates(ns),
    podTemplate("fs", realTemplate("Filesystem", VOLUME_SIZE)),
  );
  await kube.mustCreate(
    paths.podtemplates(ns),
    // A device is as large as its claim: the rootfs one holds the image's copy (241 MiB).
    podTemplate("block", { ...realTemplate("Block", VOLUME_SIZE), rootfs: { size: "512Mi" } }),
  );
});
afterAll(async () => {
  await kube.delete(`/api/v1/namespaces/${ns}`);
  await undeployModule(kube);
  kube.close();
});

const MODULE_USER = `system:serviceaccount:${MODULE_NAMESPACE}:pepr-cubepod`;

describe("the module as its chart installs it", () => {
  it("runs on the real node, as its own ServiceAccount, its webhooks behind their Service", async () => {
    const pods = await kube.get(`/api/v1/namespaces/${MODULE_NAMESPACE}/pods`);
    const byApp = (name: string) =>
      pods.body.items.filter((p: Obj) => p.metadata.ownerReferences?.[0]?.name.startsWith(name));
    for (const name of DEPLOYMENTS) expect(byApp(name).length).toBeGreaterThan(0);
    for (const pod of pods.body.items as Obj[]) {
      if (pod.metadata.deletionTimestamp) continue;
      expect(pod.spec.nodeName).toBe("cubepod-real-0");
      expect(pod.status.podIP).toMatch(/^198\.18\.0\./);
    }
    for (const name of ["pepr-cubepod", "pepr-cubepod-watcher"]) {
      expect(byApp(name)[0].spec.serviceAccountName).toBe("pepr-cubepod");
    }
    const hooks = await kube.get(
      "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/pepr-cubepod",
    );
    // The gateway in its Pod answers E2B's API from there: a key it does not know gets 401.
    const gateway = byApp("cubepod-gateway")[0];
    const r = await fetch(`http://${gateway.status.podIP}:8080/sandboxes`, {
      headers: { "X-API-Key": "e2b_unknown" },
    });
    expect(r.status).toBe(401);
    expect(await r.json()).toMatchObject({ code: 401 });
    for (const hook of hooks.body.webhooks) {
      expect(hook.clientConfig.service).toMatchObject({
        name: "pepr-cubepod",
        namespace: MODULE_NAMESPACE,
      });
      expect(hook.clientConfig.url).toBeUndefined();
    }
  });

  it("denies bad input through its Service, and `npx pepr monitor` shows the decision", async () => {
    const monitor = spawn("npx", ["pepr", "monitor"], {
      cwd: ROOT,
      env: { ...process.env, KUBECONFIG },
      detached: true,
    });
    let seen = "";
    monitor.stdout.on("data", (c: Buffer) => (seen += c.toString()));
    monitor.stderr.on("data", (c: Buffer) => (seen += c.toString()));
    try {
      // The monitor follows the logs from when it attached: deny until it has shown one.
      // A name only the webhook checks (the CRD cannot see that it becomes a label value).
      const bad = podTemplate("t".repeat(64), realTemplate("Filesystem", VOLUME_SIZE));
      for (let i = 0; i < 60 && !seen.includes("VALIDATE"); i++) {
        const r = await kube.create(paths.podtemplates(ns), bad);
        expect(r.status).toBe(422);
        expect(r.body.message).toContain("metadata.name: must be at most 63 characters");
        await new Promise(r => setTimeout(r, 1000));
      }
      expect(seen).toMatch(/❌ {2}VALIDATE/);
      expect(seen).toContain("metadata.name: must be at most 63 characters");
    } finally {
      process.kill(-monitor.pid!, "SIGKILL");
    }
  });
});

/**
 * The digest the local registry serves for an image the real node pulls by this name: the node's
 * `cubepod.local/...` names are mirrored to it (local-cluster/real-node.sh).
 */
async function registryDigest(image: string): Promise<string> {
  const [repository, tag] = image.replace(/^cubepod\.local\//, "").split(":");
  const r = await fetch(`http://${REGISTRY}/v2/${repository}/manifests/${tag}`, {
    method: "HEAD",
    headers: {
      Accept: [
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.docker.distribution.manifest.v2+json",
      ].join(", "),
    },
  });
  expect(r.status).toBe(200);
  return r.headers.get("docker-content-digest")!;
}

describe("E2B's `Sandbox.create()` with no template, on the images the chart names", () => {
  it("starts the platform's `base` for a tenant with no template, its images pulled from the registry", async () => {
    // The platform's default, as docs/deploy.md has a platform team apply it once.
    const sample = parseAllDocuments(
      readFileSync(join(ROOT, "samples", "tenant-defaults.yaml"), "utf8"),
    ).map(d => d.toJS());
    const base = sample.find(o => o.kind === "PodTemplate" && o.metadata.name === "base");
    expect(base.metadata.namespace).toBe(TENANT_DEFAULTS);
    const restoreDefault = await useTenantDefault(kube, base.spec);
    const tenant = await kube.namespace("it-real-base");
    const apiKey = `e2b_${randomBytes(20).toString("hex")}`;
    await kube.mustCreate(paths.podapikeys(tenant), podAPIKey("agents", apiKey));
    const url = await deployedGatewayUrl(kube);
    const sdk = { apiKey, apiUrl: url, sandboxUrl: url, domain: "cubepod.localhost" };
    try {
      // The SDK asks for E2B's default template, `base`, which the tenant does not have.
      const sbx = await Sandbox.create(sdk);
      const run = await sbx.commands.run("cat /etc/debian_version && whoami");
      expect(run.exitCode).toBe(0);
      expect(run.stdout).toMatch(/^\d+(\.\d+)?\nuser\n$/);

      const box = (await kube.get(paths.podboxes(tenant, sbx.sandboxId))).body;
      expect(box.spec.templateRef).toBe("base");
      const copy = (await kube.get(paths.podtemplates(tenant, "base"))).body;
      expect(copy.metadata.annotations["pod.cubeplex.ai/tenant-default"]).toBe(
        "cubepod-defaults/base",
      );
      // The template names no injector: the chart's `images` values chose it.
      expect(copy.spec.poddInjectorImage).toBeUndefined();
      const pod = (await kube.get(paths.pods(tenant, box.status.podName))).body;
      const statuses: Obj[] = [
        ...(pod.status.initContainerStatuses ?? []),
        ...pod.status.containerStatuses,
      ];
      expect(new Set(statuses.map(s => s.image))).toEqual(
        new Set(["cubepod.local/podd-injector:dev", "cubepod.local/base:dev"]),
      );
      // Each ran the bytes the registry holds for its name: the node pulled them from there.
      for (const s of statuses) {
        const digest = await registryDigest(s.image);
        expect(s.imageID).toBe(`${s.image.split(":")[0]}@${digest}`);
      }
      await Sandbox.kill(sbx.sandboxId, sdk);
    } finally {
      await kube.delete(`/api/v1/namespaces/${tenant}`);
      await restoreDefault();
    }
  });
});

/** The box's daemon, once the box runs, initialised as the deployed gateway would. */
async function running(name: string, reason?: string): Promise<PoddClient> {
  const box = await h.waitPhase(name, "Running", reason, 120_000);
  return PoddClient.open(box, tokenKey);
}

/** The names of a box Pod's init containers. */
const initContainers = async (name: string): Promise<string[]> =>
  ((await kube.get(paths.pods(ns, name))).body.spec.initContainers ?? []).map((c: Obj) => c.name);

const write = (podd: PoddClient, path: string, text: string) => podd.write(path, text);
const read = (podd: PoddClient, path: string) => podd.read(path);
const sh = (podd: PoddClient, command: string) => podd.sh(command);

const pause = async (name: string) => {
  await h.patchBox(name, { desiredState: "Paused" });
  await h.waitPhase(name, "Paused", undefined, 60_000);
};
const resume = async (name: string) => {
  await h.patchBox(name, { desiredState: "Running" });
  return running(name, "Resumed");
};

describe("a sandbox on the real node (Filesystem)", () => {
  it("keeps what an agent installs and its workspace across a pause; a fork (Clone) has them, apart from its parent; a reset keeps only the workspace", async () => {
    await h.createBox("agent", { templateRef: "fs" });
    let podd = await running("agent");
    // The volume's copy of the image is the image: owners, set-user-ID bits, the user's home.
    expect(
      await podd.sh("id -un; stat -c %U ~; sudo -n id -un; . /etc/os-release; echo $ID", "user"),
    ).toBe("user\nuser\nroot\ndebian\n");
    await write(podd, WORKSPACE_FILE, "in the workspace");
    await install(podd);
    expect(await installed(podd)).toBe(ALL_INSTALLED);

    await pause("agent");
    expect(await h.podsOf("agent")).toEqual([]);
    podd = await resume("agent");
    expect(await read(podd, WORKSPACE_FILE)).toBe("in the workspace");
    expect(await installed(podd)).toBe(ALL_INSTALLED);
    // Its volume holds podd since its first start: the resumed Pod needed no init container.
    expect(await initContainers("agent")).toEqual([]);

    // The fork's volumes are the CSI driver's clones of its parent's: no copy Pod.
    await h.createBox("agent-fork", { templateRef: "fs", forkFrom: "agent" });
    const child = await running("agent-fork", "ForkCloned");
    const events = await kube.get(eventsAbout(ns, "agent-fork"));
    expect(events.body.items.map((e: Obj) => e.reason)).not.toContain("ForkCopying");
    for (const role of ["rootfs-g1", "workspace"]) {
      const pvc = (await kube.get(paths.pvcs(ns, `agent-fork-${role}`))).body;
      expect(pvc.spec.dataSource).toMatchObject({
        kind: "PersistentVolumeClaim",
        name: `agent-${role}`,
      });
    }
    expect(await h.podsOf("agent-fork")).toEqual(["agent-fork"]);
    expect(await initContainers("agent-fork")).toEqual([]);
    expect(await read(child, WORKSPACE_FILE)).toBe("in the workspace");
    expect(await installed(child)).toBe(ALL_INSTALLED);
    expect(await child.sh("sudo -n id -un", "user")).toBe("root\n");
    await write(child, WORKSPACE_FILE, "the fork's own");
    await write(child, "/workspace/only-in-fork", "x");
    await child.sh("echo mine > /etc/only-in-fork", "root");
    expect(await read(podd, WORKSPACE_FILE)).toBe("in the workspace");
    expect(await read(podd, "/workspace/only-in-fork")).toBeUndefined();
    expect(await podd.sh("ls /etc/only-in-fork 2>/dev/null; true")).toBe("");

    await h.patchBox("agent", { rootfsGeneration: 2 });
    podd = await running("agent", "RootFSReset");
    expect(await initContainers("agent")).toEqual(["podd-installer", "rootfs-fill"]);
    expect(await read(podd, WORKSPACE_FILE)).toBe("in the workspace");
    expect(await installed(podd)).toBe("");
    // The image's root again, not an empty one.
    expect(await podd.sh("id -un; sudo -n id -un", "user")).toBe("user\nroot\n");
  });

  it("hands out a running warm standby with an empty workspace and the image's root", async () => {
    await h.readyPool("pool", "fs", 1, 120_000);
    await h.createBox("claimed", { warmPoolRef: "pool" });
    const podd = await running("claimed", "WarmPoolClaimed");
    expect(await sh(podd, "ls -A /workspace")).toBe("");
    expect(await installed(podd)).toBe("");
    await kube.mergePatch(paths.podwarmpools(ns, "pool"), { spec: { replicas: 0 } });
  });

  it("runs hardened unless the template relaxes it: no escalation, seccomp, podd's capabilities only", async () => {
    const spec = { ...realTemplate("Filesystem", VOLUME_SIZE), security: {} };
    await kube.mustCreate(paths.podtemplates(ns), podTemplate("hardened", spec));
    await h.createBox("hardened", { templateRef: "hardened" });
    const podd = await running("hardened");
    const status = await podd.sh(
      "grep -E '^(NoNewPrivs|Seccomp|CapBnd):' /proc/self/status",
      "user",
    );
    // CAP_CHOWN, DAC_OVERRIDE, FOWNER, FSETID, KILL, SETGID, SETUID, NET_BIND_SERVICE, AUDIT_WRITE.
    expect(status).toBe("CapBnd:\t00000000200004fb\nNoNewPrivs:\t1\nSeccomp:\t2\n");
    const sudo = await podd.run("sudo -n id -un", "user");
    expect(sudo.exit).not.toBe(0);
    expect(sudo.stderr).toContain("no new privileges");
    // Root in the sandbox is root without the node's rights: no raw sockets, no device nodes.
    const root = await podd.run("mknod /tmp/dev c 1 3 || echo refused", "root");
    expect(root.stdout).toContain("refused");
    await kube.delete(paths.podboxes(ns, "hardened"));
  });

  it("never half-starts a sandbox whose root cannot be filled, and says why", async () => {
    // The image's /bin is a link into /usr (merged /usr): nothing can be mounted over it.
    const spec = {
      ...realTemplate("Filesystem", VOLUME_SIZE),
      rootfs: { size: VOLUME_SIZE, paths: ["usr", "bin"] },
    };
    await kube.mustCreate(paths.podtemplates(ns), podTemplate("links", spec));
    await h.createBox("unfillable", { templateRef: "links" });
    const box = await h.waitPhase("unfillable", "Pending", "PodNotStarting", 120_000);
    expect(box.status.message).toMatch(
      /^Pod unfillable is not starting: container rootfs-fill exited 1 \(Error\): .*\/bin in the image is not a directory/,
    );
    await h.waitEvent("unfillable", "PodNotStarting");
    const pod = (await kube.get(paths.pods(ns, "unfillable"))).body;
    expect(pod.status.containerStatuses[0].state.running).toBeUndefined();
    await kube.delete(paths.podboxes(ns, "unfillable"));
  });

  it("deletes its volumes with Delete; keeps them with Retain, root and workspace, for a new box to re-attach by volumeKey", async () => {
    await h.createBox("gone", { templateRef: "fs" });
    await write(await running("gone"), WORKSPACE_FILE, "x");
    const pvs = await boundVolumes("gone");
    await kube.delete(paths.podboxes(ns, "gone"));
    await h.waitGone(paths.podboxes(ns, "gone"), 60_000);
    for (const pv of pvs) await h.waitGone(`/api/v1/persistentvolumes/${pv}`, 60_000);
    expect(readdirSync(volumesDir).filter(f => pvs.some(pv => f.startsWith(pv)))).toEqual([]);

    await h.createBox("kept", { templateRef: "fs", volumeReclaimPolicy: "Retain" });
    const kept = await running("kept");
    await write(kept, WORKSPACE_FILE, "kept for later");
    await install(kept);
    await kube.delete(paths.podboxes(ns, "kept"));
    await h.waitGone(paths.podboxes(ns, "kept"), 60_000);
    await h.createBox("again", { templateRef: "fs", volumeKey: "kept" });
    const again = await running("again");
    expect(await read(again, WORKSPACE_FILE)).toBe("kept for later");
    expect(await installed(again)).toBe(ALL_INSTALLED);
  });
});

describe("a template's seed on the real node (rootfs.seed)", () => {
  const seeds = () => `${paths.pvcs(ns)}?labelSelector=pod.cubeplex.ai/seed-of=seeded`;
  const fills = () => `${paths.pods(ns)}?labelSelector=pod.cubeplex.ai/seed-of=seeded`;

  it("is filled once from the image; a first start, a reset and a standby clone it and start with no init container; it goes when the template stops asking", async () => {
    const spec = {
      ...realTemplate("Filesystem", VOLUME_SIZE),
      rootfs: { size: VOLUME_SIZE, seed: true },
    };
    await kube.mustCreate(paths.podtemplates(ns), podTemplate("seeded", spec));
    const [seed] = await kube.waitForItems(
      seeds(),
      items => items.some(p => p.metadata.labels["pod.cubeplex.ai/seed-filled"] === "true"),
      180_000,
    );
    expect(seed.metadata.ownerReferences).toEqual([
      expect.objectContaining({ kind: "PodTemplate", name: "seeded", controller: true }),
    ]);
    // Its fill Pod ran under the template's runtime and placement, and goes once it is marked.
    await kube.waitForItems(fills(), items => items.length === 0, 60_000);

    await h.createBox("seeded", { templateRef: "seeded" });
    let podd = await running("seeded");
    expect(await initContainers("seeded")).toEqual([]);
    const rootfs = (await kube.get(paths.pvcs(ns, "seeded-rootfs-g1"))).body;
    expect(rootfs.spec.dataSource).toMatchObject({
      kind: "PersistentVolumeClaim",
      name: seed.metadata.name,
    });
    // The clone is the image's root as a fill leaves it: owners, set-user-ID bits, the home.
    expect(await podd.sh("id -un; stat -c %U ~; sudo -n id -un", "user")).toBe(
      "user\nuser\nroot\n",
    );
    await write(podd, WORKSPACE_FILE, "in the workspace");
    await install(podd);
    await pause("seeded");
    podd = await resume("seeded");
    expect(await installed(podd)).toBe(ALL_INSTALLED);

    await h.patchBox("seeded", { rootfsGeneration: 2 });
    podd = await running("seeded", "RootFSReset");
    expect(await initContainers("seeded")).toEqual([]);
    expect(await read(podd, WORKSPACE_FILE)).toBe("in the workspace");
    expect(await installed(podd)).toBe("");
    // The seed has none of what the box installed: each clone is its own.
    expect(await podd.sh("id -un; sudo -n id -un", "user")).toBe("user\nroot\n");

    await h.readyPool("seeded-pool", "seeded", 1, 120_000);
    const [standby] = await kube.names(paths.pods(ns), "pod.cubeplex.ai/pool=seeded-pool");
    expect(await initContainers(standby)).toEqual([]);
    await h.createBox("seeded-claim", { warmPoolRef: "seeded-pool" });
    const claimed = await running("seeded-claim", "WarmPoolClaimed");
    expect(await installed(claimed)).toBe("");
    await kube.mergePatch(paths.podwarmpools(ns, "seeded-pool"), { spec: { replicas: 0 } });

    await kube.mergePatch(paths.podtemplates(ns, "seeded"), {
      spec: { rootfs: { seed: false } },
    });
    await kube.waitForItems(seeds(), items => items.length === 0, 60_000);
    // The boxes cloned from it keep their own volumes.
    expect(await installed(claimed)).toBe("");
    expect(await read(podd, WORKSPACE_FILE)).toBe("in the workspace");
  });
});

/** The CSI driver's images (local-cluster/csi.sh): a volume's is `<PV name>.img`. */
const volumesDir = `${process.env.CUBEPOD_CLUSTER_DIR ?? `${__dirname}/../../.cluster`}/real-node/pool/volumes`;

/** The PersistentVolumes bound to a volume key's PVCs (its rootfs or workspace only, if given). */
async function boundVolumes(key: string, role?: "rootfs" | "workspace"): Promise<string[]> {
  const pvcs = await kube.get(`${paths.pvcs(ns)}?labelSelector=pod.cubeplex.ai/volume-key=${key}`);
  return pvcs.body.items
    .filter((p: Obj) => !role || p.metadata.name.includes(`-${role}`))
    .map((p: Obj) => p.spec.volumeName as string);
}

describe("a sandbox on the real node (Block)", () => {
  it("gets filesystems on its blank devices and the rootfs as its root: what an agent installs survives a pause, goes with a fork (Clone), and a reset drops it", async () => {
    await h.createBox("raw", { templateRef: "block" });
    let podd = await running("raw");
    // Both devices are ext4 filesystems now, mounted as the root's directories and /workspace;
    // the raw devices and the rights that mounted them are gone.
    expect(
      await podd.sh(
        'awk \'$2=="/workspace"||$2=="/usr"||$2=="/etc"{print $2, $3}\' /proc/mounts | sort; ls /dev/cubepod-* 2>&1; grep CapBnd /proc/self/status',
        "root",
      ),
    ).toBe(
      "/etc ext4\n/usr ext4\n/workspace ext4\n" +
        "ls: cannot access '/dev/cubepod-*': No such file or directory\nCapBnd:\t00000000200004fb\n",
    );
    expect(await podd.sh("id -un; stat -c %U ~; sudo -n id -un", "user")).toBe(
      "user\nuser\nroot\n",
    );
    await write(podd, WORKSPACE_FILE, "in the workspace");
    await install(podd);

    await pause("raw");
    podd = await resume("raw");
    expect(await read(podd, WORKSPACE_FILE)).toBe("in the workspace");
    expect(await installed(podd)).toBe(ALL_INSTALLED);

    await h.createBox("raw-fork", { templateRef: "block", forkFrom: "raw" });
    const child = await running("raw-fork", "ForkCloned");
    expect(await read(child, WORKSPACE_FILE)).toBe("in the workspace");
    expect(await installed(child)).toBe(ALL_INSTALLED);
    await child.sh("echo mine > /etc/only-in-fork", "root");
    expect(await podd.sh("ls /etc/only-in-fork 2>/dev/null; true")).toBe("");

    await h.patchBox("raw", { rootfsGeneration: 2 });
    podd = await running("raw", "RootFSReset");
    expect(await read(podd, WORKSPACE_FILE)).toBe("in the workspace");
    expect(await installed(podd)).toBe("");
    expect(await podd.sh("id -un; sudo -n id -un", "user")).toBe("user\nroot\n");
  });

  it("hands out a standby on new devices; re-attaches Retain's devices by volumeKey with their root", async () => {
    await h.readyPool("block-pool", "block", 1, 120_000);
    await h.createBox("block-claimed", { warmPoolRef: "block-pool" });
    const claimed = await running("block-claimed", "WarmPoolClaimed");
    expect(await sh(claimed, "ls -A /workspace")).toBe("");
    expect(await installed(claimed)).toBe("");
    await kube.mergePatch(paths.podwarmpools(ns, "block-pool"), { spec: { replicas: 0 } });

    await h.createBox("block-kept", { templateRef: "block", volumeReclaimPolicy: "Retain" });
    const kept = await running("block-kept");
    await write(kept, WORKSPACE_FILE, "kept for later");
    await install(kept);
    await kube.delete(paths.podboxes(ns, "block-kept"));
    await h.waitGone(paths.podboxes(ns, "block-kept"), 60_000);
    await h.createBox("block-again", { templateRef: "block", volumeKey: "block-kept" });
    const again = await running("block-again");
    expect(await read(again, WORKSPACE_FILE)).toBe("kept for later");
    expect(await installed(again)).toBe(ALL_INSTALLED);
  });

  it("never formats a device that holds other data: the box says why, and the data stays", async () => {
    await h.createBox("reused", { templateRef: "block" });
    await running("reused");
    await pause("reused");
    // As if the volume had been another system's: foreign bytes where a filesystem begins.
    const [rootfsPV] = await boundVolumes("reused", "rootfs");
    const image = `${volumesDir}/${rootfsPV}.img`;
    const foreign = Buffer.alloc(4096, "not a filesystem ");
    const fd = openSync(image, "r+");
    writeSync(fd, foreign, 0, foreign.length, 0);
    closeSync(fd);

    await h.patchBox("reused", { desiredState: "Running" });
    const box = await h.waitPhase("reused", "Pending", "PodNotStarting", 120_000);
    expect(box.status.message).toMatch(
      /^Pod reused is not starting: container sandbox exited 1 \(Error\): podd-init: \/dev\/cubepod-rootfs holds data that is not an ext4 filesystem: not formatting it/,
    );
    await h.waitEvent("reused", "PodNotStarting");
    const head = Buffer.alloc(foreign.length);
    const rfd = openSync(image, "r");
    readSync(rfd, head, 0, head.length, 0);
    closeSync(rfd);
    expect(head.equals(foreign)).toBe(true);
    await kube.delete(paths.podboxes(ns, "reused"));
  });
});

describe("readiness from the real daemon", () => {
  it("a box runs once its daemon answers, and reports a daemon that stops answering", async () => {
    await h.createBox("probe", { templateRef: "fs" });
    const podd = await running("probe");
    expect((await fetch(`${podd.url}/health`)).status).toBe(204);

    // Stopped, not killed: the container stays, only the daemon no longer answers.
    const pid = poddPid((await kube.get(paths.pods(ns, "probe"))).body.metadata.uid);
    process.kill(pid, "SIGSTOP");
    try {
      const box = await h.waitPhase("probe", "Pending", undefined, 60_000);
      expect(box.status.message).toBe("waiting for Pod probe to be ready");
    } finally {
      process.kill(pid, "SIGCONT");
    }
    await running("probe");
  });
});

describe("a rotation of the gateway's key, with sandboxes running (docs/deploy.md, Keys)", () => {
  const secret = paths.secrets(MODULE_NAMESPACE, "cubepod-gateway-token-key");
  const merge = "application/merge-patch+json";
  const b64 = (s: string) => Buffer.from(s).toString("base64");
  const keyAnnotation = async (id: string) =>
    (await kube.get(paths.podboxes(ns, id))).body.metadata.annotations[
      "pod.cubeplex.ai/sandbox-token-key"
    ];
  const podKey = async (id: string) => {
    const box = (await kube.get(paths.podboxes(ns, id))).body;
    const pod = (await kube.get(paths.pods(ns, box.status.podName))).body;
    const env = pod.spec.containers.flatMap((c: Obj) => c.env ?? []);
    return env.find((e: Obj) => e.name === "CUBEPOD_CONTROL_PUBLIC_KEY").value;
  };

  it("keeps every sandbox serving, its token and envVars; a resume moves it to the new key", async () => {
    const apiKey = `e2b_${randomBytes(20).toString("hex")}`;
    await kube.mustCreate(paths.podapikeys(ns), podAPIKey("rotation", apiKey));
    const sdk = async () => {
      const url = await deployedGatewayUrl(kube);
      return { apiKey, apiUrl: url, sandboxUrl: url, domain: "cubepod.localhost" };
    };
    const original = (await kube.get(secret)).body.data.key;
    const before = await Sandbox.create("fs", { ...(await sdk()), envs: { KEPT: "before" } });
    const beforeKey = await keyAnnotation(before.sandboxId);
    const beforePodKey = await podKey(before.sandboxId);
    try {
      await kube.request(
        "PATCH",
        secret,
        { data: { key: b64(randomBytes(32).toString("hex")), previous: original } },
        merge,
      );
      await restartDeployments(kube, ["pepr-cubepod", "cubepod-gateway"]);

      // Started before: the restarted gateway drives its daemon, which trusts the old key, and
      // hands out the token that daemon holds.
      const again = await Sandbox.connect(before.sandboxId, await sdk());
      expect((await again.commands.run("echo $KEPT")).stdout).toBe("before\n");
      expect(await keyAnnotation(before.sandboxId)).toBe(beforeKey);
      // Started after: its Pod trusts the new key.
      const after = await Sandbox.create("fs", { ...(await sdk()), envs: { KEPT: "after" } });
      expect(await podKey(after.sandboxId)).not.toBe(beforePodKey);
      expect(await keyAnnotation(after.sandboxId)).not.toBe(beforeKey);
      expect((await after.commands.run("echo $KEPT")).stdout).toBe("after\n");

      // A resume starts its daemon anew, under the new key; its envVars (sealed under the old)
      // come with it.
      expect(await again.pause()).toBe(true);
      const resumed = await Sandbox.connect(before.sandboxId, await sdk());
      expect(await keyAnnotation(before.sandboxId)).toBe(await keyAnnotation(after.sandboxId));
      expect(await podKey(before.sandboxId)).toBe(await podKey(after.sandboxId));
      expect((await resumed.commands.run("echo $KEPT")).stdout).toBe("before\n");

      // The old key dropped: both still serve (through the gateway's new Pods).
      await kube.request("PATCH", secret, { data: { previous: null } }, merge);
      await restartDeployments(kube, ["cubepod-gateway"]);
      for (const [sbx, kept] of [
        [await Sandbox.connect(before.sandboxId, await sdk()), "before"],
        [await Sandbox.connect(after.sandboxId, await sdk()), "after"],
      ] as const) {
        expect((await sbx.commands.run("echo $KEPT")).stdout).toBe(`${kept}\n`);
      }
      await Sandbox.kill(before.sandboxId, await sdk());
      await Sandbox.kill(after.sandboxId, await sdk());
    } finally {
      // The local cluster's key (its host gateway's) again, for the files after this one.
      await kube.request("PATCH", secret, { data: { key: original, previous: null } }, merge);
      await restartDeployments(kube, ["pepr-cubepod", "cubepod-gateway"]);
    }
  });
});

describe("the deployed module's RBAC", () => {
  it("let it do everything it tried in these tests: no request of its ServiceAccount was refused", () => {
    const since = process.env.CUBEPOD_TEST_RUN_STARTED ?? "";
    const requests = auditEvents(`"username":"${MODULE_USER}"`).filter(
      e => e.stageTimestamp >= since,
    );
    expect(requests.length).toBeGreaterThan(0);
    // Refused by RBAC, not by anything else (a namespace being deleted also answers 403).
    const refused = requests.filter(
      e => e.annotations?.["authorization.k8s.io/decision"] !== "allow",
    );
    expect(refused.map(e => `${e.verb} ${e.requestURI}`)).toEqual([]);
  });
});

/** The host pid of podd in the Pod with this uid (its cgroup names the Pod). */
function poddPid(podUid: string): number {
  for (const p of readdirSync("/proc").filter(d => /^\d+$/.test(d))) {
    try {
      const cmd = readFileSync(`/proc/${p}/cmdline`, "utf8");
      if (!cmd.startsWith("/opt/cubepod/bin/podd\0")) continue;
      if (readFileSync(`/proc/${p}/cgroup`, "utf8").includes(`pod${podUid}`)) return Number(p);
    } catch {
      // The process went meanwhile.
    }
  }
  throw new Error(`no podd process of Pod ${podUid}: ${execFileSync("ps", ["-ef"]).toString()}`);
}
