import { createHash } from "node:crypto";
import type { PodTemplateSpec } from "../api/podtemplate";

/**
 * A short, stable hash of a template's spec (keys sorted, defaults applied). Standbys carry it as
 * a label; a standby whose hash differs from its template's is stale and gets replaced. The
 * network settings are left out: they are NetworkPolicies, and change no Pod; so is whether a seed
 * fills new volumes, which changes how a standby starts, not what it runs; and how paused forks
 * take their volumes, which no standby does.
 */
export function templateHash(spec: PodTemplateSpec): string {
  const pods = {
    ...spec,
    network: undefined,
    volumeSnapshotClassName: undefined,
    rootfs: { ...spec.rootfs, seed: undefined },
  };
  return stableHash(pods);
}

/** A short hash of a value's JSON with its keys sorted (undefined ones left out). */
export function stableHash(v: unknown): string {
  return createHash("sha256").update(stableJSON(v)).digest("hex").slice(0, 10);
}

/** A short hash of a podd injector image reference, as a label value holds it. */
export function poddImageHash(image: string): string {
  return createHash("sha256").update(image).digest("hex").slice(0, 10);
}

function stableJSON(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(stableJSON).join(",")}]`;
  if (v && typeof v === "object") {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o)
      .filter(k => o[k] !== undefined)
      .sort()
      .map(k => `${JSON.stringify(k)}:${stableJSON(o[k])}`)
      .join(",")}}`;
  }
  return JSON.stringify(v);
}
