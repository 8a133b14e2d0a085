import { Sandbox } from "e2b";
import { validatePodTemplate } from "../../capabilities/admission/rules";
import { isPodReady } from "../../capabilities/kit/pod-ready";
import { buildBoxPod } from "../../capabilities/manifests/pod";
import { Kube, Obj, paths } from "../../testkit/kube";
import { PoddClient } from "../../testkit/podd-client";
import { podBox, podTemplate, REAL_NODE_PLACEMENT, realTemplate } from "../../testkit/objects";
import { policyControllerPid } from "./sandbox";
import { results } from "../lib/results";
import { sdkTenant } from "../lib/sdk";
import { hundredths, now, sleep, stats } from "../lib/stats";

/** A template placed on the real node, on its CSI driver's volumes, forks cloned. */
const REAL_TEMPLATE = realTemplate("Filesystem", "1Gi");
/** The `real` sample's runtime for forks, with room for the data a fork carries. */
const FORK_TEMPLATE = { ...realTemplate("Filesystem", "2Gi"), runtimeClassName: "gvisor" };
/** The same, keeping a seed: new rootfs volumes are clones of one filled from the image. */
const SEEDED_TEMPLATE = { ...REAL_TEMPLATE, rootfs: { size: "1Gi", seed: true } };
const validated = (spec: object) => {
  const v = validatePodTemplate(spec);
  if (!v.ok) throw new Error(v.errors.join("; "));
  return v.spec;
};
const validTemplate = validated(REAL_TEMPLATE);
const ROUNDS = 5;
/** Warm claims through the gateway, one at a time, each from a full pool. */
const CLAIMS = 12;
const SETTLE_MS = 3000;
/** What a fork carries besides the image's root: a workspace file of this many MiB. */
const DATA_MIB = 1024;

/**
 * The real node's lifecycle (runc, the CSI driver's volumes) beside its floor in the same run, ms
 * from the spec change or create to what the API server shows: a box's cold create, pause, resume
 * and rootfs reset, against the least sandbox Pod with no operator ({@link floorPod}) created on
 * new volumes, deleted, and created again on the same volumes (what a resume does); forks under
 * gVisor of a box holding its image's root and 1 GiB, to their first command's answer, against a
 * bare clone of the box's two claims with the least Pod on them ({@link benchForks}); and warm
 * claims as an agent makes them, the E2B SDK's `Sandbox.create` through the gateway until the
 * first `commands.run` answers.
 */
export async function benchRealNode(kube: Kube) {
  const ns = await kube.namespace("bench-real");
  await kube.mustCreate(paths.podtemplates(ns), podTemplate("real", REAL_TEMPLATE));
  await kube.mustCreate(paths.podtemplates(ns), podTemplate("seeded", SEEDED_TEMPLATE));
  // The seed is filled once per template version, before any box needs it.
  await kube.waitForItems(
    `${paths.pvcs(ns)}?labelSelector=pod.cubeplex.ai/seed-of=seeded`,
    items => items.some(p => p.metadata.labels["pod.cubeplex.ai/seed-filled"] === "true"),
    300_000,
  );
  const box = (name: string) => paths.podboxes(ns, name);
  const phase = (name: string, p: string, reason?: string) =>
    kube.waitFor(
      box(name),
      o =>
        o?.status?.phase === p &&
        (!reason || o.status.reason === reason) &&
        o.status.observedGeneration === o.metadata.generation,
      120_000,
    ) as Promise<Obj>;
  const patch = (name: string, spec: object) => kube.mergePatch(box(name), { spec });
  const timed = async (step: () => Promise<unknown>) => {
    const t0 = now();
    await step();
    return now() - t0;
  };
  const m = {
    floorCreate: [] as number[],
    floorGone: [] as number[],
    floorRestart: [] as number[],
    create: [] as number[],
    pause: [] as number[],
    resume: [] as number[],
    reset: [] as number[],
    createSeeded: [] as number[],
    resetSeeded: [] as number[],
  };

  for (let i = 0; i < ROUNDS; i++) {
    const floor = `floor-${i}`;
    const floorReady = async () => {
      await kube.mustCreate(paths.pods(ns), floorPod(floor));
      await kube.waitFor(paths.pods(ns, floor), o => o !== undefined && isPodReady(o), 120_000);
    };
    const floorGone = async () => {
      await kube.delete(paths.pods(ns, floor));
      await kube.waitFor(paths.pods(ns, floor), o => o === undefined, 120_000);
    };
    m.floorCreate.push(
      await timed(async () => {
        await kube.mustCreate(paths.pvcs(ns), floorPVC(`${floor}-a`));
        await kube.mustCreate(paths.pvcs(ns), floorPVC(`${floor}-b`));
        await floorReady();
      }),
    );
    m.floorGone.push(await timed(floorGone));
    m.floorRestart.push(await timed(floorReady));
    await floorGone();
    for (const pvc of ["a", "b"]) await kube.delete(paths.pvcs(ns, `${floor}-${pvc}`));

    const name = `box-${i}`;
    m.create.push(
      await timed(async () => {
        await kube.mustCreate(paths.podboxes(ns), podBox(name, { templateRef: "real" }));
        await phase(name, "Running");
      }),
    );
    m.pause.push(
      await timed(() => patch(name, { desiredState: "Paused" }).then(() => phase(name, "Paused"))),
    );
    m.resume.push(
      await timed(() =>
        patch(name, { desiredState: "Running" }).then(() => phase(name, "Running", "Resumed")),
      ),
    );

    m.reset.push(
      await timed(() =>
        patch(name, { rootfsGeneration: 2 }).then(() => phase(name, "Running", "RootFSReset")),
      ),
    );

    const seeded = `seeded-${i}`;
    m.createSeeded.push(
      await timed(async () => {
        await kube.mustCreate(paths.podboxes(ns), podBox(seeded, { templateRef: "seeded" }));
        await phase(seeded, "Running");
      }),
    );
    m.resetSeeded.push(
      await timed(() =>
        patch(seeded, { rootfsGeneration: 2 }).then(() => phase(seeded, "Running", "RootFSReset")),
      ),
    );
    for (const n of [name, seeded]) await kube.delete(box(n));
  }
  await kube.delete(`/api/v1/namespaces/${ns}`);

  const forks = await benchForks(kube);
  const claims = await warmClaims(kube);
  const s = Object.fromEntries(Object.entries(m).map(([k, v]) => [k, stats(v)]));
  const ratio = (a: number, b: number) => hundredths(a / b);
  results.realNode = {
    what:
      `real node (runc, the CSI driver's volumes): box steps to the status showing them, against ` +
      `the least sandbox Pod with no operator created on new volumes, deleted, and created again ` +
      `on them (ms); forks under gVisor of a box holding its root and ${DATA_MIB} MiB to their ` +
      `first command's answer, against a bare clone of its claims with the least Pod on them; ` +
      `warm claims through the gateway to the first command's output`,
    ...s,
    ...forks,
    ...claims,
    createOverFloorP50: ratio(s.create.p50, s.floorCreate.p50),
    createSeededOverFloorP50: ratio(s.createSeeded.p50, s.floorCreate.p50),
    resumeOverFloorRestartP50: ratio(s.resume.p50, s.floorRestart.p50),
    pauseOverFloorP50: ratio(s.pause.p50, s.floorGone.p50),
  };
}

/**
 * Warm claims as an agent makes them: the E2B SDK's `Sandbox.create` through the gateway, then
 * `commands.run("echo ok")` until its output is back, one at a time from a full pool; beside
 * them, a second command on the same sandbox. Every other claim runs with the NetworkPolicy
 * controller stopped (SIGSTOP) until its commands are done: its rules still filter every packet,
 * but the full resync a claim's new Pod labels set off does not take the CPUs meanwhile.
 */
async function warmClaims(kube: Kube) {
  const { ns, opts, standbys } = await sdkTenant(kube, "bench-real-claims", 2);
  const m = {
    claimToFirstOutput: [] as number[],
    claimCreate: [] as number[],
    claimFirstCommand: [] as number[],
    claimNextCommand: [] as number[],
    claimToFirstOutputNoPolicySync: [] as number[],
  };
  try {
    for (let i = 0; i < 2 * CLAIMS; i++) {
      const frozen = i % 2 === 1;
      await standbys.atLeast(2);
      await sleep(SETTLE_MS);
      if (frozen) process.kill(policyControllerPid(), "SIGSTOP");
      try {
        const t0 = now();
        const sbx = await Sandbox.create("real", opts);
        const t1 = now();
        const out = await sbx.commands.run("echo ok");
        const t2 = now();
        if (out.stdout !== "ok\n") throw new Error(`the first command said ${JSON.stringify(out)}`);
        await sbx.commands.run("echo ok");
        const t3 = now();
        if (frozen) {
          m.claimToFirstOutputNoPolicySync.push(t2 - t0);
        } else {
          m.claimToFirstOutput.push(t2 - t0);
          m.claimCreate.push(t1 - t0);
          m.claimFirstCommand.push(t2 - t1);
          m.claimNextCommand.push(t3 - t2);
        }
        await sbx.kill();
      } finally {
        if (frozen) process.kill(policyControllerPid(), "SIGCONT");
      }
    }
  } finally {
    standbys.stop();
  }
  await kube.delete(`/api/v1/namespaces/${ns}`);
  return Object.fromEntries(Object.entries(m).map(([k, v]) => [k, stats(v)]));
}

function floorPVC(name: string, size = REAL_TEMPLATE.rootfs.size, cloneOf?: string) {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name },
    spec: {
      accessModes: ["ReadWriteOnce"],
      storageClassName: "cubepod-local",
      resources: { requests: { storage: size } },
      ...(cloneOf ? { dataSource: { kind: "PersistentVolumeClaim", name: cloneOf } } : {}),
    },
  };
}

/**
 * Forks of a running box under gVisor whose volumes hold its image's root and {@link DATA_MIB}
 * MiB, from the create to the answer of the fork's first command through its daemon; and their
 * floor, a bare clone of the box's two claims with the least sandbox Pod on them until it is
 * ready (its daemon answers), in the same run.
 */
export async function benchForks(kube: Kube) {
  const ns = await kube.namespace("bench-forks");
  const spec = validated(FORK_TEMPLATE);
  await kube.mustCreate(paths.podtemplates(ns), podTemplate("forkable", FORK_TEMPLATE));
  await kube.mustCreate(paths.podboxes(ns), podBox("parent", { templateRef: "forkable" }));
  const running = (name: string, reason?: string) =>
    kube.waitFor(
      paths.podboxes(ns, name),
      o =>
        o?.status?.phase === "Running" &&
        (!reason || o.status.reason === reason) &&
        o.status.observedGeneration === o.metadata.generation,
      180_000,
    ) as Promise<Obj>;
  const parent = await PoddClient.open(await running("parent"));
  await parent.sh(`head -c ${DATA_MIB << 20} /dev/urandom > /workspace/data.bin`);
  const m = { forkFirstCommand: [] as number[], floorCloneReady: [] as number[] };
  for (let i = 0; i < ROUNDS; i++) {
    const fork = `fork-${i}`;
    const t0 = now();
    await kube.mustCreate(
      paths.podboxes(ns),
      podBox(fork, { templateRef: "forkable", forkFrom: "parent" }),
    );
    const child = await PoddClient.open(await running(fork, "ForkCloned"));
    await child.sh("true");
    m.forkFirstCommand.push(now() - t0);
    await kube.delete(paths.podboxes(ns, fork));

    const floor = `floor-${i}`;
    const t1 = now();
    await kube.mustCreate(paths.pvcs(ns), floorPVC(`${floor}-a`, "2Gi", "parent-rootfs-g1"));
    await kube.mustCreate(paths.pvcs(ns), floorPVC(`${floor}-b`, "2Gi", "parent-workspace"));
    await kube.mustCreate(paths.pods(ns), floorPod(floor, spec));
    await kube.waitFor(paths.pods(ns, floor), o => o !== undefined && isPodReady(o), 180_000);
    m.floorCloneReady.push(now() - t1);
    await kube.delete(paths.pods(ns, floor));
    await kube.waitFor(paths.pods(ns, floor), o => o === undefined, 120_000);
    for (const pvc of ["a", "b"]) await kube.delete(paths.pvcs(ns, `${floor}-${pvc}`));
  }
  await kube.delete(`/api/v1/namespaces/${ns}`);
  const s = Object.fromEntries(Object.entries(m).map(([k, v]) => [k, stats(v)]));
  return { ...s, forkOverFloorP50: hundredths(s.forkFirstCommand.p50 / s.floorCloneReady.p50) };
}

/**
 * The least sandbox Pod, with no operator: podd copied in by an init container from the injector
 * image, running on the template's image with the same two local volumes (the workspace at
 * /workspace, the rootfs beside it) and the same readiness probe as a box's Pod. What it leaves
 * out is what CubePod adds: the rootfs as the root (its fill and subpath mounts), the hardening,
 * the network policy.
 */
function floorPod(name: string, spec = validTemplate) {
  const box = buildBoxPod({
    namespace: "floor",
    podName: name,
    boxName: name,
    template: { name: "real", spec },
    rootfsPVCName: `${name}-a`,
    workspacePVCName: `${name}-b`,
  });
  const sandbox = box.spec!.containers[0];
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name },
    spec: {
      ...REAL_NODE_PLACEMENT,
      terminationGracePeriodSeconds: box.spec!.terminationGracePeriodSeconds,
      ...(spec.runtimeClassName ? { runtimeClassName: spec.runtimeClassName } : {}),
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      initContainers: [
        {
          name: "install",
          image: spec.poddInjectorImage,
          command: ["cp", "/opt/cubepod/bin/podd", "/bin-dir/"],
          volumeMounts: [{ name: "bin", mountPath: "/bin-dir" }],
        },
      ],
      containers: [
        {
          name: "sandbox",
          image: spec.image,
          command: ["/opt/cubepod/bin/podd"],
          env: [
            { name: "CUBEPOD_ENVD_PORT", value: String(spec.envdPort) },
            { name: "CUBEPOD_CONTROL_PUBLIC_KEY", value: Buffer.alloc(32, 1).toString("base64") },
            { name: "CUBEPOD_POD_UID", valueFrom: { fieldRef: { fieldPath: "metadata.uid" } } },
          ],
          ports: sandbox.ports,
          readinessProbe: sandbox.readinessProbe,
          volumeMounts: [
            { name: "bin", mountPath: "/opt/cubepod/bin", readOnly: true },
            { name: "a", mountPath: "/mnt/cubepod/rootfs" },
            { name: "b", mountPath: "/workspace" },
          ],
        },
      ],
      volumes: [
        { name: "bin", emptyDir: {} },
        { name: "a", persistentVolumeClaim: { claimName: `${name}-a` } },
        { name: "b", persistentVolumeClaim: { claimName: `${name}-b` } },
      ],
    },
  };
}
