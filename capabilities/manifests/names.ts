/**
 * Deterministic object names. A box's volumes are named after its volume key (the box name unless
 * `spec.volumeKey` re-attaches another's), and the rootfs name carries the generation so that a
 * reset creates a new PVC beside the old one instead of reusing it.
 */
export function rootfsPVCName(volumeKey: string, generation: number): string {
  return `${volumeKey}-rootfs-g${generation}`;
}

/** The workspace PVC of a volume key; it survives rootfs resets. */
export function workspacePVCName(volumeKey: string): string {
  return `${volumeKey}-workspace`;
}

/** The VolumeSnapshot a paused fork holds its rootfs volume as (a fork has no volume key). */
export function rootfsSnapshotName(boxName: string): string {
  return `${boxName}-rootfs-snapshot`;
}

/** The VolumeSnapshot a paused fork holds its workspace volume as. */
export function workspaceSnapshotName(boxName: string): string {
  return `${boxName}-workspace-snapshot`;
}
