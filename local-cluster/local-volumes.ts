/**
 * The local environment's volume provisioner for the real node: binds every PersistentVolumeClaim
 * of the StorageClass `cubepod-local` to a `local` PersistentVolume of its own, made for it on
 * this machine, and removes both once the claim is gone. Filesystem claims get a directory; Block
 * claims a sparse file on a loop device, reached through a device node of its own whose path
 * stays the same when the loop device's number changes (after a `down`, or a reboot). A claim
 * with a PVC `dataSource` (a fork's clone) starts as a copy of its source's data, as a CSI
 * driver's clone would.
 *
 * It also binds, which kube-controller-manager's volume binder would do on a real cluster: that
 * controller cannot run here, because it would take kwok's fake-bound claims for unbound ones.
 * Part of the local environment, not of the operator. Runs as root (loop devices, device nodes).
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync } from "node:fs";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { CLUSTER_DIR, Kube, Obj } from "../testkit/kube";

export const STORAGE_CLASS = "cubepod-local";
const PROVISIONER = "cubepod.dev/local-volumes";
const NODE = process.env.CUBEPOD_REAL_NODE_NAME ?? "cubepod-real-0";
const VOLUMES = join(CLUSTER_DIR, "real-node", "volumes");
/**
 * Where a released volume's data goes to be removed in the background: a filled rootfs is
 * thousands of files, and removing them in turn would hold up the binds queued behind it.
 */
const REMOVING = join(CLUSTER_DIR, "real-node", "volumes-removing");

/** Moves the data out of the volumes' directory at once, and removes it in the background. */
function discard(path: string): void {
  if (!existsSync(path)) return;
  mkdirSync(REMOVING, { recursive: true });
  const gone = join(REMOVING, `${Date.now()}-${path.split("/").pop()}`);
  renameSync(path, gone);
  rm(gone, { recursive: true, force: true }).catch(e => log(`removing ${gone}: ${e.message}`));
}
/** The backing file or directory of a PV, on the PV (its `local.path` may be a device node). */
const ANNOTATION_BACKING = "cubepod.dev/backing";

const kube = new Kube();
/** Clones whose source was not bound yet, by claim uid: tried again after each bind. */
const waitingClones = new Map<string, Obj>();
const sh = (cmd: string, ...args: string[]) =>
  execFileSync(cmd, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim();
const log = (message: string) =>
  console.log(`[local-volumes ${new Date().toISOString()}] ${message}`);

/** Bytes of a quantity such as 2Gi or 500M. */
function bytes(quantity: string): number {
  const m = /^(\d+)([KMGT]i?)?$/.exec(quantity);
  if (!m) throw new Error(`unsupported size ${quantity}`);
  const unit = m[2] ?? "";
  const pow = { "": 0, K: 1, M: 2, G: 3, T: 4 }[unit.replace("i", "") as "K"];
  return Number(m[1]) * (unit.endsWith("i") ? 1024 : 1000) ** pow;
}

/** Attaches the file to a loop device (unless it is) and points the PV's device node at it. */
function attach(file: string, node: string): void {
  let loop = sh("losetup", "-j", file).split(":")[0];
  if (!loop) loop = sh("losetup", "--find", "--show", file);
  const [major, minor] = sh("stat", "-L", "-c", "%t %T", loop)
    .split(" ")
    .map(h => String(parseInt(h, 16)));
  rmSync(node, { force: true });
  sh("mknod", node, "b", major, minor);
}

function detach(file: string): void {
  for (const line of sh("losetup", "-j", file).split("\n")) {
    const loop = line.split(":")[0];
    if (loop) sh("losetup", "-d", loop);
  }
}

async function pvOf(claim: Obj): Promise<Obj | undefined> {
  if (!claim.spec.volumeName) return undefined;
  const r = await kube.get(`/api/v1/persistentvolumes/${claim.spec.volumeName}`);
  return r.status === 200 ? r.body : undefined;
}

/** Makes the claim's volume (from its source's data for a clone), its PV, and binds them. */
async function provision(claim: Obj): Promise<void> {
  const { namespace, name, uid } = claim.metadata;
  const pvName = `pvc-${uid}`;
  const block = claim.spec.volumeMode === "Block";
  const size = claim.spec.resources.requests.storage as string;
  const backing = join(VOLUMES, block ? `${pvName}.img` : pvName);
  const node = join(VOLUMES, `${pvName}.dev`);
  mkdirSync(VOLUMES, { recursive: true });

  let source: string | undefined;
  const from = claim.spec.dataSource;
  if (from?.kind === "PersistentVolumeClaim") {
    const src = await kube.get(
      `/api/v1/namespaces/${namespace}/persistentvolumeclaims/${from.name}`,
    );
    const srcPV = src.status === 200 ? await pvOf(src.body) : undefined;
    source = srcPV?.metadata.annotations?.[ANNOTATION_BACKING];
    if (!source) {
      waitingClones.set(uid, claim);
      return log(`${namespace}/${name}: clone source ${from.name} not bound yet; waiting for it`);
    }
  }
  waitingClones.delete(uid);
  if (!existsSync(backing)) {
    const tmp = `${backing}.tmp`;
    rmSync(tmp, { recursive: true, force: true });
    if (block) {
      if (source) sh("cp", "--sparse=always", source, tmp);
      else sh("truncate", "-s", String(bytes(size)), tmp);
    } else if (source) sh("cp", "-a", source, tmp);
    else mkdirSync(tmp);
    sh("mv", tmp, backing);
  }
  if (block) attach(backing, node);

  const pv = {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: {
      name: pvName,
      annotations: {
        "pv.kubernetes.io/provisioned-by": PROVISIONER,
        [ANNOTATION_BACKING]: backing,
      },
    },
    spec: {
      capacity: { storage: size },
      accessModes: claim.spec.accessModes,
      volumeMode: block ? "Block" : "Filesystem",
      storageClassName: STORAGE_CLASS,
      persistentVolumeReclaimPolicy: "Delete",
      claimRef: { apiVersion: "v1", kind: "PersistentVolumeClaim", namespace, name, uid },
      local: { path: block ? node : backing },
      nodeAffinity: {
        required: {
          nodeSelectorTerms: [
            {
              matchExpressions: [{ key: "kubernetes.io/hostname", operator: "In", values: [NODE] }],
            },
          ],
        },
      },
    },
  };
  const created = await kube.create("/api/v1/persistentvolumes", pv);
  if (created.status !== 201 && created.status !== 409) {
    throw new Error(`PV ${pvName}: ${created.status} ${created.body.message}`);
  }
  await kube.mergePatch(`/api/v1/persistentvolumes/${pvName}/status`, {
    status: { phase: "Bound" },
  });
  const path = `/api/v1/namespaces/${namespace}/persistentvolumeclaims/${name}`;
  const bound = await kube.mergePatch(path, {
    metadata: {
      uid,
      annotations: {
        "pv.kubernetes.io/bind-completed": "yes",
        "pv.kubernetes.io/bound-by-controller": "yes",
        "volume.kubernetes.io/storage-provisioner": PROVISIONER,
      },
    },
    spec: { volumeName: pvName },
  });
  if (bound.status !== 200) throw new Error(`bind ${namespace}/${name}: ${bound.body.message}`);
  await kube.mergePatch(`${path}/status`, {
    status: { phase: "Bound", accessModes: claim.spec.accessModes, capacity: { storage: size } },
  });
  await wakePodsOf(namespace, name);
  for (const clone of waitingClones.values()) {
    const fresh = await kube.get(
      `/api/v1/namespaces/${clone.metadata.namespace}/persistentvolumeclaims/${clone.metadata.name}`,
    );
    if (fresh.status === 200 && fresh.body.metadata.uid === clone.metadata.uid)
      await onClaim("MODIFIED", fresh.body);
    else waitingClones.delete(clone.metadata.uid);
  }
  log(
    `${namespace}/${name}: bound to ${pvName} (${block ? "Block" : "Filesystem"}${source ? ", cloned" : ""})`,
  );
}

/**
 * Wakes the node's Pods that wait for the claim: the kubelet tries a Pod whose claims were not
 * bound yet again only after its pod worker's back-off (10 s), and any change to the Pod makes
 * it try at once. Pods reach the node before their claims are bound because the local scheduler
 * runs without its volume plugins (kwok binds claims without volumes), which a cluster's
 * scheduler would not allow.
 */
async function wakePodsOf(namespace: string, claim: string): Promise<void> {
  const pods = await kube.get(
    `/api/v1/namespaces/${namespace}/pods?fieldSelector=${encodeURIComponent(`spec.nodeName=${NODE},status.phase=Pending`)}`,
  );
  for (const pod of (pods.body.items ?? []) as Obj[]) {
    if (!(pod.spec.volumes ?? []).some((v: Obj) => v.persistentVolumeClaim?.claimName === claim))
      continue;
    const woken = await kube.mergePatch(
      `/api/v1/namespaces/${namespace}/pods/${pod.metadata.name}`,
      { metadata: { annotations: { "cubepod.dev/claim-bound": claim } } },
    );
    if (woken.status !== 200)
      log(`waking ${namespace}/${pod.metadata.name}: ${woken.body.message}`);
  }
}

/** Removes a PV whose claim is gone, and its data. */
async function release(pv: Obj): Promise<void> {
  const backing = pv.metadata.annotations?.[ANNOTATION_BACKING] as string | undefined;
  if (backing) {
    if (pv.spec.volumeMode === "Block") {
      detach(backing);
      rmSync(`${join(VOLUMES, pv.metadata.name)}.dev`, { force: true });
    }
    discard(backing);
  }
  // The API server puts pv-protection on every PV; its controller is not run here (no volume is
  // in use once its claim is gone), so the provisioner lifts it itself.
  await kube.delete(`/api/v1/persistentvolumes/${pv.metadata.name}`);
  await kube.mergePatch(`/api/v1/persistentvolumes/${pv.metadata.name}`, {
    metadata: { finalizers: null },
  });
  log(
    `${pv.spec.claimRef?.namespace}/${pv.spec.claimRef?.name}: gone, removed ${pv.metadata.name}`,
  );
}

const ours = (claim: Obj) => claim.spec?.storageClassName === STORAGE_CLASS;

/** Everything at once: binds what is unbound, releases what lost its claim, re-attaches loops. */
async function resync(): Promise<string> {
  // What a provisioner stopped half-way through removing.
  if (existsSync(REMOVING)) {
    for (const left of readdirSync(REMOVING))
      rmSync(join(REMOVING, left), { recursive: true, force: true });
  }
  const claims = await kube.get("/api/v1/persistentvolumeclaims");
  const pvs = await kube.get("/api/v1/persistentvolumes");
  const uids = new Set<string>(claims.body.items.map((c: Obj) => c.metadata.uid));
  for (const pv of pvs.body.items as Obj[]) {
    if (pv.spec.storageClassName !== STORAGE_CLASS) continue;
    if (!uids.has(pv.spec.claimRef?.uid)) await release(pv);
    else if (pv.spec.volumeMode === "Block")
      attach(pv.metadata.annotations[ANNOTATION_BACKING], pv.spec.local.path);
  }
  for (const claim of claims.body.items as Obj[]) await onClaim("ADDED", claim);
  return claims.body.metadata.resourceVersion;
}

async function onClaim(type: string, claim: Obj): Promise<void> {
  if (!ours(claim)) return;
  if (type === "DELETED") {
    const pv = await kube.get(`/api/v1/persistentvolumes/pvc-${claim.metadata.uid}`);
    if (pv.status === 200) await release(pv.body);
    return;
  }
  if (!claim.spec.volumeName && !claim.metadata.deletionTimestamp) await provision(claim);
}

/** One claim at a time, in the order of events: a clone waits for its source's turn. */
let chain = Promise.resolve();
const serially = (job: () => Promise<void>) => {
  chain = chain.then(job).catch(e => log(`error: ${(e as Error).message}`));
};

async function main(): Promise<void> {
  for (;;) {
    let rv: string;
    try {
      rv = await resync();
    } catch (e) {
      log(`resync failed (${(e as Error).message}); again in 2 s`);
      await new Promise(r => setTimeout(r, 2000));
      continue;
    }
    // A watch ends at its timeout, or when the API server goes: list and watch again.
    await new Promise<void>(resolve => {
      const stop = kube.watchCollection(
        "/api/v1/persistentvolumeclaims",
        (type, claim) => serially(() => onClaim(type, claim)),
        rv,
        () => (stop(), resolve()),
      );
    });
    await chain;
  }
}

void main();
