import type { ApiClient } from "../client/api-client";

/**
 * Writes an object's status when it differs from the stored one (`before`). A merge patch keeps
 * fields it does not mention, so fields that must go (the Pod IP of a paused box) are sent as
 * null. Returns the new resourceVersion, or undefined when nothing was written.
 */
export async function writeStatusAt(
  client: ApiClient,
  path: string,
  before: object,
  status: object,
): Promise<string | undefined> {
  if (sameJSON(before, status)) return undefined;
  const updated = await client.mergePatchStatus<{ metadata?: { resourceVersion?: string } }>(
    path,
    statusPatch(before, status),
  );
  return updated.metadata?.resourceVersion;
}

/** The merge patch that turns status `before` into `status`: the fields gone are sent as null. */
export function statusPatch(before: object, status: object): Record<string, unknown> {
  const patch: Record<string, unknown> = { ...status };
  for (const k of Object.keys(before)) if (!(k in status)) patch[k] = null;
  return patch;
}

/** Deep equality of two JSON values, ignoring key order. */
export function sameJSON(a: unknown, b: unknown): boolean {
  return JSON.stringify(sortKeys(a)) === JSON.stringify(sortKeys(b));
}

function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === "object") {
    return Object.fromEntries(
      Object.keys(v as object)
        .sort()
        .map(k => [k, sortKeys((v as Record<string, unknown>)[k])]),
    );
  }
  return v;
}
