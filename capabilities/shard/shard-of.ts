import { LABEL_SHARD } from "../manifests/labels";

/**
 * The shard a namespace belongs to: FNV-1a of its name, modulo the count. Every object of a
 * namespace is in one shard, so a claim and the pool it claims from are always served by the same
 * replica, and the admission webhook and every replica compute it alike without a lookup.
 */
export function shardOf(namespace: string, count: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < namespace.length; i++) {
    h ^= namespace.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h % count;
}

/** A shard's name, the value of {@link LABEL_SHARD} and the suffix of its Lease. */
export const shardName = (index: number, count: number) => `${index}-of-${count}`;

/** The shard name of a namespace's objects. */
export const namespaceShard = (namespace: string, count: number) =>
  shardName(shardOf(namespace, count), count);

/**
 * A label selector of the objects outside every shard of this count: never stamped, or stamped
 * for another count. A selector key without a value is passed through as written.
 */
export function outsideShards(count: number): string {
  const names = Array.from({ length: count }, (_, i) => shardName(i, count));
  return `${LABEL_SHARD} notin (${names.join(",")})`;
}

/** The labels of an object with its namespace's shard label set (a copy; the rest kept). */
export function withShardLabel(
  labels: Record<string, string> | undefined,
  namespace: string,
  count: number,
): Record<string, string> {
  return { ...labels, [LABEL_SHARD]: namespaceShard(namespace, count) };
}
