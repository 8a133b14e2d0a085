import type { KubernetesObject } from "kubernetes-fluent-client";
import { LABEL_SHARD } from "../manifests/labels";
import { namespaceShard } from "../shard/shard-of";

/** What this reads and does of Pepr's mutate request. */
export type MutateRequest = {
  Raw: KubernetesObject;
  Request: { namespace?: string };
  SetLabel(key: string, value: string): unknown;
};

/**
 * Stamps a CubePod object with its namespace's shard label when the watchers are sharded, so that
 * only the replica holding that shard is sent it; a label someone removed or changed is set back.
 * With one watcher there is nothing to stamp (and the webhook is not called: webhook-policy.ts).
 */
export function stampShard(req: MutateRequest, shards: number): void {
  if (shards <= 1) return;
  const namespace = req.Raw.metadata?.namespace || req.Request.namespace;
  if (!namespace) return;
  const shard = namespaceShard(namespace, shards);
  if (req.Raw.metadata?.labels?.[LABEL_SHARD] !== shard) req.SetLabel(LABEL_SHARD, shard);
}
