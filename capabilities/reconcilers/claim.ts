import type { PodBox } from "../api/kinds";
import { LABEL_BOX, LABEL_POOL } from "../manifests/labels";
import { controllerRef } from "../manifests/owner";
import { takeOverPVC } from "./box-apply";
import { statusOf } from "./errors";
import { jsonPatch, paths } from "../client/resources";
import type { OwnWrites } from "./own-writes";
import type { Standby, StandbyIndex } from "./standby-index";
import { objectKey } from "./keys";

const escape = (label: string) => label.replaceAll("~", "~0").replaceAll("/", "~1");

/**
 * Claims a ready standby of the box's pool: one conditional write on the standby's Pod (a JSON
 * patch whose `test` of the resourceVersion the API server checks atomically) moves it from the
 * pool to the box. A lost race (the Pod changed or was taken) tries the next standby. The write
 * goes through `podWrites`, keyed by {@link objectKey}, so that its watch echo is recognised. Returns
 * the claimed standby, or undefined when the pool has none ready (the box then starts cold).
 */
export async function claimStandby(
  box: PodBox,
  index: StandbyIndex,
  templateHash: string | undefined,
  podWrites: OwnWrites,
  attempts = 5,
): Promise<Standby | undefined> {
  const namespace = box.metadata!.namespace!;
  for (let i = 0; i < attempts; i++) {
    const s = index.take(namespace, box.spec!.warmPoolRef!, templateHash);
    if (!s) return undefined;
    try {
      const patch = () =>
        jsonPatch<{ metadata?: { resourceVersion?: string } }>(paths.pods(namespace, s.name), [
          { op: "test", path: "/metadata/resourceVersion", value: s.resourceVersion },
          { op: "remove", path: `/metadata/labels/${escape(LABEL_POOL)}` },
          { op: "add", path: `/metadata/labels/${escape(LABEL_BOX)}`, value: box.metadata!.name },
          {
            op: "replace",
            path: "/metadata/ownerReferences",
            value: [controllerRef("PodBox", box.metadata!.name!, box.metadata!.uid!)],
          },
        ]);
      await podWrites.during(
        objectKey(namespace, s.name),
        async () => (await patch()).metadata?.resourceVersion,
      );
      return s;
    } catch (e) {
      // 422: the test failed (someone else changed or claimed it); 404/409: gone or conflicting.
      const code = statusOf(e);
      if (code === 422 || code === 404 || code === 409) continue;
      throw e;
    }
  }
  return undefined;
}

/** Hands the standby's PVCs to the box (owner and labels), after the claim. */
export async function handOverVolumes(box: PodBox, s: Standby): Promise<void> {
  const owner = controllerRef("PodBox", box.metadata!.name!, box.metadata!.uid!);
  await Promise.all(
    [s.rootfsPVCName, s.workspacePVCName].map(name =>
      takeOverPVC(box.metadata!.namespace!, name, owner, box.metadata!.name!),
    ),
  );
}
