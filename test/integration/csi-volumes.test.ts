import { readdirSync, readFileSync, statfsSync } from "node:fs";
import { join } from "node:path";
import { CLUSTER_DIR, Kube, Obj, paths } from "../../testkit/kube";
import { podTemplate, REAL_NODE_PLACEMENT, realTemplate } from "../../testkit/objects";
import { PoddClient } from "../../testkit/podd-client";
import { inNamespace } from "./lifecycle-helpers";

/*
 * The real node's storage (local-cluster/csi.sh, decision 0029): the project's CSI driver under
 * Kubernetes' own sidecars, kube-scheduler's volume binding and kube-controller-manager's binder.
 * Claims of the class cubepod-local are provisioned at their first consumer; clones, snapshots and
 * restores hold their source's bytes and cost the pool no copy; a claim grows; Block
 * claims are raw devices. Data is written and read by Pods on the node.
 */

jest.setTimeout(240_000);

const kube = new Kube();
const DRIVER = "local.csi.cubeplex.ai";
const POOL = join(CLUSTER_DIR, "real-node", "pool");
const snapshots = (ns: string, name = "") =>
  `/apis/snapshot.storage.k8s.io/v1/namespaces/${ns}/volumesnapshots${name && `/${name}`}`;
let ns: string;
let h: ReturnType<typeof inNamespace>;

beforeAll(async () => {
  ns = await kube.namespace("it-csi");
  h = inNamespace(kube, ns);
});
afterAll(async () => {
  await kube.delete(`/api/v1/namespaces/${ns}`);
  kube.close();
});

/** Bytes the pool's filesystem holds. */
function poolUsed(): number {
  const s = statfsSync(POOL);
  return (s.blocks - s.bfree) * s.bsize;
}

/** Whether a loop device holds the image: the driver staged its volume on the node. */
function staged(image: string): boolean {
  return readdirSync("/sys/block")
    .filter(d => d.startsWith("loop"))
    .some(d => {
      try {
        return readFileSync(`/sys/block/${d}/loop/backing_file`, "utf8").trim() === image;
      } catch {
        return false;
      }
    });
}

/** The driver's failed unstages, as its log tells them. */
function failedUnstages(): string {
  const log = readFileSync(join(CLUSTER_DIR, "logs", "csi-driver.log"), "utf8").split("\n");
  return (
    log.filter(l => l.includes("call failed") && l.includes("NodeUnstage")).join("\n") || "none"
  );
}

function claim(name: string, size: string, more: Obj = {}) {
  return kube.mustCreate(paths.pvcs(ns), {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name },
    spec: {
      storageClassName: "cubepod-local",
      accessModes: ["ReadWriteOnce"],
      resources: { requests: { storage: size } },
      ...more,
    },
  });
}

/**
 * Runs a script in a Pod on the real node with the claims mounted (`/<claim>`), or attached as
 * devices (`/dev/<claim>`) when `block`; its output once it succeeded, or an error with its log.
 */
async function run(name: string, claims: string[], script: string, block = false): Promise<string> {
  await startPod(name, claims, script, block);
  const pod = await kube.waitFor(
    paths.pods(ns, name),
    o => ["Succeeded", "Failed"].includes(o?.status?.phase),
    180_000,
  );
  const log = String((await kube.get(`${paths.pods(ns, name)}/log`)).body.raw ?? "");
  if (pod!.status.phase !== "Succeeded") throw new Error(`${name} failed: ${log}`);
  await kube.delete(paths.pods(ns, name));
  return log;
}

function startPod(name: string, claims: string[], script: string, block = false) {
  return kube.mustCreate(paths.pods(ns), {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name },
    spec: {
      restartPolicy: "Never",
      terminationGracePeriodSeconds: 0,
      ...REAL_NODE_PLACEMENT,
      containers: [
        {
          name: "run",
          image: "cubepod.local/busybox:1",
          command: ["/bin/sh", "-c", script],
          ...(block
            ? { volumeDevices: claims.map(c => ({ name: c, devicePath: `/dev/${c}` })) }
            : { volumeMounts: claims.map(c => ({ name: c, mountPath: `/${c}` })) }),
        },
      ],
      volumes: claims.map(c => ({ name: c, persistentVolumeClaim: { claimName: c } })),
    },
  });
}

const pvcOf = async (name: string) => (await kube.get(paths.pvcs(ns, name))).body;

/**
 * A running sandbox of a new template of that name that appends numbered lines to
 * /workspace/log for as long as the test needs (apart from the daemon's request), once it has
 * written the first; its daemon.
 */
async function writingSandbox(name: string, template: string): Promise<PoddClient> {
  await kube.mustCreate(
    paths.podtemplates(ns),
    podTemplate(template, realTemplate("Filesystem", "1Gi")),
  );
  await h.createBox(name, { templateRef: template });
  const podd = await PoddClient.open(await h.waitPhase(name, "Running", undefined, 180_000));
  await podd.sh(
    "setsid sh -c 'i=0; while [ $i -lt 10000000 ]; do echo $i >> /workspace/log; i=$((i+1)); done' >/dev/null 2>&1 &",
  );
  await podd.sh("until [ -s /workspace/log ]; do sleep 0.1; done");
  return podd;
}

/** The lines of /workspace/log in a sandbox, which ends with a whole one. */
async function logLines(podd: PoddClient): Promise<string[]> {
  const lines = (await podd.read("/workspace/log"))!.split("\n");
  expect(lines.pop()).toBe("");
  return lines;
}

describe("the real node's CSI driver", () => {
  it("provisions at the first consumer; clones, snapshots and restores hold the bytes without copying them; a claim grows", async () => {
    await claim("src", "64Mi");
    // WaitForFirstConsumer: nothing is made until a Pod needs it, on the node it goes to.
    expect((await pvcOf("src")).status.phase).toBe("Pending");
    const sum = await run(
      "writer",
      ["src"],
      "dd if=/dev/urandom of=/src/blob bs=1M count=32 2>/dev/null && md5sum /src/blob | cut -d' ' -f1",
    );
    const src = await pvcOf("src");
    expect(src.status.phase).toBe("Bound");
    const pv = (await kube.get(`/api/v1/persistentvolumes/${src.spec.volumeName}`)).body;
    expect(pv.spec.csi.driver).toBe(DRIVER);

    const before = poolUsed();
    await claim("copy", "64Mi", { dataSource: { kind: "PersistentVolumeClaim", name: "src" } });
    await kube.mustCreate(snapshots(ns), {
      apiVersion: "snapshot.storage.k8s.io/v1",
      kind: "VolumeSnapshot",
      metadata: { name: "snap" },
      spec: {
        volumeSnapshotClassName: "cubepod-local",
        source: { persistentVolumeClaimName: "src" },
      },
    });
    await kube.waitFor(snapshots(ns, "snap"), o => o?.status?.readyToUse === true, 120_000);
    await claim("restored", "128Mi", {
      dataSource: { apiGroup: "snapshot.storage.k8s.io", kind: "VolumeSnapshot", name: "snap" },
    });
    const read = await run(
      "reader",
      ["copy", "restored"],
      "md5sum /copy/blob /restored/blob | cut -d' ' -f1; df -k /restored | tail -1 | awk '{print $2}'",
    );
    const [copySum, restoredSum, restoredKiB] = read.trim().split("\n");
    expect({ copySum, restoredSum }).toEqual({ copySum: sum.trim(), restoredSum: sum.trim() });
    // The restore asked for more than its snapshot: its filesystem took the whole device.
    expect(Number(restoredKiB)).toBeGreaterThan(100 * 1024);
    // Two volumes and a snapshot of 32 MiB each, and the pool holds almost nothing more.
    expect(poolUsed() - before).toBeLessThan(8 << 20);

    // Grown while a Pod has it mounted. This machine denies CAP_SYS_RESOURCE, without which the
    // kernel grows no mounted ext4: the driver grows it when it is next staged, before mounting.
    await startPod("holder", ["src"], "sleep 3600");
    await kube.waitFor(paths.pods(ns, "holder"), o => o?.status?.phase === "Running", 120_000);
    await kube.mergePatch(paths.pvcs(ns, "src"), {
      spec: { resources: { requests: { storage: "128Mi" } } },
    });
    await kube.waitFor(
      `/api/v1/persistentvolumes/${src.spec.volumeName}`,
      o => o?.spec?.capacity?.storage === "128Mi",
      120_000,
    );
    await kube.delete(paths.pods(ns, "holder"));
    await h.waitGone(paths.pods(ns, "holder"), 120_000);
    // The kubelet unstages it once no Pod uses it (its loop device goes): the next Pod stages it.
    const image = join(POOL, "volumes", `${src.spec.volumeName}.img`);
    for (let i = 0; staged(image); i++) {
      if (i > 1500)
        throw new Error(`${image} stayed staged after its Pod was gone: ${failedUnstages()}`);
      await new Promise(r => setTimeout(r, 100));
    }
    const grown = await run(
      "grown",
      ["src"],
      "df -k /src | tail -1 | awk '{print $2}'; md5sum /src/blob | cut -d' ' -f1",
    );
    const [grownKiB, grownSum] = grown.trim().split("\n");
    expect(Number(grownKiB)).toBeGreaterThan(100 * 1024);
    expect(grownSum).toBe(sum.trim());
    await kube.waitFor(paths.pvcs(ns, "src"), o => o?.status?.capacity?.storage === "128Mi");

    // Deleted, the claims' volumes leave the pool.
    const volumes = await Promise.all(
      ["src", "copy", "restored"].map(async c => (await pvcOf(c)).spec.volumeName as string),
    );
    await kube.delete(snapshots(ns, "snap"));
    for (const c of ["src", "copy", "restored"]) await kube.delete(paths.pvcs(ns, c));
    for (const v of volumes) await h.waitGone(`/api/v1/persistentvolumes/${v}`, 120_000);
    const left = readdirSync(join(POOL, "volumes")).filter(f => volumes.some(v => f.startsWith(v)));
    expect(left).toEqual([]);
  });

  it("serves Block claims as raw devices, cloned with their bytes", async () => {
    await claim("raw", "16Mi", { volumeMode: "Block" });
    const written = await run(
      "raw-writer",
      ["raw"],
      "dd if=/dev/urandom of=/dev/raw bs=1M count=16 2>/dev/null; md5sum /dev/raw | cut -d' ' -f1",
      true,
    );
    await claim("raw-copy", "16Mi", {
      volumeMode: "Block",
      dataSource: { kind: "PersistentVolumeClaim", name: "raw" },
    });
    const read = await run(
      "raw-reader",
      ["raw-copy"],
      "md5sum /dev/raw-copy | cut -d' ' -f1",
      true,
    );
    expect(read).toBe(written);
  });

  it("forks a running sandbox by Clone while it writes: the fork holds a consistent prefix of what it wrote", async () => {
    const parent = await writingSandbox("writer", "fs");
    await h.createBox("writer-fork", { templateRef: "fs", forkFrom: "writer" });
    const child = await PoddClient.open(
      await h.waitPhase("writer-fork", "Running", "ForkCloned", 180_000),
    );
    const lines = await logLines(child);
    // Whole lines only, every number in turn: the clone was taken of a frozen filesystem.
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.every((l, i) => l === String(i))).toBe(true);
    // The parent kept writing past the fork.
    const later = Number(await parent.sh("wc -l < /workspace/log"));
    expect(later).toBeGreaterThan(lines.length);
    const owned = (await pvcOf("writer-fork-workspace")).spec.dataSource;
    expect(owned).toMatchObject({ kind: "PersistentVolumeClaim", name: "writer-workspace" });
  });

  it("takes a paused fork of a writing sandbox as VolumeSnapshots: no Pod, cut before it says so; forks restore it after its source went; deleted, it leaves the pool", async () => {
    const source = await writingSandbox("snap-src", "snap");

    await h.createBox("snap", {
      templateRef: "snap",
      forkFrom: "snap-src",
      desiredState: "Paused",
    });
    const taken = await h.waitPhase("snap", "Paused", "Snapshotted", 120_000);
    const atAnswer = Number(await source.sh("wc -l < /workspace/log"));
    // No Pod ran for it, and it holds no PVC: its volumes are the two VolumeSnapshots.
    expect(await h.podsOf("snap")).toEqual([]);
    expect(await h.pvcsOf("snap")).toEqual([]);
    const src = (await kube.get(paths.podboxes(ns, "snap-src"))).body.status;
    expect(taken!.status).toMatchObject({
      rootfsSnapshotName: "snap-rootfs-snapshot",
      workspaceSnapshotName: "snap-workspace-snapshot",
    });
    const contents: string[] = [];
    for (const [role, pvc] of [
      ["rootfs", src.rootfsPVCName],
      ["workspace", src.workspacePVCName],
    ]) {
      const vs = (await kube.get(snapshots(ns, `snap-${role}-snapshot`))).body;
      expect(vs.spec).toEqual({
        volumeSnapshotClassName: "cubepod-local",
        source: { persistentVolumeClaimName: pvc },
      });
      expect(vs.status.readyToUse).toBe(true);
      expect(vs.metadata.ownerReferences).toEqual([
        expect.objectContaining({ kind: "PodBox", name: "snap", uid: taken!.metadata.uid }),
      ]);
      contents.push(vs.status.boundVolumeSnapshotContentName);
    }
    const handles = await Promise.all(
      contents.map(async c => {
        const content = await kube.get(
          `/apis/snapshot.storage.k8s.io/v1/volumesnapshotcontents/${c}`,
        );
        return content.body.status.snapshotHandle as string;
      }),
    );

    // A fork of it restores its VolumeSnapshots: whole lines, every number in turn, none written
    // after the snapshot said it was taken.
    const restored = async (name: string) => {
      await h.createBox(name, { templateRef: "snap", forkFrom: "snap" });
      return logLines(
        await PoddClient.open(await h.waitPhase(name, "Running", "ForkCloned", 180_000)),
      );
    };
    const lines = await restored("from-snap");
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.length).toBeLessThanOrEqual(atAnswer);
    expect(lines.every((l, i) => l === String(i))).toBe(true);
    expect((await pvcOf("from-snap-workspace")).spec.dataSource).toEqual({
      apiGroup: "snapshot.storage.k8s.io",
      kind: "VolumeSnapshot",
      name: "snap-workspace-snapshot",
    });

    // It outlives its source.
    await kube.delete(paths.podboxes(ns, "snap-src"));
    await h.waitGone(paths.podboxes(ns, "snap-src"), 120_000);
    expect(await restored("from-snap-2")).toEqual(lines);

    // Deleted, its VolumeSnapshots, their contents and the pool's images of them go; what was
    // restored from them stays.
    await kube.delete(paths.podboxes(ns, "snap"));
    for (const role of ["rootfs", "workspace"]) {
      await h.waitGone(snapshots(ns, `snap-${role}-snapshot`), 120_000);
    }
    for (const c of contents) {
      await h.waitGone(`/apis/snapshot.storage.k8s.io/v1/volumesnapshotcontents/${c}`, 120_000);
    }
    const kept = () =>
      readdirSync(join(POOL, "snapshots")).filter(f => handles.some(id => f.startsWith(id)));
    for (let i = 0; kept().length > 0; i++) {
      if (i > 600) throw new Error(`the pool still holds ${kept().join(", ")}`);
      await new Promise(r => setTimeout(r, 100));
    }
    const again = await PoddClient.open(await h.waitPhase("from-snap", "Running"));
    expect(await logLines(again)).toEqual(lines);
  });
});
