/**
 * The least an operator can do for a warm claim, for the `floor` benchmark: one watch on the
 * namespace's PodBoxes and, for each new box, the same two writes CubePod makes (the standby
 * Pod's conditional JSON patch, then the same box status), nothing else. Its standbys are the
 * ready ones of the pool named on the command line, which the module made before it was stopped,
 * taken in order. Run by bench/run.ts in a process of its own, as the module is.
 * Usage: tsx bench/floor-operator.ts <namespace> <pool>; prints "ready" once it watches.
 */
import { Kube, Obj, paths } from "../test/integration/kube";
import { claimedStatus } from "../capabilities/reconcilers/claim-decide";

async function main() {
  const [ns, pool] = process.argv.slice(2);
  const kube = new Kube();
  const listed = await kube.get(
    `${paths.pods(ns)}?labelSelector=${encodeURIComponent(`pod.cubeplex.ai/pool=${pool}`)}`,
  );
  const standbys = (listed.body.items as Obj[]).filter(p => p.status?.podIP);
  const boxes = await kube.get(paths.podboxes(ns));
  kube.watchCollection(
    paths.podboxes(ns),
    (type, box) => {
      if (type !== "ADDED") return;
      const pod = standbys.shift();
      if (!pod) return;
      const name = box.metadata.name;
      void (async () => {
        const claimed = await kube.request(
          "PATCH",
          paths.pods(ns, pod.metadata.name),
          [
            { op: "test", path: "/metadata/resourceVersion", value: pod.metadata.resourceVersion },
            { op: "remove", path: "/metadata/labels/pod.cubeplex.ai~1pool" },
            { op: "add", path: "/metadata/labels/pod.cubeplex.ai~1box", value: name },
            {
              op: "replace",
              path: "/metadata/ownerReferences",
              value: [
                {
                  apiVersion: "pod.cubeplex.ai/v1alpha1",
                  kind: "PodBox",
                  name,
                  uid: box.metadata.uid,
                  controller: true,
                  blockOwnerDeletion: true,
                },
              ],
            },
          ],
          "application/json-patch+json",
        );
        if (claimed.status >= 300) throw new Error(`claim of ${name}: HTTP ${claimed.status}`);
        const standby = {
          namespace: ns,
          name: pod.metadata.name,
          pool,
          podIP: pod.status.podIP,
          resourceVersion: pod.metadata.resourceVersion,
          rootfsPVCName: `${pod.metadata.name}-rootfs-g1`,
          workspacePVCName: `${pod.metadata.name}-workspace`,
        };
        const now = new Date().toISOString().replace(/\.\d+Z$/, "Z");
        const status = await kube.request(
          "PATCH",
          `${paths.podboxes(ns, name)}/status`,
          { status: claimedStatus(box, standby, 0, now) },
          "application/merge-patch+json",
        );
        if (status.status >= 300) throw new Error(`status of ${name}: HTTP ${status.status}`);
      })();
    },
    boxes.body.metadata.resourceVersion,
  );
  console.log("ready");
}

main().catch(e => {
  console.error(e);
  process.exit(1);
});
