import type { V1PersistentVolumeClaim, V1Pod } from "@kubernetes/client-node";
import type { ApiClient } from "../client/api-client";
import { paths } from "../client/paths";
import {
  ANNOTATION_COPIED,
  LABEL_BOX,
  LABEL_POOL,
  LABEL_RETAINED,
  LABEL_SEED_FILLED,
} from "../manifests/labels";
import { podOwnerRef } from "../manifests/owner";
import type { VolumeSnapshot } from "../manifests/snapshots";
import type { Owner } from "../manifests/types";
import {
  describeError,
  isNamespaceTerminating,
  isRetryable,
  NamespaceTerminatingError,
  PermanentError,
  RefusedError,
  statusOf,
} from "./api-errors";
import type { Failpoints } from "./failpoint";
import { ANNOTATION_EGRESS } from "../network/egress-agent";

/** One change to a Pod or PVC that a box or pool decision asks for. */
export type ObjectAction =
  | { type: "createPVC"; pvc: V1PersistentVolumeClaim }
  | { type: "createPod"; pod: V1Pod }
  /**
   * With a resourceVersion, the delete holds only while the Pod is as observed: a pool removing a
   * standby must not delete one a box claimed meanwhile.
   */
  | { type: "deletePod"; name: string; resourceVersion?: string }
  | { type: "deletePVC"; name: string }
  /** Make the box the PVC's owner (re-attached volumes, a claimed standby's). */
  | { type: "adoptPVC"; name: string; owner: Owner }
  /** Drop the box from the PVC's owners, so that garbage collection keeps it. */
  | { type: "orphanPVC"; name: string }
  /** Record on a fork's PVC that its copy is complete. */
  | { type: "markCopied"; name: string }
  /**
   * Add a pool standby's Pod to its PVC's owners, if the PVC still has exactly `owners`: a
   * claimed standby's PVCs then outlive their pool until the box takes them over. The Pod's uid
   * is the observed one, or the one its create in the same reconcile returned.
   */
  | { type: "addPodOwner"; name: string; owners: Owner[]; pod: string; podUid?: string }
  /** Give the box's label to its Pod, a claimed standby that still has its pool's. */
  | { type: "labelClaimedPod"; name: string }
  /** Write the box's egress rules on its Pod for the node's agent (null: it has none). */
  | { type: "setPodEgress"; name: string; value: string | null }
  /** Record on a template's seed PVC that its fill Pod succeeded: boxes may clone it now. */
  | { type: "markSeedFilled"; name: string }
  /** Give the namespace a copy of a tenant default template (manifests/tenant-default.ts). */
  | { type: "createTemplate"; template: { metadata: { name: string } } }
  /** Take a volume of a paused fork's parent as a VolumeSnapshot (manifests/snapshots.ts). */
  | { type: "createVolumeSnapshot"; snapshot: VolumeSnapshot }
  | { type: "deleteVolumeSnapshot"; name: string };

/** Creates: one that finds its object there (409) found its work done. */
const CREATES: ObjectAction["type"][] = [
  "createPVC",
  "createPod",
  "createTemplate",
  "createVolumeSnapshot",
];

/** An action as one line, `<type> <object name>`, for logs and tests. */
export function describeAction(a: ObjectAction): string {
  switch (a.type) {
    case "createPVC":
      return `createPVC ${a.pvc.metadata?.name}`;
    case "createPod":
      return `createPod ${a.pod.metadata?.name}`;
    case "createTemplate":
      return `createTemplate ${a.template.metadata.name}`;
    case "createVolumeSnapshot":
      return `createVolumeSnapshot ${a.snapshot.metadata.name}`;
    default:
      return `${a.type} ${a.name}`;
  }
}

/** What applying actions needs: the client, and the failpoints of restart-safety tests. */
export type ActionContext = { client: ApiClient; failpoints: Failpoints };

/**
 * Applies one action of the box or pool `ownerName`. Creating what exists (409) and deleting what
 * is gone (404) count as done, so an action replayed after a restart is harmless; such an action
 * resolves to false (it found its work done: whoever decided on it read an outdated state), the
 * others to true. A create refused because the namespace is being deleted throws
 * {@link NamespaceTerminatingError}, any other refusal (403) a {@link RefusedError}: both can
 * end without a change of ours. Other errors a retry cannot fix become {@link PermanentError}s;
 * the rest are thrown as they are, for the queue to retry.
 * `createdPods` (name to uid) collects the Pods created, for a later `addPodOwner` of the same
 * plan.
 */
export async function applyAction(
  ctx: ActionContext,
  namespace: string,
  ownerName: string,
  a: ObjectAction,
  createdPods = new Map<string, string>(),
): Promise<boolean> {
  try {
    if (!(await apply(ctx.client, namespace, ownerName, a, createdPods))) return false;
  } catch (e) {
    const s = statusOf(e);
    if (CREATES.includes(a.type) && s === 409) return false;
    // The PVC's owners are no longer as observed (a box took it over): nothing to add.
    if (a.type === "addPodOwner" && (s === 422 || s === 404)) return false;
    if (s === 404 && !CREATES.includes(a.type)) return false;
    // A cluster without the external-snapshotter's CRDs serves no VolumeSnapshots at all.
    if (s === 404 && a.type === "createVolumeSnapshot") {
      throw new PermanentError(
        "this cluster serves no snapshot.storage.k8s.io/v1 VolumeSnapshots, which the " +
          "template's volumeSnapshotClassName asks for",
      );
    }
    if (isNamespaceTerminating(e)) throw new NamespaceTerminatingError(describeError(e));
    if (s === 403) throw new RefusedError(`${a.type} failed: ${describeError(e)}`);
    if (!isRetryable(e)) throw new PermanentError(`${a.type} failed: ${describeError(e)}`);
    throw e;
  }
  await ctx.failpoints.after(a.type);
  return true;
}

/** Applies one action; false when it had nothing to act on (a Pod owner with no uid known). */
async function apply(
  client: ApiClient,
  namespace: string,
  ownerName: string,
  a: ObjectAction,
  createdPods: Map<string, string>,
): Promise<boolean> {
  switch (a.type) {
    case "createPVC":
      await client.create(paths.pvcs(namespace), a.pvc);
      return true;
    case "createPod": {
      const pod = await client.create(paths.pods(namespace), a.pod);
      createdPods.set(a.pod.metadata!.name!, pod.metadata!.uid!);
      return true;
    }
    case "addPodOwner": {
      const uid = a.podUid ?? createdPods.get(a.pod);
      if (!uid) return false;
      await client.jsonPatch(paths.pvcs(namespace, a.name), [
        { op: "test", path: "/metadata/ownerReferences", value: a.owners },
        {
          op: "add",
          path: "/metadata/ownerReferences",
          value: [...a.owners, podOwnerRef(a.pod, uid)],
        },
      ]);
      return true;
    }
    case "deletePod":
      await client.delete(paths.pods(namespace, a.name), a.resourceVersion);
      return true;
    case "deletePVC":
      await client.delete(paths.pvcs(namespace, a.name));
      return true;
    case "adoptPVC":
      await takeOverPVC(client, namespace, a.name, a.owner, ownerName);
      return true;
    case "labelClaimedPod":
      await labelClaimedPod(client, namespace, a.name, ownerName);
      return true;
    case "setPodEgress":
      await client.mergePatch(paths.pods(namespace, a.name), {
        metadata: { annotations: { [ANNOTATION_EGRESS]: a.value } },
      });
      return true;
    case "markCopied":
      await client.mergePatch(paths.pvcs(namespace, a.name), {
        metadata: { annotations: { [ANNOTATION_COPIED]: "true" } },
      });
      return true;
    case "createTemplate":
      await client.create(paths.podTemplates(namespace), a.template);
      return true;
    case "markSeedFilled":
      await client.mergePatch(paths.pvcs(namespace, a.name), {
        metadata: { labels: { [LABEL_SEED_FILLED]: "true" } },
      });
      return true;
    case "createVolumeSnapshot":
      await client.create(paths.volumeSnapshots(namespace), a.snapshot);
      return true;
    case "deleteVolumeSnapshot":
      await client.delete(paths.volumeSnapshots(namespace, a.name));
      return true;
    case "orphanPVC":
      await client.mergePatch(paths.pvcs(namespace, a.name), {
        metadata: { labels: { [LABEL_RETAINED]: ownerName }, ownerReferences: null },
      });
      return true;
  }
}

/**
 * Makes a box the owner of a PVC (re-attached volumes, a claimed standby's): its ownerReference,
 * its box label, no pool label. A merge patch, so that it holds whatever the PVC had before and
 * a replay is harmless.
 */
export function takeOverPVC(
  client: ApiClient,
  namespace: string,
  name: string,
  owner: Owner,
  boxName: string,
) {
  return client.mergePatch(paths.pvcs(namespace, name), {
    metadata: {
      labels: { [LABEL_BOX]: boxName, [LABEL_POOL]: null, [LABEL_RETAINED]: null },
      ownerReferences: [owner],
    },
  });
}

/**
 * Gives a claimed standby's Pod its box's label in place of its pool's. A merge patch: only the
 * operator sets an ownerReference to a PodBox, and a Pod never goes back to a pool, so it holds
 * whenever it lands. Resolves to the resourceVersion it left.
 */
export async function labelClaimedPod(
  client: ApiClient,
  namespace: string,
  name: string,
  boxName: string,
): Promise<string | undefined> {
  type Written = { metadata?: { resourceVersion?: string } };
  const pod = await client.mergePatch<Written>(paths.pods(namespace, name), {
    metadata: { labels: { [LABEL_BOX]: boxName, [LABEL_POOL]: null } },
  });
  return pod?.metadata?.resourceVersion;
}
