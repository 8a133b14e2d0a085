import { describeAction } from "../../../capabilities/kit/object-actions";
import type { kind } from "pepr";
import { decideSeed, SeedObservation } from "../../../capabilities/seed/decide";
import { SeedIndex } from "../../../capabilities/seed/seed-index";
import { SeedReconciler } from "../../../capabilities/seed/reconciler";
import { WorkQueue } from "../../../capabilities/kit/work-queue";
import { Failpoints } from "../../../capabilities/kit/failpoint";
import { buildSeed, seedKey, seedName, seedsRootfs } from "../../../capabilities/manifests/seed";
import { buildStandby } from "../../../capabilities/manifests/standby";
import { templateHash } from "../../../capabilities/manifests/template-hash";
import { templateOwnerRef } from "../../../capabilities/manifests/owner";
import { buildBoxPVCs } from "../../../capabilities/manifests/pvcs";
import { validatePodTemplate } from "../../../capabilities/admission/rules";
import { template } from "../fixtures";

const seeded = template({ volumeMode: "Filesystem", rootfs: { seed: true } });
const KEY = seedKey(seeded.spec);
const NAME = seedName("python", KEY);
const COPY = template({ volumeMode: "Filesystem", forkStrategy: "Copy", rootfs: { seed: true } });

function obs(over: Partial<SeedObservation> = {}): SeedObservation {
  return {
    namespace: "ns",
    template: { name: "python", uid: "tpl-uid", spec: seeded.spec },
    pvcs: [],
    pods: [],
    ...over,
  };
}
const volume = (filled: boolean, name = NAME, key = KEY) => ({
  name,
  key,
  filled,
  deleting: false,
});
const fillPod = (phase?: string, name = NAME) => ({ name, key: KEY, phase, deleting: false });
const types = (o: SeedObservation) => decideSeed(o).map(describeAction);

describe("seedsRootfs and seedKey", () => {
  it("a template keeps a seed only when asked, in Filesystem mode, whatever its forks do", () => {
    expect(seedsRootfs(seeded.spec)).toBe(true);
    expect(seedsRootfs(template({ volumeMode: "Filesystem" }).spec)).toBe(false);
    expect(seedsRootfs(template({ rootfs: { seed: true } }).spec)).toBe(false);
    expect(seedsRootfs(COPY.spec)).toBe(true);
  });

  it("admission refuses a seed in Block mode, naming the field", () => {
    const v = validatePodTemplate({ image: "i:1", volumeMode: "Block", rootfs: { seed: true } });
    expect(v.ok).toBe(false);
    expect(!v.ok && v.errors).toEqual([
      expect.stringMatching(/^spec\.rootfs\.seed: only Filesystem/),
    ]);
  });

  it("a seeded template whose forks copy clones only the seed", () => {
    const template = { ...COPY, seed: { pvcName: NAME } };
    const { rootfs } = buildBoxPVCs({
      namespace: "ns",
      boxName: "b",
      template,
      rootfsGeneration: 1,
    });
    expect(rootfs.spec?.dataSource?.name).toBe(NAME);
    expect(rootfs.metadata?.annotations).toBeUndefined();
    const parent = { rootfsPVCName: "p-rootfs-g1", workspacePVCName: "p-workspace" };
    const fork = buildBoxPVCs({
      namespace: "ns",
      boxName: "b",
      template,
      rootfsGeneration: 1,
      forkFrom: parent,
    });
    expect(fork.rootfs.spec?.dataSource).toBeUndefined();
    expect(fork.rootfs.metadata?.annotations).toEqual({
      "pod.cubeplex.ai/copy-from": "p-rootfs-g1",
    });
  });

  it("the key follows what a fill depends on, and nothing else", () => {
    const with_ = (o: Record<string, unknown>) =>
      seedKey(template({ volumeMode: "Filesystem", rootfs: { seed: true }, ...o }).spec);
    expect(with_({})).toBe(KEY);
    expect(with_({ env: [{ name: "A", value: "1" }], envdPort: 50000 })).toBe(KEY);
    for (const change of [
      { image: "ghcr.io/x/sandbox:2" },
      { rootfs: { seed: true, paths: ["usr"] } },
      { rootfs: { seed: true, size: "9Gi" } },
      { storageClassName: "fast" },
      { runtimeClassName: "gvisor" },
      { poddInjectorImage: "podd:2" },
    ]) {
      expect(with_(change)).not.toBe(KEY);
    }
  });

  it("asking for a seed does not make a pool's standbys stale", () => {
    expect(templateHash(seeded.spec)).toBe(
      templateHash(template({ volumeMode: "Filesystem" }).spec),
    );
  });

  it("names stay valid for a long template name", () => {
    const long = seedName(`${"a".repeat(220)}`, KEY);
    expect(long.length).toBeLessThanOrEqual(253);
    expect(seedName("a-", KEY)).toBe(`a-seed-${KEY}`);
  });
});

describe("buildSeed", () => {
  const { pvc, pod } = buildSeed({
    namespace: "ns",
    template: "python",
    spec: seeded.spec,
    key: KEY,
    owner: templateOwnerRef("python", "tpl-uid"),
  });

  it("a rootfs-sized PVC of the template's class, marked as its seed and owned by it", () => {
    expect(pvc.metadata).toMatchObject({
      name: NAME,
      labels: { "pod.cubeplex.ai/seed-of": "python", "pod.cubeplex.ai/seed": KEY },
      ownerReferences: [{ kind: "PodTemplate", name: "python", uid: "tpl-uid", controller: true }],
    });
    expect(pvc.spec).toMatchObject({
      volumeMode: "Filesystem",
      resources: { requests: { storage: seeded.spec.rootfs.size } },
    });
    expect(pvc.spec?.dataSource).toBeUndefined();
  });

  it("a Pod that installs podd and fills the PVC once, under the template's runtime, then ends", () => {
    expect(pod.metadata?.labels).toEqual(pvc.metadata?.labels);
    expect(pod.metadata?.labels?.["pod.cubeplex.ai/template"]).toBeUndefined();
    expect(pod.spec).toMatchObject({
      runtimeClassName: seeded.spec.runtimeClassName,
      restartPolicy: "OnFailure",
      automountServiceAccountToken: false,
    });
    expect(pod.spec?.initContainers?.map(c => c.name)).toEqual(["podd-installer"]);
    const [fill] = pod.spec!.containers;
    expect(fill.name).toBe("rootfs-fill");
    expect(fill.image).toBe(seeded.spec.image);
    expect(fill.command).toEqual(["/opt/cubepod/bin/podd-init", "fill"]);
    expect(fill.securityContext?.allowPrivilegeEscalation).toBe(false);
    expect(pod.spec?.volumes).toContainEqual({
      name: "rootfs",
      persistentVolumeClaim: { claimName: NAME },
    });
  });
});

describe("decideSeed", () => {
  it("creates the seed PVC and its fill Pod", () => {
    expect(types(obs())).toEqual([`createPVC ${NAME}`, `createPod ${NAME}`]);
  });

  it("waits for the fill, then marks the PVC filled and removes the Pod", () => {
    expect(types(obs({ pvcs: [volume(false)], pods: [fillPod("Pending")] }))).toEqual([]);
    expect(types(obs({ pvcs: [volume(false)], pods: [fillPod("Running")] }))).toEqual([]);
    expect(types(obs({ pvcs: [volume(false)], pods: [fillPod("Succeeded")] }))).toEqual([
      `markSeedFilled ${NAME}`,
      `deletePod ${NAME}`,
    ]);
  });

  it("a filled seed alone needs nothing; its leftover Pod goes", () => {
    expect(types(obs({ pvcs: [volume(true)] }))).toEqual([]);
    expect(types(obs({ pvcs: [volume(true)], pods: [fillPod("Succeeded")] }))).toEqual([
      `deletePod ${NAME}`,
    ]);
  });

  it("starts the fill again after a Pod that failed for good, once it is gone", () => {
    expect(types(obs({ pvcs: [volume(false)], pods: [fillPod("Failed")] }))).toEqual([
      `deletePod ${NAME}`,
    ]);
    const going = { ...fillPod("Failed"), deleting: true };
    expect(types(obs({ pvcs: [volume(false)], pods: [going] }))).toEqual([]);
    expect(types(obs({ pvcs: [volume(false)] }))).toEqual([`createPod ${NAME}`]);
  });

  it("after a template change, fills a new seed and removes the old one once it is filled", () => {
    const old = volume(true, "python-seed-0000000000", "0000000000");
    const oldPod = fillPod("Running", "python-seed-0000000000");
    expect(types(obs({ pvcs: [old], pods: [oldPod] }))).toEqual([
      "deletePod python-seed-0000000000",
      `createPVC ${NAME}`,
      `createPod ${NAME}`,
    ]);
    expect(types(obs({ pvcs: [old, volume(false)], pods: [fillPod("Running")] }))).toEqual([]);
    expect(types(obs({ pvcs: [old, volume(true)] }))).toEqual(["deletePVC python-seed-0000000000"]);
  });

  it("removes every seed when none is wanted, or the template's spec is invalid", () => {
    const off = template({ volumeMode: "Filesystem" }).spec;
    const all = { pvcs: [volume(true)], pods: [fillPod("Running")] };
    const expected = [`deletePod ${NAME}`, `deletePVC ${NAME}`];
    expect(types(obs({ ...all, template: { name: "python", uid: "tpl-uid", spec: off } }))).toEqual(
      expected,
    );
    expect(types(obs({ ...all, template: undefined }))).toEqual(expected);
  });

  it("a seed being deleted is waited for before it is made again", () => {
    const going = { ...volume(false), deleting: true };
    expect(types(obs({ pvcs: [going] }))).toEqual([]);
  });
});

describe("SeedIndex", () => {
  const pvcOf = (labels: Record<string, string>, extra: Record<string, unknown> = {}) =>
    ({
      metadata: {
        namespace: "ns",
        name: NAME,
        labels: {
          "app.kubernetes.io/managed-by": "cubepod",
          "pod.cubeplex.ai/seed-of": "python",
          "pod.cubeplex.ai/seed": KEY,
          ...labels,
        },
        ownerReferences: [templateOwnerRef("python", "tpl-uid")],
        ...extra,
      },
    }) as kind.PersistentVolumeClaim;
  const filled = { "pod.cubeplex.ai/seed-filled": "true" };

  it("gives a template its filled seed for its current spec only", () => {
    const index = new SeedIndex();
    expect(index.withSeed("ns", seeded).seed).toBeUndefined();
    index.observe(pvcOf({}), false);
    expect(index.withSeed("ns", seeded).seed).toBeUndefined();
    index.observe(pvcOf(filled), false);
    expect(index.withSeed("ns", seeded).seed).toEqual({ pvcName: NAME });
    expect(index.withSeed("other", seeded).seed).toBeUndefined();
    const changed = template({ volumeMode: "Filesystem", rootfs: { seed: true }, image: "i:2" });
    expect(index.withSeed("ns", changed).seed).toBeUndefined();
    const off = { ...template({ volumeMode: "Filesystem" }), seed: { pvcName: NAME } };
    expect(index.withSeed("ns", off).seed).toBeUndefined();
  });

  it("forgets a seed that is deleted or being deleted", () => {
    const index = new SeedIndex();
    index.observe(pvcOf(filled), false);
    index.observe(pvcOf(filled, { deletionTimestamp: "2026-12-05T00:00:00Z" }), false);
    expect(index.withSeed("ns", seeded).seed).toBeUndefined();
    index.observe(pvcOf(filled), false);
    index.observe(pvcOf(filled), true);
    expect(index.withSeed("ns", seeded).seed).toBeUndefined();
  });

  it("ignores a PVC the operator did not make for that template", () => {
    const index = new SeedIndex();
    index.observe(pvcOf({ ...filled, "app.kubernetes.io/managed-by": "someone" }), false);
    index.observe(pvcOf(filled, { ownerReferences: [] }), false);
    index.observe(pvcOf({ ...filled, "pod.cubeplex.ai/seed-of": "other" }), false);
    expect(index.withSeed("ns", seeded).seed).toBeUndefined();
  });
});

describe("a pool's standby on a filled seed", () => {
  it("clones the seed and starts without init containers", () => {
    const s = buildStandby({
      namespace: "ns",
      pool: "pool",
      name: "pool-abc",
      template: { ...seeded, seed: { pvcName: NAME } },
      templateHash: "h",
      owner: templateOwnerRef("x", "y"),
    });
    expect(s.rootfs.spec?.dataSource).toEqual({ kind: "PersistentVolumeClaim", name: NAME });
    expect(s.workspace.spec?.dataSource).toBeUndefined();
    const hash = s.rootfs.metadata?.labels?.["pod.cubeplex.ai/rootfs-podd"];
    expect(hash).toMatch(/^[0-9a-f]{10}$/);
    expect(s.pod.metadata?.labels?.["pod.cubeplex.ai/rootfs-podd"]).toBe(hash);
    const plain = buildStandby({
      namespace: "ns",
      pool: "pool",
      name: "pool-abc",
      template: seeded,
      templateHash: "h",
      owner: templateOwnerRef("x", "y"),
    });
    expect(plain.rootfs.spec?.dataSource).toBeUndefined();
    expect(plain.pod.metadata?.labels?.["pod.cubeplex.ai/rootfs-podd"]).toBeUndefined();
  });
});

describe("SeedReconciler: which template events cost a reconcile", () => {
  const setup = () => {
    const keys: string[] = [];
    const queue = new WorkQueue(async key => void keys.push(key), {
      concurrency: 1,
      baseDelayMs: 10,
      maxDelayMs: 10,
    });
    const seeds = new SeedReconciler({
      client: undefined as never,
      failpoints: new Failpoints(undefined),
      queue,
    });
    const settle = () => new Promise(r => setTimeout(r, 20));
    return { keys, seeds, settle };
  };
  const object = (name: string) =>
    ({
      metadata: { namespace: "ns", name, labels: { "pod.cubeplex.ai/seed-of": "python" } },
    }) as kind.Pod;

  it("a template that asks for no seed and has none costs nothing", async () => {
    const { keys, seeds, settle } = setup();
    seeds.onTemplateEvent("ns", "python", { volumeMode: "Filesystem" });
    seeds.onTemplateEvent("ns", "python", undefined);
    await settle();
    expect(keys).toEqual([]);
  });

  it("one that asks, or has seed objects left to remove, is reconciled", async () => {
    const { keys, seeds, settle } = setup();
    const reconciled = async (event: () => void) => {
      keys.length = 0;
      event();
      await settle();
      return keys.length > 0 && keys.every(k => k === "ns/python");
    };
    expect(
      await reconciled(() => seeds.onTemplateEvent("ns", "python", { rootfs: { seed: true } })),
    ).toBe(true);
    const pvc = object(NAME) as unknown as kind.PersistentVolumeClaim;
    expect(await reconciled(() => seeds.onPodEvent(object(NAME), false))).toBe(true);
    expect(await reconciled(() => seeds.onVolumeEvent(pvc, false))).toBe(true);
    expect(await reconciled(() => seeds.onTemplateEvent("ns", "python", {}))).toBe(true);
    expect(await reconciled(() => seeds.onPodEvent(object(NAME), true))).toBe(true);
    expect(await reconciled(() => seeds.onTemplateEvent("ns", "python", {}))).toBe(true);
    expect(await reconciled(() => seeds.onVolumeEvent(pvc, true))).toBe(true);
    // Its last seed object gone: nothing left to do for a template that asks for none.
    expect(await reconciled(() => seeds.onTemplateEvent("ns", "python", {}))).toBe(false);
  });
});
