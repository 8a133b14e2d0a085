import type { PodBoxReason, PodBoxSpec, PodBoxStatus } from "../api/podbox";
import type { ObjectAction } from "../kit/object-actions";
import type { TemplateRef } from "../manifests/types";

/** A sandbox Pod as the decisions need it. */
export type ObservedPod = {
  name: string;
  uid?: string;
  phase?: string;
  podIP?: string;
  ready: boolean;
  deleting: boolean;
  rootfsClaim?: string;
  workspaceClaim?: string;
  /** Its volume-key label: a claimed standby's Pod names the standby's volumes. */
  volumeKey?: string;
  /** `copy`: the Pod that copies a fork's volumes (`forkStrategy: Copy`), not the sandbox. */
  role?: "copy";
  /** Restarts of its containers, and why the last one ended when it failed. */
  restarts: number;
  failure?: string;
  /** The podd injector image its podd came from, when it runs podd from its rootfs volume. */
  poddImage?: string;
  /** Built for a volume that holds podd already: it has no init container to fill it. */
  rootfsPodd?: boolean;
  /** A claimed standby's Pod that still carries its pool's labels, not the box's. */
  unlabelled?: boolean;
  /** Its egress rules and its node's answer (network/egress-agent.ts). */
  egress?: string;
  egressApplied?: string;
};

/** A PVC of the box's volume key. */
export type ObservedPVC = {
  name: string;
  role: "rootfs" | "workspace";
  generation?: number;
  deleting: boolean;
  /** Its volume-key label. */
  volumeKey?: string;
  /** Kept by the operator when its box went (`volumeReclaimPolicy: Retain`): re-attachable. */
  retained: boolean;
  /** Whose controller ownerReference it carries: this box, a warm pool, another object, none. */
  owner: "this" | "pool" | "other" | "none";
  /** A fork's volume to be copied (`forkStrategy: Copy`): the parent PVC it copies. */
  copyFrom?: string;
  /** The copy is complete. */
  copied: boolean;
  /** A rootfs cloned from its template's seed: the hash of the podd injector image it holds. */
  rootfsPodd?: string;
};

/**
 * An object the box must create whose name is taken by an object that is not the box's (no box
 * label, another controller): found when the create was refused with 409 although a consistent
 * read of the box's objects did not show it.
 */
export type NameConflict = { kind: "Pod" | "PersistentVolumeClaim"; name: string };

/** A VolumeSnapshot of the names a paused fork holds its volumes as. */
export type ObservedSnapshot = {
  name: string;
  role: "rootfs" | "workspace";
  /** Whose controller ownerReference it carries. */
  owner: "this" | "other" | "none";
  /** Cut and usable as a restore's source. */
  ready: boolean;
  /** The driver's error, while the snapshot controller retries it. */
  error?: string;
  deleting: boolean;
  /** The podd its rootfs holds (its annotation). */
  poddImage?: string;
};

/** The box named by `spec.forkFrom`, reduced to what a fork needs. */
export type ObservedParent =
  | { state: "missing" }
  | { state: "deleting" }
  | { state: "notReady" }
  | {
      state: "ready";
      rootfsPVCName: string;
      workspacePVCName: string;
      /** The podd its rootfs volume holds (its status), which a copy or clone holds too. */
      rootfsPoddImage?: string;
    }
  /** A paused fork that holds its volumes as VolumeSnapshots: its forks restore them. */
  | {
      state: "snapshots";
      rootfsSnapshotName: string;
      workspaceSnapshotName: string;
      rootfsPoddImage?: string;
    };

/** Everything one reconcile of a PodBox looks at, read from the API server. */
export type BoxObservation = {
  box: {
    name: string;
    namespace: string;
    uid: string;
    generation: number;
    spec: PodBoxSpec;
    status: PodBoxStatus;
    deleting: boolean;
    /** The last-activity annotation (see reaper/activity.ts). */
    lastActivityAnnotation?: string;
  };
  /** undefined: the PodTemplate does not exist. */
  template?: TemplateRef;
  /** The name of the template looked for (its own, or its pool's), when one is known. */
  templateName?: string;
  /**
   * The tenant default of that name (docs/gateway.md, "Tenant defaults"), when the box's own
   * template is missing from its namespace: the box makes its namespace a copy of it.
   */
  tenantDefault?: { namespace: string; name: string; spec: unknown };
  pods: ObservedPod[];
  pvcs: ObservedPVC[];
  /**
   * The VolumeSnapshots of the box's snapshot names, read when it can hold its volumes as such
   * (a fork whose template names a VolumeSnapshotClass, or one that holds them).
   */
  snapshots?: ObservedSnapshot[];
  /** Present when spec.forkFrom is set. */
  parent?: ObservedParent;
  /** A name the box needs that another object holds (see {@link NameConflict}). */
  conflict?: NameConflict;
  /** The time of the observation (RFC 3339, whole seconds), for conditions. */
  now: string;
  /**
   * The same moment in epoch ms (else `now`'s): the reaper's rules decide by it, since the
   * reaper hands a box over the moment its deadline passes, within the second `now` rounds off.
   */
  nowMs?: number;
  /** The cluster runs the node egress agent: only then can a box have egress rules. */
  egressAgent?: boolean;
};

/** An object a waiting box waits for: a watch event of it wakes the box. */
export type AwaitedObject = {
  kind: "PodTemplate" | "PodWarmPool" | "PodBox" | "PersistentVolumeClaim";
  name: string;
};

/** A Kubernetes Event about the box. */
export type BoxEvent = { type: "Normal" | "Warning"; reason: PodBoxReason; message: string };

/** What one reconcile decides. */
export type BoxPlan = {
  actions: ObjectAction[];
  /** The status the box should have; written only when it differs from the observed one. */
  status: PodBoxStatus;
  events: BoxEvent[];
  /**
   * What the box waits for (it does not exist yet, or is not ready, or is still going): the box
   * is reconciled again on a watch event of one of them, and costs no request meanwhile.
   */
  waitingFor?: AwaitedObject[];
  /** Deletion only: everything is cleaned up, the finalizer may go. */
  cleanupDone?: boolean;
  /**
   * Reconcile again after this long: the box waits for what it does not watch (VolumeSnapshots,
   * whose CRD a cluster may not serve: a watch of it would fail the module).
   */
  recheckAfterMs?: number;
};
