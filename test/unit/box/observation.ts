import { podBoxSpecSchema, type PodBoxStatus } from "../../../capabilities/api/podbox";
import type {
  BoxObservation,
  ObservedPod,
  ObservedPVC,
  ObservedSnapshot,
} from "../../../capabilities/box/types";
import { template } from "../fixtures";

/** What box decisions are tested with: an observation, its PVCs and its Pod. */
export const NOW = "2026-11-30T10:00:00Z";
export const EARLIER = "2026-11-30T09:00:00Z";

export function obs(over: {
  spec?: Record<string, unknown>;
  status?: PodBoxStatus;
  deleting?: boolean;
  activity?: string;
  template?: BoxObservation["template"] | null;
  pods?: ObservedPod[];
  pvcs?: ObservedPVC[];
  snapshots?: ObservedSnapshot[];
  parent?: BoxObservation["parent"];
  conflict?: BoxObservation["conflict"];
  tenantDefault?: BoxObservation["tenantDefault"];
  egressAgent?: boolean;
}): BoxObservation {
  return {
    box: {
      name: "box",
      namespace: "ns",
      uid: "uid-1",
      generation: 4,
      spec: podBoxSpecSchema.parse({ templateRef: "python", ...over.spec }),
      status: over.status ?? {},
      deleting: over.deleting ?? false,
      lastActivityAnnotation: over.activity,
    },
    template: over.template === null ? undefined : (over.template ?? template()),
    pods: over.pods ?? [],
    pvcs: over.pvcs ?? [],
    ...(over.snapshots ? { snapshots: over.snapshots } : {}),
    parent: over.parent,
    conflict: over.conflict,
    ...(over.tenantDefault ? { tenantDefault: over.tenantDefault } : {}),
    ...(over.egressAgent ? { egressAgent: true } : {}),
    now: NOW,
  };
}

export const pvc = (name: string, extra: Partial<ObservedPVC> = {}): ObservedPVC => {
  const rootfs = name.includes("-rootfs-g");
  return {
    name,
    role: rootfs ? "rootfs" : "workspace",
    generation: rootfs ? Number(name.split("-g").pop()) : undefined,
    deleting: false,
    owner: "this",
    retained: false,
    copied: false,
    ...extra,
  };
};
export const VOLUMES = [pvc("box-workspace"), pvc("box-rootfs-g1")];
export const pod = (extra: Partial<ObservedPod> = {}): ObservedPod => ({
  name: "box",
  uid: "pod-uid-1",
  phase: "Running",
  podIP: "127.64.0.7",
  ready: true,
  deleting: false,
  rootfsClaim: "box-rootfs-g1",
  workspaceClaim: "box-workspace",
  restarts: 0,
  ...extra,
});

/** A VolumeSnapshot of the box's (`box-rootfs-snapshot`, `box-workspace-snapshot`), cut. */
export const snap = (
  role: "rootfs" | "workspace",
  extra: Partial<ObservedSnapshot> = {},
): ObservedSnapshot => ({
  name: `box-${role}-snapshot`,
  role,
  owner: "this",
  ready: true,
  deleting: false,
  ...extra,
});
