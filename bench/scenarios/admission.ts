import { Kube, paths } from "../../testkit/kube";
import { TEMPLATE, templateHashOf } from "../../testkit/objects";
import { results } from "../lib/results";
import { now, sleep, stats, Stats } from "../lib/stats";

export async function benchAdmission(kube: Kube, ns: string) {
  const run = async (label: string, labels: Record<string, string>) => {
    const latencies: number[] = [];
    const pending: Promise<void>[] = [];
    for (let i = 0; i < 500; i++) {
      const t0 = now();
      pending.push(
        kube
          .mustCreate(paths.pods(ns), {
            metadata: { name: `${label}-${i}`, labels },
            spec: { containers: [{ name: "sandbox", image: "py:3" }] },
          })
          .then(() => void latencies.push(now() - t0)),
      );
      await sleep(20); // 50 creates per second
    }
    await Promise.all(pending);
    return stats(latencies);
  };
  const plain = await run("plain", { app: "bench" });
  const sandbox = await run("sandbox", { "pod.cubeplex.ai/template": "python" });
  // As the operator builds them: the hash names the template version, which the webhook caches.
  const built = await run("built", {
    "pod.cubeplex.ai/template": "python",
    "pod.cubeplex.ai/template-hash": templateHashOf(TEMPLATE),
  });
  const added = (s: Stats) => ({
    p50: Math.round((s.p50 - plain.p50) * 10) / 10,
    p99: Math.round((s.p99 - plain.p99) * 10) / 10,
  });
  results.admission = {
    what: "Pod create request latency at 50 creates/s (ms); sandbox Pods go through the mutate webhook",
    plainPod: plain,
    sandboxPod: sandbox,
    addedByWebhook: added(sandbox),
    operatorBuiltSandboxPod: built,
    addedByWebhookToOperatorBuilt: added(built),
  };
}
