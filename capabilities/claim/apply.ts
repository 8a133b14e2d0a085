import type { V1Pod } from "@kubernetes/client-node";
import type { PodBox } from "../api/kinds";
import type { ApiClient } from "../client/api-client";
import { paths } from "../client/paths";
import { statusOf } from "../kit/api-errors";
import { objectKey } from "../kit/object-key";
import { takeOverPVC } from "../kit/object-actions";
import type { WriteEchoes } from "../kit/write-echoes";
import { LABEL_BOX, LABEL_POOL } from "../manifests/labels";
import { boxOwnerRef, isControlledBy } from "../manifests/owner";
import { claimIndexMisses } from "../metrics/registry";
import { claimPatch } from "./decide";
import type { Standby, StandbyIndex } from "./standby-index";

/**
 * Claims a ready standby of the box's pool: one conditional write on the standby's Pod
 * ({@link claimPatch}) moves it from the pool to the box. A lost race (the Pod changed or was
 * taken: 422, 404, 409) tries the next standby. The write goes through `podWrites`, keyed by
 * {@link objectKey}, so that its watch echo is recognised. Returns the claimed standby, or
 * undefined when the pool has none ready (the box then starts cold).
 *
 * When the index has none, one read of the pool's Pods confirms it before the box starts cold: a
 * box created the instant a standby turned ready (its creator saw the readiness, as a client
 * waiting for the pool does) often reaches the module before the standby's own watch event. The
 * read is from the API server's watch cache, which already holds every event any watcher has
 * seen; a consistent read could wait for the cache to catch up with etcd.
 */
export async function claimStandby(
  client: ApiClient,
  box: PodBox,
  index: StandbyIndex,
  templateHash: string | undefined,
  podWrites: WriteEchoes,
  attempts = 5,
): Promise<Standby | undefined> {
  const namespace = box.metadata!.namespace!;
  const pool = box.spec!.warmPoolRef!;
  let confirmed = false;
  for (let i = 0; i < attempts; i++) {
    let s = index.take(namespace, pool, templateHash);
    if (!s && !confirmed) {
      confirmed = true;
      index.refresh(namespace, pool, await poolPods(client, namespace, pool));
      s = index.take(namespace, pool, templateHash);
      claimIndexMisses.inc({ found: s ? "standby" : "none" });
    }
    if (!s) return undefined;
    try {
      await podWrites.during(objectKey(namespace, s.name), async () => {
        type Written = { metadata?: { resourceVersion?: string } };
        const pod = await client.jsonPatch<Written>(
          paths.pods(namespace, s.name),
          claimPatch(box, s),
        );
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

/**
 * True when the box controls a Pod although it has no status yet: a claim whose Pod patch landed
 * and whose status write did not. The claimed standby still carries its pool's labels until the
 * claim's finish relabels it; once relabelled (a full reconcile of the box may have done that
 * meanwhile), it carries the box's. The pool is read once, and its watch keeps the index from
 * then on: a burst of claims just after a start would otherwise read every Pod of the pool once
 * per box.
 */
export async function claimedBefore(client: ApiClient, box: PodBox, index: StandbyIndex) {
  const { namespace, name, uid } = box.metadata!;
  const labelled = await client.list<V1Pod>(paths.pods(namespace!), `${LABEL_BOX}=${name}`, {
    fromCache: true,
  });
  if (labelled.some(p => isControlledBy(p.metadata, uid!))) return true;
  const pool = box.spec!.warmPoolRef!;
  if (!index.wasRead(namespace!, pool)) {
    index.refresh(namespace!, pool, await poolPods(client, namespace!, pool));
  }
  return index.holdsClaimed(uid!);
}

/** The Pods labelled as the pool's, from the API server's watch cache. */
const poolPods = (client: ApiClient, namespace: string, pool: string) =>
  client.list<V1Pod>(paths.pods(namespace), `${LABEL_POOL}=${pool}`, { fromCache: true });

/** Hands the standby's PVCs to the box (owner and labels), after the claim. */
export async function handOverVolumes(client: ApiClient, box: PodBox, s: Standby): Promise<void> {
  const owner = boxOwnerRef(box.metadata!.name!, box.metadata!.uid!);
  await Promise.all(
    [s.rootfsPVCName, s.workspacePVCName].map(name =>
      takeOverPVC(client, box.metadata!.namespace!, name, owner, box.metadata!.name!),
    ),
  );
}
