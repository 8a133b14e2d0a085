import { Kube, paths } from "../../testkit/kube";
import { podBox } from "../../testkit/objects";
import { results } from "../lib/results";
import { now, stats } from "../lib/stats";
import { watcher } from "../lib/watch";

export async function benchCold(kube: Kube, ns: string) {
  const pods = watcher(kube, paths.pods(ns), () => true);
  const running = watcher(kube, paths.podboxes(ns), o => o.status?.phase === "Running");
  const toPod: number[] = [];
  const toRunning: number[] = [];
  for (let i = 0; i < 30; i++) {
    const name = `cold-${i}`;
    const t0 = now();
    await kube.mustCreate(paths.podboxes(ns), podBox(name, { templateRef: "python" }));
    toPod.push((await pods.when(name)) - t0);
    toRunning.push((await running.when(name)) - t0);
  }
  pods.stop();
  running.stop();
  results.coldStart = {
    what: "PodBox create request -> its Pod exists / the box is Running (ms), sequential",
    toPod: stats(toPod),
    toRunning: stats(toRunning),
  };
}
