import type { PodBox } from "../api/kinds";
import type { PodBoxStatus } from "../api/podbox";
import { LABEL_BOX, LABEL_POOL } from "../manifests/labels";
import { DEFAULT_ENVD_PORT } from "../api/common";
import { controllerRef } from "../manifests/owner";
import { takeOverPVC } from "./box-apply";
import { statusOf } from "./errors";
import { jsonPatch } from "./fast-client";
import type { Standby, StandbyIndex } from "./standby-index";

const escape = (label: string) => label.replace("~", "~0").replace("/", "~1");

/** True for a box that may claim a standby: new, meant to run, nothing of its own to keep. */
export function mayClaim(box: PodBox): boolean {
  const spec = box.spec;
  return Boolean(
    spec?.warmPoolRef &&
      !spec.forkFrom &&
      !spec.volumeKey &&
      (spec.desiredState ?? "Running") === "Running" &&
      (spec.rootfsGeneration ?? 1) === 1 &&
      !box.status?.phase &&
      !box.metadata?.deletionTimestamp,
  );
}

/**
 * Claims a ready standby of the box's pool: one conditional write on the standby's Pod (a JSON
 * patch whose `test` of the resourceVersion the API server checks atomically) moves it from the
 * pool to the box. A lost race (the Pod changed or was taken) tries the next standby. Returns the
 * claimed standby, or undefined when the pool has none ready (the box then starts cold).
 */
export async function claimStandby(
  box: PodBox,
  index: StandbyIndex,
  templateHash: string | undefined,
  attempts = 5,
): Promise<Standby | undefined> {
  const namespace = box.metadata!.namespace!;
  for (let i = 0; i < attempts; i++) {
    const s = index.take(namespace, box.spec!.warmPoolRef!, templateHash);
    if (!s) return undefined;
    try {
      await jsonPatch(`/api/v1/namespaces/${namespace}/pods/${s.name}`, [
        { op: "test", path: "/metadata/resourceVersion", value: s.resourceVersion },
        { op: "remove", path: `/metadata/labels/${escape(LABEL_POOL)}` },
        { op: "add", path: `/metadata/labels/${escape(LABEL_BOX)}`, value: box.metadata!.name },
        {
          op: "replace",
          path: "/metadata/ownerReferences",
          value: [controllerRef("PodBox", box.metadata!.name!, box.metadata!.uid!)],
        },
      ]);
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

/** The status of a box that has just claimed a standby: Running at once, on the standby's IP. */
export function claimedStatus(
  box: PodBox,
  s: Standby,
  envdPort: number,
  now: string,
): PodBoxStatus {
  const message = `claimed warm standby ${s.name} of PodWarmPool ${s.pool}`;
  return {
    phase: "Running",
    podName: s.name,
    podIP: s.podIP,
    poddURL: `http://${s.podIP}:${envdPort || DEFAULT_ENVD_PORT}`,
    rootfsPVCName: s.rootfsPVCName,
    workspacePVCName: s.workspacePVCName,
    rootfsGeneration: 1,
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
    ],
  };
}

/** Hands the standby's PVCs to the box (owner and labels), after the claim. */
export async function handOverVolumes(box: PodBox, s: Standby): Promise<void> {
  const owner = controllerRef("PodBox", box.metadata!.name!, box.metadata!.uid!);
  await Promise.all(
    [s.rootfsPVCName, s.workspacePVCName].map(name =>
      takeOverPVC(box.metadata!.namespace!, name, owner, box.metadata!.name!),
    ),
  );
}
