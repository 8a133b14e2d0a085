import { DEFAULT_ENVD_PORT } from "../api/common";
import type { PodBox } from "../api/kinds";
import type { PodBoxStatus } from "../api/podbox";
import { FINALIZER } from "../manifests/labels";
import { boxOwnerRef } from "../manifests/owner";
import type { Standby } from "./standby-index";
import { egressAnnotation, egressCondition, egressRulesOf } from "../network/egress-agent";

/*
 * The pure half of a warm claim (which box may claim, the write that claims, the status it gets);
 * apply.ts applies it.
 */

/**
 * The claim itself: a JSON patch of the standby's Pod whose `test` of the resourceVersion the
 * API server checks atomically, moving the Pod from the pool to the box by its controller
 * ownerReference alone. Its labels change later, in the claim's finish
 * (`labelClaimedPod`): a NetworkPolicy implementation recomputes the node's rules on
 * every Pod label change, and on two CPUs that work would land inside the claim.
 */
export function claimPatch(box: PodBox, s: Standby): object[] {
  return [
    { op: "test", path: "/metadata/resourceVersion", value: s.resourceVersion },
    {
      op: "replace",
      path: "/metadata/ownerReferences",
      value: [boxOwnerRef(box.metadata!.name!, box.metadata!.uid!)],
    },
  ];
}

/**
 * True for a box that may claim a standby: new, meant to run, nothing of its own to keep. A box
 * with the cleanup finalizer but no status has begun a cold start (the reconciler adds it before
 * creating anything; a claim adds it only after the box status), so it must not claim any more.
 * Nor does a box with `egress: None`: a standby runs with its template's egress, and a Pod's new
 * label takes the NetworkPolicy implementation a moment to apply, in which the box's code could
 * already reach the network; its own Pod carries the label from the start.
 */
export function mayClaim(box: PodBox): boolean {
  const spec = box.spec;
  return Boolean(
    spec?.warmPoolRef &&
      !spec.forkFrom &&
      !spec.volumeKey &&
      spec.egress !== "None" &&
      (spec.desiredState ?? "Running") === "Running" &&
      (spec.rootfsGeneration ?? 1) === 1 &&
      !box.status?.phase &&
      !box.metadata?.deletionTimestamp &&
      !(box.metadata?.finalizers ?? []).includes(FINALIZER),
  );
}

/**
 * What a claim needs of its pool's template: its name, envd port, and the egress annotation its
 * rules give a Pod (its standbys carry it).
 */
export type PoolTemplate = { name: string; envdPort: number; egress?: string };

/**
 * The egress annotation a box claiming from a pool of this template wants on its Pod: its own
 * rules', else the template's; undefined for none.
 */
export function claimedEgress(box: PodBox, template: PoolTemplate | undefined): string | undefined {
  const own = box.spec?.network;
  if (own?.allowOut !== undefined || own?.denyOut !== undefined) {
    const rules = egressRulesOf(box.spec, undefined);
    return rules ? egressAnnotation(rules) : undefined;
  }
  return template?.egress;
}

/**
 * The status of a box that has just claimed a standby: Running at once, on the standby's IP.
 * `template` is the pool's, as its last reconcile saw it (unknown before that).
 */
export function claimedStatus(
  box: PodBox,
  s: Standby,
  template: PoolTemplate | undefined,
  now: string,
): PodBoxStatus {
  const message = `claimed warm standby ${s.name} of PodWarmPool ${s.pool}`;
  return {
    phase: "Running",
    podName: s.name,
    podIP: s.podIP,
    podUID: s.uid,
    poddURL: `http://${s.podIP}:${template?.envdPort || DEFAULT_ENVD_PORT}`,
    rootfsPVCName: s.rootfsPVCName,
    workspacePVCName: s.workspacePVCName,
    rootfsGeneration: 1,
    ...(s.poddImage ? { rootfsPoddImage: s.poddImage } : {}),
    ...(template ? { templateName: template.name } : {}),
    reason: "WarmPoolClaimed",
    message,
    lastActivityAt: now,
    observedGeneration: box.metadata?.generation,
    conditions: [
      {
        type: "Ready",
        status: "True",
        observedGeneration: box.metadata?.generation,
        lastTransitionTime: now,
        reason: "WarmPoolClaimed",
        message,
      },
      // True at once when the standby's node enforces the box's rules already (its template's,
      // which the standby carries); else False until the full reconcile that follows the claim
      // writes them on the Pod and the agent answers.
      ...egressCondition(
        claimedEgress(box, template),
        s,
        undefined,
        box.metadata?.generation ?? 0,
        now,
      ),
    ],
  };
}
