/**
 * The least an operator can do for a warm claim, for the `floor` benchmark: one watch on the
 * namespace's PodBoxes and, for each new box, the same two writes CubePod makes (the standby
 * Pod's conditional JSON patch, then the same box status), nothing else. Its standbys are the
 * ready ones of the pool named on the command line, which the module made before it was stopped,
 * handed out by the module's own StandbyIndex. Run by bench/run.ts in a process of its own, as the module is.
 * Usage: tsx bench/floor-operator.ts <namespace> <pool>; prints "ready" once it watches.
 */
import { claimedStatus, claimPatch } from "../../capabilities/claim/decide";
import { StandbyIndex } from "../../capabilities/claim/standby-index";
import { kubeTime } from "../../capabilities/kit/conditions";
import { Kube, Obj, paths } from "../../testkit/kube";

async function main() {
  const [ns, pool] = process.argv.slice(2);
  const kube = new Kube();
  const listed = await kube.get(
    `${paths.pods(ns)}?labelSelector=${encodeURIComponent(`pod.cubeplex.ai/pool=${pool}`)}`,
  );
  // The module's own index of ready standbys, filled once (nothing else touches them).
  const standbys = new StandbyIndex();
  for (const pod of listed.body.items as Obj[]) standbys.observe(pod);
  const boxes = await kube.get(paths.podboxes(ns));
  kube.watchCollection(
    paths.podboxes(ns),
    (type, box) => {
      if (type !== "ADDED") return;
      const name = box.metadata.name;
      void (async () => {
        // A standby that changed since the list (422) is skipped for the next, as CubePod does.
        for (let standby = standbys.take(ns, pool); standby; standby = standbys.take(ns, pool)) {
          const claimed = await kube.request(
            "PATCH",
            paths.pods(ns, standby.name),
            claimPatch(box, standby),
            "application/json-patch+json",
          );
          if (claimed.status === 422 || claimed.status === 404 || claimed.status === 409) continue;
          if (claimed.status >= 300) throw new Error(`claim of ${name}: HTTP ${claimed.status}`);
          const status = await kube.request(
            "PATCH",
            `${paths.podboxes(ns, name)}/status`,
            { status: claimedStatus(box, standby, undefined, kubeTime()) },
            "application/merge-patch+json",
          );
          if (status.status >= 300) throw new Error(`status of ${name}: HTTP ${status.status}`);
          return;
        }
      })().catch(e => console.error(`floor operator: ${String(e)}`));
    },
    boxes.body.metadata.resourceVersion,
  );
  console.log("ready");
}

main().catch(e => {
  console.error(e);
  process.exit(1);
});
