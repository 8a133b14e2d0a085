import type { PodBox } from "../api/kinds";
import { controllerRef } from "../manifests/owner";
import { takeOverPVC } from "./box-apply";
import { statusOf } from "./errors";
import { claimPatch } from "./claim-decide";
import { jsonPatch, paths } from "../client/resources";
import type { OwnWrites } from "./own-writes";
import type { Standby, StandbyIndex } from "./standby-index";
import { objectKey } from "./keys";

/**
 * Claims a ready standby of the box's pool: one conditional write on the standby's Pod
 * ({@link claimPatch}) moves it from the pool to the box. A lost race (the Pod changed or was
 * taken) tries the next standby. The write goes through `podWrites`, keyed by {@link objectKey},
 * so that its watch echo is recognised. Returns the claimed standby, or undefined when the pool
 * has none ready (the box then starts cold).
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
      await podWrites.during(objectKey(namespace, s.name), async () => {
        type Written = { metadata?: { resourceVersion?: string } };
        const pod = await jsonPatch<Written>(paths.pods(namespace, s.name), claimPatch(box, s));
        return pod.metadata?.resourceVersion;
      });
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
