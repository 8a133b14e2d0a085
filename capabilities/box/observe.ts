import { egressOfPod } from "../network/egress-agent";
import type { kind } from "pepr";
import { podBoxSpecSchema } from "../api/podbox";
import type { CubePodTemplate, PodBox, PodWarmPool } from "../api/kinds";
import type { ApiClient } from "../client/api-client";
import { paths } from "../client/paths";
import { validatePodTemplate } from "../admission/rules";
import {
  ANNOTATION_COPIED,
  ANNOTATION_COPY_FROM,
  ANNOTATION_PODD_IMAGE,
  LABEL_BOX,
  LABEL_POD_ROLE,
  LABEL_POOL,
  LABEL_RETAINED,
  LABEL_ROOTFS_GENERATION,
  LABEL_ROOTFS_PODD,
  LABEL_VOLUME,
  LABEL_VOLUME_KEY,
} from "../manifests/labels";
import { ANNOTATION_LAST_ACTIVITY } from "../reaper/activity";
import type { TemplateRef } from "../manifests/types";
import type {
  BoxObservation,
  NameConflict,
  ObservedParent,
  ObservedPod,
  ObservedPVC,
  ObservedSnapshot,
} from "./types";
import { rootfsSnapshotName, workspaceSnapshotName } from "../manifests/names";
import type { VolumeSnapshot } from "../manifests/snapshots";
import { PermanentError } from "../kit/api-errors";
import { kubeTime } from "../kit/conditions";
import { isPodReady } from "../kit/pod-ready";
import { isControlledBy } from "../manifests/owner";
import { COPY_ROLE } from "../manifests/copy-pod";
import type { SeedIndex } from "../seed/seed-index";

/**
 * Reads everything one reconcile of a box looks at, straight from the API server: the box, its
 * template, its Pods and PVCs (by its box label; by volume key as well when it re-attaches, or
 * when its Pod is a claimed standby whose PVCs are not handed over yet) and, for a fork that has
 * not run yet, its parent. Independent reads go out together. With `fromCache` the lists come
 * from the API server's watch cache (see {@link ApiClient.list}). `conflict` is a name found taken
 * by the previous pass of the same reconcile; it goes into the observation as it is.
 */
export async function observeBox(
  client: ApiClient,
  box: PodBox,
  {
    fromCache = false,
    conflict,
    now = new Date(),
    seeds,
    defaultTemplates,
    egressAgent = false,
  }: {
    fromCache?: boolean;
    conflict?: NameConflict;
    now?: Date;
    seeds?: SeedIndex;
    /** The namespace of the tenant defaults, where a template missing from a box's is looked for. */
    defaultTemplates?: string;
    /** The cluster runs the node egress agent (config `network.egressAgent`). */
    egressAgent?: boolean;
  } = {},
): Promise<BoxObservation> {
  const namespace = box.metadata!.namespace!;
  const name = box.metadata!.name!;
  const uid = box.metadata!.uid!;
  const parsed = podBoxSpecSchema.safeParse(box.spec);
  if (!parsed.success) throw new PermanentError(`stored spec is invalid: ${parsed.error.message}`);
  const spec = parsed.data;
  const status = box.status ?? {};
  const needParent = Boolean(spec.forkFrom) && status.rootfsGeneration === undefined;

  const pvcsWithLabel = (label: string, value: string) =>
    client.list<kind.PersistentVolumeClaim>(paths.pvcs(namespace), `${label}=${value}`, {
      fromCache,
    });
  const [looked, pods, pvcs, kept, parent] = await Promise.all([
    getTemplate(client, namespace, spec.templateRef, spec.warmPoolRef, status.templateName).then(
      async t => {
        if (t.template && seeds) return { ...t, template: seeds.withSeed(namespace, t.template) };
        // Only a box that names its template takes a tenant default: a pool's is the pool's.
        if (t.template || !spec.templateRef || !defaultTemplates || defaultTemplates === namespace)
          return t;
        return {
          ...t,
          tenantDefault: await getDefault(client, defaultTemplates, spec.templateRef),
        };
      },
    ),
    podsOfBox(client, box, { fromCache }),
    pvcsWithLabel(LABEL_BOX, name),
    spec.volumeKey ? pvcsWithLabel(LABEL_VOLUME_KEY, spec.volumeKey) : undefined,
    needParent ? getParent(client, namespace, spec.forkFrom!) : Promise.resolve(undefined),
  ]);
  const all = new Map(pvcs.concat(kept ?? []).map(p => [p.metadata!.name!, p]));
  // Read by name, never watched nor listed: a cluster may not serve the kind at all (a 404 then
  // reads as absent), and only forks of a template with a VolumeSnapshotClass can have them.
  const snapshots =
    status.rootfsSnapshotName ||
    (spec.forkFrom && looked.template?.spec.volumeSnapshotClassName && needParent)
      ? (
          await Promise.all(
            (["rootfs", "workspace"] as const).map(async role => {
              const n = role === "rootfs" ? rootfsSnapshotName(name) : workspaceSnapshotName(name);
              const v = await client.get<VolumeSnapshot>(paths.volumeSnapshots(namespace, n));
              return v ? [observedSnapshot(v, uid, role)] : [];
            }),
          )
        ).flat()
      : undefined;
  // A claimed standby's Pod whose PVCs still carry the pool's labels.
  const podKeys = new Set(pods.map(p => p.metadata?.labels?.[LABEL_VOLUME_KEY]));
  for (const k of podKeys) {
    if (
      !k ||
      k === spec.volumeKey ||
      [...all.values()].some(p => p.metadata?.labels?.[LABEL_VOLUME_KEY] === k)
    )
      continue;
    for (const p of await pvcsWithLabel(LABEL_VOLUME_KEY, k)) all.set(p.metadata!.name!, p);
  }

  return {
    box: {
      name,
      namespace,
      uid,
      generation: box.metadata?.generation ?? 0,
      spec,
      status,
      deleting: Boolean(box.metadata?.deletionTimestamp),
      lastActivityAnnotation: box.metadata?.annotations?.[ANNOTATION_LAST_ACTIVITY],
    },
    template: looked.template,
    ...(looked.name ? { templateName: looked.name } : {}),
    ...("tenantDefault" in looked && looked.tenantDefault
      ? { tenantDefault: looked.tenantDefault }
      : {}),
    pods: pods.map(observedPod),
    pvcs: [...all.values()].flatMap(p => observedPVC(p, uid)),
    ...(snapshots ? { snapshots } : {}),
    parent,
    ...(conflict ? { conflict } : {}),
    now: kubeTime(now),
    nowMs: now.getTime(),
    ...(egressAgent ? { egressAgent } : {}),
  };
}

/**
 * The box's own Pods: those with its label and the box as controller (a Pod carrying its label
 * but another controller is not its Pod). A box that claimed a standby also looks for it when
 * its label finds none: the claim's finish relabels the Pod, and until then (or, after a
 * restart, until the next reconcile) it still carries its pool's labels. The claimed status
 * names the standby, whose volume key is its name: a list of that one Pod rather than of the
 * pool's every Pod, which a burst of claims would read once per box. With no name (a claim
 * whose status was lost to a restart), the pool's Pods.
 */
async function podsOfBox(
  client: ApiClient,
  box: PodBox,
  { fromCache }: { fromCache: boolean },
): Promise<kind.Pod[]> {
  const { namespace, name, uid } = box.metadata!;
  const own = (pods: kind.Pod[]) => pods.filter(p => isControlledBy(p.metadata, uid!));
  const list = (selector: string) =>
    client.list<kind.Pod>(paths.pods(namespace!), selector, { fromCache });
  const labelled = own(await list(`${LABEL_BOX}=${name}`));
  const pool = box.spec?.warmPoolRef;
  if (labelled.length > 0 || !pool) return labelled;
  const claimed = box.status?.podName;
  if (claimed && claimed !== name) return own(await list(`${LABEL_VOLUME_KEY}=${claimed}`));
  return own(await list(`${LABEL_POOL}=${pool}`));
}

/**
 * The box's template: its own, else its pool's, else (the pool gone) the one it was last built
 * from, so that a claimed box outlives its pool; with the name looked for, if one was known.
 */
async function getTemplate(
  client: ApiClient,
  namespace: string,
  templateRef: string | undefined,
  warmPoolRef: string | undefined,
  lastBuiltFrom: string | undefined,
): Promise<{ name?: string; template?: TemplateRef }> {
  let name = templateRef;
  if (!name && warmPoolRef) {
    const pool = await client.get<PodWarmPool>(paths.podWarmPools(namespace, warmPoolRef));
    name = pool?.spec?.templateRef ?? lastBuiltFrom;
  }
  if (!name) return {};
  const tpl = await client.get<CubePodTemplate>(paths.podTemplates(namespace, name));
  if (!tpl) return { name };
  const verdict = validatePodTemplate(tpl.spec);
  if (!verdict.ok)
    throw new PermanentError(`PodTemplate ${name} is invalid: ${verdict.errors.join("; ")}`);
  return { name, template: { name, spec: verdict.spec } };
}

/** The tenant default of that name, if the platform declared one. */
async function getDefault(
  client: ApiClient,
  namespace: string,
  name: string,
): Promise<BoxObservation["tenantDefault"]> {
  const tpl = await client.get<CubePodTemplate>(paths.podTemplates(namespace, name));
  return tpl?.spec ? { namespace, name, spec: tpl.spec } : undefined;
}

async function getParent(
  client: ApiClient,
  namespace: string,
  name: string,
): Promise<ObservedParent> {
  const parent = await client.get<PodBox>(paths.podBoxes(namespace, name));
  if (!parent) return { state: "missing" };
  if (parent.metadata?.deletionTimestamp) return { state: "deleting" };
  const { rootfsPVCName, workspacePVCName, rootfsPoddImage } = parent.status ?? {};
  const { rootfsSnapshotName, workspaceSnapshotName } = parent.status ?? {};
  if ((!rootfsPVCName || !workspacePVCName) && rootfsSnapshotName && workspaceSnapshotName) {
    return {
      state: "snapshots",
      rootfsSnapshotName,
      workspaceSnapshotName,
      ...(rootfsPoddImage ? { rootfsPoddImage } : {}),
    };
  }
  if (!rootfsPVCName || !workspacePVCName) return { state: "notReady" };
  return {
    state: "ready",
    rootfsPVCName,
    workspacePVCName,
    ...(rootfsPoddImage ? { rootfsPoddImage } : {}),
  };
}

/** A sandbox Pod as the decisions see it (pure). */
export function observedPod(p: kind.Pod): ObservedPod {
  const claims = (p.spec?.volumes ?? []).map(v => v.persistentVolumeClaim?.claimName);
  const vol = (n: string) =>
    p.spec?.volumes?.find(v => v.name === n)?.persistentVolumeClaim?.claimName ?? claims[0];
  return {
    name: p.metadata!.name!,
    uid: p.metadata?.uid,
    phase: p.status?.phase,
    podIP: p.status?.podIP,
    ready: isPodReady(p),
    deleting: Boolean(p.metadata?.deletionTimestamp),
    rootfsClaim: vol("rootfs"),
    workspaceClaim: vol("workspace"),
    volumeKey: p.metadata?.labels?.[LABEL_VOLUME_KEY],
    ...(p.metadata?.labels?.[LABEL_POD_ROLE] === COPY_ROLE ? { role: "copy" as const } : {}),
    restarts: [...(p.status?.initContainerStatuses ?? []), ...(p.status?.containerStatuses ?? [])]
      .map(c => c.restartCount ?? 0)
      .reduce((n, r) => n + r, 0),
    ...failureOf(p),
    ...(p.metadata?.annotations?.[ANNOTATION_PODD_IMAGE]
      ? { poddImage: p.metadata.annotations[ANNOTATION_PODD_IMAGE] }
      : {}),
    ...(p.metadata?.labels?.[LABEL_ROOTFS_PODD] !== undefined ? { rootfsPodd: true } : {}),
    ...(p.metadata?.labels?.[LABEL_BOX] === undefined ? { unlabelled: true } : {}),
    ...egressOfPod(p.metadata?.annotations),
  };
}

/**
 * Why the Pod's last container run failed, if one did: its reason, exit code and message. Init
 * containers first: one that fails (the rootfs fill, say) keeps the others from starting.
 */
function failureOf(p: kind.Pod): { failure?: string } {
  const statuses = [
    ...(p.status?.initContainerStatuses ?? []),
    ...(p.status?.containerStatuses ?? []),
  ];
  for (const c of statuses) {
    const t = c.state?.terminated ?? c.lastState?.terminated;
    if (t && t.exitCode !== 0) {
      const message = t.message ? `: ${t.message.trim()}` : "";
      return {
        failure: `container ${c.name} exited ${t.exitCode} (${t.reason ?? "Error"})${message}`,
      };
    }
  }
  return p.status?.phase === "Failed" && p.status.reason
    ? { failure: `${p.status.reason}: ${p.status.message ?? ""}`.trim() }
    : {};
}

/**
 * A PVC as the decisions see it, with whose controller it is (pure); none for a PVC without a
 * CubePod volume role.
 */
export function observedPVC(p: kind.PersistentVolumeClaim, boxUid: string): ObservedPVC[] {
  const role = p.metadata?.labels?.[LABEL_VOLUME];
  if (role !== "rootfs" && role !== "workspace") return [];
  const controller = p.metadata?.ownerReferences?.find(r => r.controller);
  const gen = Number(p.metadata?.labels?.[LABEL_ROOTFS_GENERATION]);
  return [
    {
      name: p.metadata!.name!,
      role,
      generation: role === "rootfs" && gen > 0 ? gen : undefined,
      deleting: Boolean(p.metadata?.deletionTimestamp),
      volumeKey: p.metadata?.labels?.[LABEL_VOLUME_KEY],
      retained: p.metadata?.labels?.[LABEL_RETAINED] !== undefined,
      ...(p.metadata?.annotations?.[ANNOTATION_COPY_FROM]
        ? { copyFrom: p.metadata.annotations[ANNOTATION_COPY_FROM] }
        : {}),
      copied: p.metadata?.annotations?.[ANNOTATION_COPIED] !== undefined,
      ...(role === "rootfs" && p.metadata?.labels?.[LABEL_ROOTFS_PODD]
        ? { rootfsPodd: p.metadata.labels[LABEL_ROOTFS_PODD] }
        : {}),
      owner: !controller
        ? "none"
        : controller.uid === boxUid
          ? "this"
          : controller.kind === "PodWarmPool"
            ? "pool"
            : "other",
    },
  ];
}

/**
 * The VolumeSnapshot of a box's snapshot name for `role` as the decisions see it, with whose
 * controller it is (pure): one of another object's by that name is not the box's.
 */
export function observedSnapshot(
  v: VolumeSnapshot,
  boxUid: string,
  role: "rootfs" | "workspace",
): ObservedSnapshot {
  const controller = v.metadata.ownerReferences?.find(r => r.controller);
  const poddImage = v.metadata.annotations?.[ANNOTATION_PODD_IMAGE];
  return {
    name: v.metadata.name,
    role,
    owner: !controller ? "none" : controller.uid === boxUid ? "this" : "other",
    ready: v.status?.readyToUse === true,
    ...(v.status?.error?.message ? { error: v.status.error.message } : {}),
    deleting: Boolean(v.metadata.deletionTimestamp),
    ...(poddImage ? { poddImage } : {}),
  };
}
