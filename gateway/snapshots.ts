import type { PodBox } from "../capabilities/api/kinds";
import { GROUP } from "../capabilities/api/common";
import { ApiError, startedAt } from "./e2b";

/**
 * E2B's snapshots, as CubePod keeps them: a snapshot is a paused PodBox forked from its source
 * (both volumes, as the template's fork strategy copies or clones them), labelled so that it is
 * no sandbox of the tenant's. A sandbox created from it forks it in turn. Files only: processes
 * and memory are not kept, as with a pause.
 */
export const LABEL_SNAPSHOT = `${GROUP}/snapshot`;
/** The sandbox the snapshot was taken of. */
export const ANNOTATION_SNAPSHOT_OF = `${GROUP}/snapshot-of`;
/** Its E2B name, `<namespace>/<alias>:<tag>`, when it was given one (E2B allows `_`, which no object name does). */
export const ANNOTATION_SNAPSHOT_NAME = `${GROUP}/snapshot-name`;

export const isSnapshot = (box: PodBox) => box.metadata?.labels?.[LABEL_SNAPSHOT] === "true";

/** A snapshot's name as E2B writes it: `[namespace/]alias[:tag]`, lowercased. */
export type SnapshotName = { namespace: string; alias: string; tag: string };

/**
 * Parses a name given to a create or a list filter; a namespace, if named, must be the tenant's
 * own (E2B's team). Throws a 400 naming what is wrong.
 */
export function parseSnapshotName(raw: string, ns: string): SnapshotName {
  const name = raw.trim().toLowerCase();
  const m = /^(?:([a-z0-9_-]+)\/)?([a-z0-9_-]+)(?::([a-z0-9_.-]+))?$/.exec(name);
  if (!m) {
    throw new ApiError(
      400,
      `snapshot name "${raw}": expected [namespace/]name[:tag] of a-z, 0-9, "-" and "_" (tag also ".")`,
    );
  }
  if (m[1] !== undefined && m[1] !== ns) {
    throw new ApiError(400, `snapshot name "${raw}": namespace "${m[1]}" is not yours ("${ns}")`);
  }
  return { namespace: ns, alias: m[2], tag: m[3] ?? "default" };
}

export const formatName = (n: SnapshotName) => `${n.namespace}/${n.alias}:${n.tag}`;

/** E2B's `snapshotID`: the name when it has one, else the box's name with the default tag. */
export function snapshotIdOf(box: PodBox): string {
  return box.metadata?.annotations?.[ANNOTATION_SNAPSHOT_NAME] ?? `${box.metadata!.name}:default`;
}

/** E2B's `SnapshotInfo`. */
export function snapshotInfo(box: PodBox): { snapshotID: string; names: string[] } {
  const named = box.metadata?.annotations?.[ANNOTATION_SNAPSHOT_NAME];
  return { snapshotID: snapshotIdOf(box), names: named ? [named.replace(/:[^:]*$/, "")] : [] };
}

/**
 * The snapshots of a namespace an ID or name refers to, newest first: `<box>:default` (or the
 * box's bare name) is that one; a name without a tag matches every tag of it.
 */
export function snapshotsNamed(all: PodBox[], ref: string, ns: string): PodBox[] {
  // One being deleted is gone already: a second delete of it finds nothing.
  const mine = all
    .filter(b => isSnapshot(b) && !b.metadata?.deletionTimestamp)
    .sort((a, b) => startedAt(b) - startedAt(a));
  const byBox = /^([a-z0-9]+)(?::default)?$/.exec(ref);
  const unnamed = byBox && mine.filter(b => b.metadata?.name === byBox[1]);
  if (unnamed && unnamed.length > 0) return unnamed;
  let name: SnapshotName;
  try {
    name = parseSnapshotName(ref, ns);
  } catch {
    return [];
  }
  const tagged = /:[^/]*$/.test(ref.trim());
  return mine.filter(b => {
    const own = b.metadata?.annotations?.[ANNOTATION_SNAPSHOT_NAME];
    if (!own) return false;
    return tagged ? own === formatName(name) : own.startsWith(`${name.namespace}/${name.alias}:`);
  });
}
