import { Kube, Obj, paths } from "../../hack/lib/kube";
import { isPodReady } from "../../capabilities/kit/pod-ready";
import { PoddClient } from "../../hack/lib/podd-client";
import { podBox, podTemplate, REAL_NODE_PLACEMENT, realTemplate } from "../../hack/lib/objects";
import { results } from "../lib/results";
import { now, stats } from "../lib/stats";

/** A template placed on the real node, on its local volumes, forks copied. */
const REAL_TEMPLATE = realTemplate("Filesystem", "1Gi");
const ROUNDS = 5;
/** What a fork copies: a workspace file of this many MiB, written through podd. */
const DATA_MIB = 64;

/**
 * Real pause, resume, reset and fork on the real node, step by step (ms from the spec change or
 * create to what the API server shows), beside their floor measured in the same run: a bare Pod
 * of the same image, probe and volumes, created to Ready and deleted to gone, with no operator.
 */
export async function benchRealNode(kube: Kube) {
  const ns = await kube.namespace("bench-real");
  await kube.mustCreate(paths.podtemplates(ns), podTemplate("real", REAL_TEMPLATE));
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
    floorPodReady: [] as number[],
    floorPodGone: [] as number[],
    create: [] as number[],
    pause: [] as number[],
    resume: [] as number[],
    reset: [] as number[],
    forkCopied: [] as number[],
    forkRunning: [] as number[],
  };

  for (let i = 0; i < ROUNDS; i++) {
    const floor = `floor-${i}`;
    await kube.mustCreate(paths.pvcs(ns), floorPVC(`${floor}-a`));
    await kube.mustCreate(paths.pvcs(ns), floorPVC(`${floor}-b`));
    m.floorPodReady.push(
      await timed(async () => {
        await kube.mustCreate(paths.pods(ns), floorPod(floor));
        await kube.waitFor(paths.pods(ns, floor), o => o !== undefined && isPodReady(o), 120_000);
      }),
    );
    m.floorPodGone.push(
      await timed(async () => {
        await kube.delete(paths.pods(ns, floor));
        await kube.waitFor(paths.pods(ns, floor), o => o === undefined, 120_000);
      }),
    );

    const name = `box-${i}`;
    m.create.push(
      await timed(async () => {
        await kube.mustCreate(paths.podboxes(ns), podBox(name, { templateRef: "real" }));
        await phase(name, "Running");
      }),
    );
    await writeData(await PoddClient.open((await kube.get(box(name))).body));
    m.pause.push(
      await timed(() => patch(name, { desiredState: "Paused" }).then(() => phase(name, "Paused"))),
    );
    m.resume.push(
      await timed(() =>
        patch(name, { desiredState: "Running" }).then(() => phase(name, "Running", "Resumed")),
      ),
    );

    const fork = `fork-${i}`;
    const t0 = now();
    await kube.mustCreate(
      paths.podboxes(ns),
      podBox(fork, { templateRef: "real", forkFrom: name }),
    );
    await kube.waitFor(
      paths.pvcs(ns, `${fork}-workspace`),
      o => o?.metadata?.annotations?.["pod.cubeplex.ai/copied"] !== undefined,
      120_000,
    );
    m.forkCopied.push(now() - t0);
    await phase(fork, "Running", "ForkCloned");
    m.forkRunning.push(now() - t0);

    m.reset.push(
      await timed(() =>
        patch(name, { rootfsGeneration: 2 }).then(() => phase(name, "Running", "RootFSReset")),
      ),
    );
    for (const n of [name, fork]) await kube.delete(box(n));
  }
  await kube.delete(`/api/v1/namespaces/${ns}`);

  const s = Object.fromEntries(Object.entries(m).map(([k, v]) => [k, stats(v)]));
  results.realNode = {
    what:
      `real node (runc, local volumes): box steps to the status showing them, and a bare Pod's ` +
      `create to Ready / delete to gone with no operator (ms); forks copy ${DATA_MIB} MiB`,
    ...s,
    resumeOverFloorP50: Math.round((s.resume.p50 / s.floorPodReady.p50) * 100) / 100,
    pauseOverFloorP50: Math.round((s.pause.p50 / s.floorPodGone.p50) * 100) / 100,
  };
}

function floorPVC(name: string) {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name },
    spec: {
      accessModes: ["ReadWriteOnce"],
      storageClassName: "cubepod-local",
      resources: { requests: { storage: "1Gi" } },
    },
  };
}

/** The box's Pod without CubePod: podd on two local volumes, the same readiness probe. */
function floorPod(name: string) {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name },
    spec: {
      ...REAL_NODE_PLACEMENT,
      terminationGracePeriodSeconds: 10,
      automountServiceAccountToken: false,
      containers: [
        {
          name: "sandbox",
          image: "cubepod.local/podd-injector:dev",
          command: ["/opt/cubepod/bin/podd"],
          readinessProbe: { httpGet: { path: "/health", port: 49983 }, periodSeconds: 2 },
          volumeMounts: [
            { name: "a", mountPath: "/workspace" },
            { name: "b", mountPath: "/mnt/cubepod/rootfs" },
          ],
        },
      ],
      volumes: [
        { name: "a", persistentVolumeClaim: { claimName: `${name}-a` } },
        { name: "b", persistentVolumeClaim: { claimName: `${name}-b` } },
      ],
    },
  };
}

async function writeData(podd: PoddClient): Promise<void> {
  const form = new FormData();
  form.append("file", new Blob([Buffer.alloc(DATA_MIB << 20, 7)]), "/workspace/data.bin");
  const r = await podd.fetch("/files?path=/workspace/data.bin", { method: "POST", body: form });
  if (r.status !== 200) throw new Error(`writing the data: ${r.status} ${await r.text()}`);
}
