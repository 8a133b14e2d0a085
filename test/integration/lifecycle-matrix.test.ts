import { cluster, clusterWithEnv, Kube, Obj, paths } from "../../testkit/kube";
import { podTemplate, realTemplate } from "../../testkit/objects";
import { PoddClient } from "../../testkit/podd-client";
import { ALL_INSTALLED, install, installed } from "./installed-tree";
import { inNamespace } from "./lifecycle-helpers";

/*
 * Every lifecycle step from every origin, on the real node under gVisor as the `real` sample runs
 * sandboxes: a box started from a template, claimed from a pool, forked by Clone and by Copy,
 * re-attached by volumeKey, or resumed after a pause, then taken through each step that may
 * follow. Each step is shown with data: a file in /workspace and a tree installed outside it
 * (installed-tree.ts), read back through the box's daemon and found kept, gone or copied as the
 * step promises. A step's failure names its origin, the step and what the data showed; the steps
 * after it in the same origin are reported as not run.
 */

// Each origin's chain starts a dozen gVisor sandboxes, and two module restarts rebuild it.
jest.setTimeout(300_000);

const kube = new Kube();
const SIZE = "1Gi";
const WORKSPACE_FILE = "/workspace/matrix.txt";
let ns: string;
let h: ReturnType<typeof inNamespace>;

const gvisor = (forkStrategy: "Copy" | "Clone", seed: boolean) => ({
  ...realTemplate("Filesystem", SIZE),
  runtimeClassName: "gvisor",
  forkStrategy,
  rootfs: { size: SIZE, ...(seed ? { seed: true } : {}) },
});

beforeAll(async () => {
  ns = await kube.namespace("it-matrix");
  h = inNamespace(kube, ns);
  // The `real` sample's shape (a seed, Copy forks), and one that fills each rootfs and clones.
  await kube.mustCreate(paths.podtemplates(ns), podTemplate("copy", gvisor("Copy", true)));
  await kube.mustCreate(paths.podtemplates(ns), podTemplate("clone", gvisor("Clone", false)));
  await kube.waitForItems(
    `${paths.pvcs(ns)}?labelSelector=pod.cubeplex.ai/seed-filled=true`,
    items => items.length === 1,
    240_000,
  );
  await h.readyPool("pool", "copy", 2, 240_000);
});
afterAll(async () => {
  await kube.delete(`/api/v1/namespaces/${ns}`);
  kube.close();
});

/**
 * The box once Running (for its current generation, with that reason if given), and its daemon,
 * checked to run on gVisor's kernel.
 */
async function running(name: string, reason?: string): Promise<{ box: Obj; podd: PoddClient }> {
  const box = await h.waitPhase(name, "Running", reason, 180_000);
  const podd = await PoddClient.open(box);
  const kernel = await podd.sh("uname -r");
  if (!kernel.includes("gvisor")) throw new Error(`${name} runs on kernel ${kernel}, not gVisor's`);
  return { box, podd };
}

/** The volume key a box runs on: its name, a re-attached key, or a claimed standby's name. */
const keyOf = (box: Obj): string => box.status.workspacePVCName.replace(/-workspace$/, "");

/** The box's data now, as a failure reports it. */
async function dataOf(podd: PoddClient) {
  return { workspace: await podd.read(WORKSPACE_FILE), installed: await installed(podd) };
}

/**
 * Checks the box's data against what the step promises: the workspace file's text, and the
 * installed tree kept or gone. Throws with what it read.
 */
async function expectData(
  podd: PoddClient,
  want: { workspace: string; installed: "kept" | "gone" },
): Promise<void> {
  const seen = await dataOf(podd);
  const tree = want.installed === "kept" ? ALL_INSTALLED : "";
  if (seen.workspace !== want.workspace || seen.installed !== tree) {
    throw new Error(
      `the data showed workspace file ${JSON.stringify(seen.workspace)} (want ${JSON.stringify(want.workspace)}) ` +
        `and installed tree ${JSON.stringify(seen.installed)} (want ${want.installed}: ${JSON.stringify(tree)})`,
    );
  }
}

/** Writes the box's data: its workspace file and the tree outside /workspace. */
async function seed(podd: PoddClient, text: string): Promise<void> {
  await podd.write(WORKSPACE_FILE, text);
  await install(podd);
}

/** Waits until the PVCs of a volume key are exactly `names`; throws with what is there. */
async function expectPVCs(key: string, names: string[]): Promise<void> {
  try {
    await h.waitPVCs(key, names);
  } catch {
    throw new Error(`PVCs of ${key}: ${(await h.pvcsOf(key)).join(", ")} (want ${names})`);
  }
}

/** The PVCs the box's Pod mounts, rootfs then workspace. */
async function mounted(pod: string): Promise<string[]> {
  const spec = (await kube.get(paths.pods(ns, pod))).body.spec;
  return ["rootfs", "workspace"].map(
    v => spec.volumes.find((x: Obj) => x.name === v)?.persistentVolumeClaim?.claimName,
  );
}

/** Checks that the box runs on the rootfs generation `gen` of its key, and mounts what it names. */
async function expectRootfs(box: Obj, gen: number): Promise<void> {
  const key = keyOf(box);
  const rootfs = `${key}-rootfs-g${gen}`;
  expect({ generation: box.status.rootfsGeneration, rootfs: box.status.rootfsPVCName }).toEqual({
    generation: gen,
    rootfs,
  });
  expect(await mounted(box.status.podName)).toEqual([rootfs, `${key}-workspace`]);
  await expectPVCs(key, [rootfs, `${key}-workspace`]);
}

/**
 * Waits until no Pod carries the box's label. A box deleted before its claim's finish holds no
 * finalizer and goes at once; garbage collection takes its Pod after it.
 */
const expectNoPods = (name: string) =>
  kube.waitForItems(
    `${paths.pods(ns)}?labelSelector=pod.cubeplex.ai/box=${name}`,
    items => items.length === 0,
    120_000,
  );

const pause = async (name: string) => {
  await h.patchBox(name, { desiredState: "Paused" });
  const box = await h.waitPhase(name, "Paused", undefined, 120_000);
  expect(await h.podsOf(name)).toEqual([]);
  return box;
};

/** Deletes the box and waits until it is gone. */
const remove = async (name: string) => {
  await kube.delete(paths.podboxes(ns, name));
  await h.waitGone(paths.podboxes(ns, name), 120_000);
};

/** Claims a standby of `pool` once one is ready, so that the claim never falls back to a start. */
async function claim(name: string, pool = "pool", spec: object = {}) {
  // A standby no box has taken yet: the pool's status lags behind claims, which defer their
  // writes, and a claim made on it alone may find the pool empty and start cold.
  await kube.waitForItems(
    `${paths.pods(ns)}?labelSelector=pod.cubeplex.ai/pool=${pool}`,
    pods =>
      pods.some(
        p =>
          !p.metadata.deletionTimestamp &&
          !(p.metadata.ownerReferences ?? []).some((o: Obj) => o.kind === "PodBox") &&
          (p.status?.conditions ?? []).some((c: Obj) => c.type === "Ready" && c.status === "True"),
      ),
    240_000,
  );
  await h.createBox(name, { warmPoolRef: pool, ...spec });
  return running(name, "WarmPoolClaimed");
}

/** A box of one origin: made Running, with its data, by `make`. */
type Origin = {
  title: string;
  /** The template its forks and re-attachments name. */
  template: string;
  /** Makes a box of this origin under `name`; its data is seeded afterwards. */
  make: (name: string) => Promise<{ box: Obj; podd: PoddClient }>;
};

/** A parent whose data a fork carries. */
async function parentOf(name: string, template: string): Promise<void> {
  if ((await kube.get(paths.podboxes(ns, name))).status === 200) return;
  await h.createBox(name, { templateRef: template });
  await seed((await running(name)).podd, `${name}'s`);
}

/** Makes a fork of `parent` (made once) and checks it carries the parent's data. */
const forked = (template: "copy" | "clone", parent: string) => async (name: string) => {
  await parentOf(parent, template);
  await h.createBox(name, { templateRef: template, forkFrom: parent });
  const made = await running(name, "ForkCloned");
  await expectData(made.podd, { workspace: `${parent}'s`, installed: "kept" });
  return made;
};

const ORIGINS: Origin[] = [
  {
    title: "started from a template",
    template: "copy",
    make: async name => {
      await h.createBox(name, { templateRef: "copy" });
      return running(name, "Started");
    },
  },
  {
    title: "claimed from a pool",
    template: "copy",
    make: name => claim(name),
  },
  { title: "forked by Clone", template: "clone", make: forked("clone", "clone-parent") },
  { title: "forked by Copy", template: "copy", make: forked("copy", "copy-parent") },
  {
    title: "re-attached by volumeKey",
    template: "copy",
    make: async name => {
      const kept = `${name}-kept`;
      await h.createBox(kept, { templateRef: "copy", volumeReclaimPolicy: "Retain" });
      await seed((await running(kept)).podd, `${kept}'s`);
      await remove(kept);
      await h.createBox(name, { templateRef: "copy", volumeKey: kept });
      const made = await running(name, "Started");
      await expectData(made.podd, { workspace: `${kept}'s`, installed: "kept" });
      return made;
    },
  },
  {
    title: "resumed after a pause",
    template: "copy",
    make: async name => {
      await h.createBox(name, { templateRef: "copy" });
      await seed((await running(name)).podd, `${name} before its pause`);
      await pause(name);
      await h.patchBox(name, { desiredState: "Running" });
      const made = await running(name, "Resumed");
      await expectData(made.podd, { workspace: `${name} before its pause`, installed: "kept" });
      return made;
    },
  },
];

/**
 * Registers the steps of one chain as tests, in order: each runs only if the ones before it
 * passed, and its failure names the origin and the step.
 */
function chain(origin: string) {
  let failed: string | undefined;
  return (title: string, body: () => Promise<void>) =>
    it(title, async () => {
      if (failed) throw new Error(`${origin} → ${title}: not run, as "${failed}" failed`);
      try {
        await body();
      } catch (e) {
        failed = title;
        const message = e instanceof Error ? e.message : String(e);
        throw new Error(`${origin} → ${title}: ${message}`);
      }
    });
}

describe.each(ORIGINS.map((o, i) => [o.title, o, i] as const))("a box %s", (title, origin, i) => {
  const step = chain(title);
  const name = `o${i}`;
  const text = `${name}'s own`;
  let podd: PoddClient;
  let box: Obj;
  let gen: number;

  /** The reset to `gen` done: the new rootfs mounted, the workspace kept; the tree reinstalled. */
  const resetDone = async () => {
    ({ box, podd } = await running(name, "RootFSReset"));
    await expectRootfs(box, gen);
    await expectData(podd, { workspace: text, installed: "gone" });
    await install(podd);
  };

  step("is made, and holds its data", async () => {
    ({ box, podd } = await origin.make(name));
    await seed(podd, text);
    await expectData(podd, { workspace: text, installed: "kept" });
    gen = box.status.rootfsGeneration;
  });

  step(
    "rootfs reset: a new rootfs of its key, mounted; workspace kept, installed tree gone",
    async () => {
      await h.patchBox(name, { rootfsGeneration: ++gen });
      await resetDone();
    },
  );

  step("two resets in a row: only the newest rootfs is left; workspace kept", async () => {
    await h.patchBox(name, { rootfsGeneration: gen + 1 });
    gen += 2;
    await h.patchBox(name, { rootfsGeneration: gen });
    await resetDone();
  });

  step(
    "fork: the fork has both, and what it writes stays its own; deleted, its volumes go",
    async () => {
      const fork = `${name}-fork`;
      await h.createBox(fork, { templateRef: origin.template, forkFrom: name });
      const child = await running(fork, "ForkCloned");
      await expectData(child.podd, { workspace: text, installed: "kept" });
      await child.podd.write(WORKSPACE_FILE, "the fork's");
      await child.podd.sh("echo mine > /etc/only-in-fork", "root");
      await expectData(podd, { workspace: text, installed: "kept" });
      expect(await podd.sh("ls /etc/only-in-fork 2>/dev/null; true")).toBe("");
      await remove(fork);
      await expectPVCs(fork, []);
    },
  );

  step("pause: the Pod goes, the volumes stay", async () => {
    const paused = await pause(name);
    const key = keyOf(box);
    expect(paused.status.rootfsPVCName).toBe(`${key}-rootfs-g${gen}`);
    await expectPVCs(key, [`${key}-rootfs-g${gen}`, `${key}-workspace`]);
  });

  step("fork of the paused box: the fork has both", async () => {
    const fork = `${name}-pfork`;
    await h.createBox(fork, { templateRef: origin.template, forkFrom: name });
    const child = await running(fork, "ForkCloned");
    await expectData(child.podd, { workspace: text, installed: "kept" });
    expect((await kube.get(paths.podboxes(ns, name))).body.status.phase).toBe("Paused");
    await remove(fork);
  });

  step("resume: the workspace and the installed tree are kept", async () => {
    await h.patchBox(name, { desiredState: "Running" });
    ({ box, podd } = await running(name, "Resumed"));
    await expectRootfs(box, gen);
    await expectData(podd, { workspace: text, installed: "kept" });
  });

  step("reset of the paused box: it stays paused, and resumes on a new rootfs", async () => {
    await pause(name);
    await h.patchBox(name, { rootfsGeneration: ++gen });
    const still = await h.waitPhase(name, "Paused", undefined, 60_000);
    expect(still.status.rootfsGeneration).toBe(gen - 1);
    expect(await h.podsOf(name)).toEqual([]);
    await h.patchBox(name, { desiredState: "Running" });
    await resetDone();
  });

  step(
    "delete without volumes (Retain): both are kept, for a box that re-attaches them",
    async () => {
      const key = keyOf(box);
      await h.patchBox(name, { volumeReclaimPolicy: "Retain" });
      await remove(name);
      const kept = [`${key}-rootfs-g${gen}`, `${key}-workspace`];
      await expectPVCs(key, kept);
      for (const pvc of kept) {
        const meta = (await kube.get(paths.pvcs(ns, pvc))).body.metadata;
        expect(meta.ownerReferences).toBeUndefined();
      }
      const again = `${name}-again`;
      await h.createBox(again, { templateRef: origin.template, volumeKey: key });
      await expectData((await running(again)).podd, { workspace: text, installed: "kept" });
      await remove(again);
      await expectPVCs(key, []);
    },
  );

  step("delete with volumes (Delete): the Pod and both volumes go", async () => {
    const other = `${name}-other`;
    const made = await origin.make(other);
    await seed(made.podd, "doomed");
    const key = keyOf(made.box);
    await remove(other);
    await expectNoPods(other);
    await expectPVCs(key, []);
  });
});

describe("a claimed box whose claim has not finished its follow-up writes", () => {
  const step = chain("an unfinished claim");
  const slow = {
    CUBEPOD_CLAIM_FINISH_QUIET_MS: "600000",
    CUBEPOD_CLAIM_FINISH_MAX_DELAY_MS: "600000",
  };
  let restored = false;
  beforeAll(() => {
    // Finishes wait for ten quiet minutes: every next step arrives before them.
    cluster("module", "kill");
    clusterWithEnv(slow, "module", "start");
  });
  afterAll(() => {
    if (restored) return;
    cluster("module", "kill");
    cluster("module", "start");
  });

  /** A claim whose Pod keeps its pool's labels and whose PVCs are still the pool's. */
  async function unfinished(name: string) {
    const made = await claim(name);
    const pod = (await kube.get(paths.pods(ns, made.box.status.podName))).body;
    expect(pod.metadata.labels["pod.cubeplex.ai/pool"]).toBe("pool");
    const pvc = (await kube.get(paths.pvcs(ns, made.box.status.workspacePVCName))).body;
    expect(pvc.metadata.labels["pod.cubeplex.ai/pool"]).toBe("pool");
    await seed(made.podd, `${name}'s`);
    return made;
  }

  step("rootfs reset: runs on the new rootfs of the standby's key, workspace kept", async () => {
    await unfinished("u-reset");
    await h.patchBox("u-reset", { rootfsGeneration: 2 });
    const { box, podd } = await running("u-reset", "RootFSReset");
    await expectRootfs(box, 2);
    await expectData(podd, { workspace: "u-reset's", installed: "gone" });
    expect((await kube.get(paths.pods(ns, "u-reset"))).body.metadata.labels).toMatchObject({
      "pod.cubeplex.ai/box": "u-reset",
    });
  });

  step("fork: the fork has both, and the parent still runs on the standby", async () => {
    const parent = await unfinished("u-fork");
    await h.createBox("u-fork-child", { templateRef: "copy", forkFrom: "u-fork" });
    const child = await running("u-fork-child", "ForkCloned");
    await expectData(child.podd, { workspace: "u-fork's", installed: "kept" });
    const now = await h.waitPhase("u-fork", "Running", "WarmPoolClaimed");
    expect(now.status.podName).toBe(parent.box.status.podName);
    await expectData(parent.podd, { workspace: "u-fork's", installed: "kept" });
  });

  step("pause and resume: the volumes stay the box's, its data kept", async () => {
    const made = await unfinished("u-pause");
    const key = keyOf(made.box);
    await pause("u-pause");
    await expectPVCs(key, [`${key}-rootfs-g1`, `${key}-workspace`]);
    await h.patchBox("u-pause", { desiredState: "Running" });
    const { podd } = await running("u-pause", "Resumed");
    await expectData(podd, { workspace: "u-pause's", installed: "kept" });
  });

  step("delete: the standby's Pod and volumes go with the box", async () => {
    const made = await unfinished("u-delete");
    await remove("u-delete");
    await expectNoPods("u-delete");
    await h.waitGone(paths.pods(ns, made.box.status.podName), 120_000);
    await expectPVCs(keyOf(made.box), []);
  });

  // Only a restart leaves the finish to the full reconcile: in a running module, the step's own
  // event runs the finish first.
  step(
    "reset while the module is down: the restart takes the standby's volumes over and resets",
    async () => {
      const made = await unfinished("u-down");
      cluster("module", "kill");
      await h.patchBox("u-down", { rootfsGeneration: 2 });
      cluster("module", "start");
      restored = true;
      const { box, podd } = await running("u-down", "RootFSReset");
      await expectRootfs(box, 2);
      await expectData(podd, { workspace: "u-down's", installed: "gone" });
      expect(keyOf(box)).toBe(made.box.status.podName);
    },
  );
});
