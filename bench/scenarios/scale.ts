import { Kube, Obj, paths } from "../../hack/lib/kube";
import { podBox, podTemplate, TEMPLATE } from "../../hack/lib/objects";
import { metric, metricMiB, moduleRequests, moduleRSSMiB } from "../lib/module";
import { startPool } from "../lib/pools";
import { results } from "../lib/results";
import { now, sleep } from "../lib/stats";

/** Resolves once `running` boxes are Running and `paused` Paused, from one list and a watch. */
export async function boxesSettled(kube: Kube, ns: string, running: number, paused: number) {
  const count = (items: Obj[], phase: string) =>
    items.filter(b => b.status?.phase === phase).length;
  await kube.waitForItems(
    paths.podboxes(ns),
    items => count(items, "Running") === running && count(items, "Paused") === paused,
    1_200_000,
  );
}

export async function benchScale(kube: Kube) {
  const ns = await kube.namespace("bench-scale");
  await kube.mustCreate(paths.podtemplates(ns), podTemplate("python", TEMPLATE));
  const running = 1200;
  const paused = 400;
  const pooled = 400;
  const t0 = now();
  const standbys = await startPool(kube, ns, "scale-pool", pooled);
  const creates: Promise<unknown>[] = [];
  for (let i = 0; i < running + paused; i++) {
    const spec = {
      templateRef: "python",
      desiredState: i < running ? "Running" : "Paused",
      idleTimeoutSeconds: 3600,
    };
    creates.push(kube.mustCreate(paths.podboxes(ns), podBox(`s-${i}`, spec)));
    if (creates.length >= 20) await Promise.all(creates.splice(0));
  }
  await Promise.all(creates);
  // Converged: every running box Running, every paused one Paused, the pool full (from watches).
  await Promise.all([boxesSettled(kube, ns, running, paused), standbys.atLeast(pooled)]);
  standbys.stop();
  const converge = (now() - t0) / 1000;
  await sleep(15_000); // let the last status echoes settle
  const before = moduleRequests();
  await sleep(60_000);
  const after = moduleRequests();
  await sleep(11_000); // one more reaper pass over the full cache
  const reaper = await metric("cubepod_reaper_last_pass");
  const boxes = running + paused + pooled;
  results.scale = {
    what: `${running} running + ${paused} paused boxes + ${pooled} pooled standbys`,
    convergeSeconds: Math.round(converge),
    moduleRSSMiB: moduleRSSMiB(),
    moduleHeapUsedMiB: await metricMiB("nodejs_heap_size_used_bytes"),
    moduleExternalMiB: await metricMiB("nodejs_external_memory_bytes"),
    moduleRequestsInIdleMinute: after.other - before.other,
    apiRequestsPerIdleBoxPerMinute:
      Math.round(((after.other - before.other) / boxes) * 1000) / 1000,
    peprScheduleStoreWritesPerMinute: after.store - before.store,
    reaperPass: reaper,
  };
  await kube.delete(`/api/v1/namespaces/${ns}`);
}
