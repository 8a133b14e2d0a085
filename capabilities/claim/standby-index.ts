import { egressOfPod } from "../network/egress-agent";
import type { V1Pod } from "@kubernetes/client-node";
import {
  ANNOTATION_PODD_IMAGE,
  LABEL_BOX,
  LABEL_POOL,
  LABEL_TEMPLATE_HASH,
} from "../manifests/labels";
import { objectKey } from "../kit/object-key";
import { isPodReady } from "../kit/pod-ready";

/** A pool Pod's key in the index. */
const keyOf = (pod: V1Pod) => `${pod.metadata?.name}@${pod.metadata?.namespace}`;

/** A ready standby as the claim path needs it. */
export type Standby = {
  namespace: string;
  pool: string;
  name: string;
  resourceVersion: string;
  uid: string;
  podIP: string;
  templateHash?: string;
  rootfsPVCName: string;
  workspacePVCName: string;
  /** The podd its fill left on the rootfs volume (the webhook's annotation). */
  poddImage?: string;
  /** Its egress rules (its template's) and its node's answer (network/egress-agent.ts). */
  egress?: string;
  egressApplied?: string;
};

/**
 * The ready standbys of every pool, kept from the watch on pool Pods, so that a claim picks one
 * without a read. It is only a hint: the claim's conditional write (resourceVersion precondition)
 * is what the API server arbitrates. A standby taken here leaves the index until its next watch
 * event, so that two claims in this process never try the same one.
 */
export class StandbyIndex {
  readonly #pools = new Map<string, Map<string, Standby>>();
  /** Standbys handed to a claim, by key: their pool's key and the version they were taken at. */
  readonly #taken = new Map<string, { pool: string; resourceVersion: string }>();
  /**
   * Pool Pods a box controls (claimed, not relabelled yet): the box's UID by Pod key, and back.
   */
  readonly #claimedPods = new Map<string, { box: string; pool: string }>();
  readonly #claimedBy = new Map<string, string>();
  /** Pools read from the API server since this process started ({@link refresh}). */
  readonly #read = new Set<string>();

  /** Records a watch event of a pool Pod (added, modified or deleted). */
  observe(pod: V1Pod, deleted = false): void {
    this.#taken.delete(keyOf(pod));
    this.#record(pod, deleted);
  }

  /**
   * Records a pool's Pods as a read found them, for a claim that found none ready here: the
   * watch feeding the index may lag the read by a few milliseconds. A standby taken by a claim
   * still in flight is left out while it is at the version it was taken at (the read may predate
   * the claim's write); the claim's own watch event settles it. A taken standby the read no
   * longer finds has left the pool: it is forgotten, should its watch event never come.
   */
  refresh(namespace: string, pool: string, pods: V1Pod[]): void {
    const listed = new Set(pods.map(keyOf));
    const poolKey = objectKey(namespace, pool);
    this.#read.add(poolKey);
    for (const [key, t] of this.#taken) {
      if (t.pool === poolKey && !listed.has(key)) this.#taken.delete(key);
    }
    for (const [key, c] of this.#claimedPods) {
      if (c.pool === poolKey && !listed.has(key)) this.#recordClaimed(key, undefined);
    }
    for (const pod of pods) {
      if (this.#taken.get(keyOf(pod))?.resourceVersion !== pod.metadata?.resourceVersion) {
        this.#record(pod);
      }
    }
  }

  #record(pod: V1Pod, deleted = false): void {
    const meta = pod.metadata ?? {};
    const ns = meta.namespace ?? "";
    const name = meta.name ?? "";
    const pool = meta.labels?.[LABEL_POOL];
    // The Pod's pool label may be gone (a claim took it): look in every pool.
    for (const members of this.#pools.values()) members.delete(keyOf(pod));
    const controller = meta.ownerReferences?.find(r => r.controller);
    this.#recordClaimed(
      keyOf(pod),
      !deleted && pool && controller?.kind === "PodBox"
        ? { box: controller.uid, pool: objectKey(ns, pool) }
        : undefined,
    );
    // A standby is what the pool made: its controller is the pool, and no box has it yet.
    const made = controller?.kind === "PodWarmPool" && controller.name === pool;
    if (deleted || !pool || meta.deletionTimestamp || !made || meta.labels?.[LABEL_BOX]) return;
    const ready = pod.status?.phase === "Running" && Boolean(pod.status.podIP) && isPodReady(pod);
    if (!ready) return;
    const claim = (v: string) =>
      pod.spec?.volumes?.find(x => x.name === v)?.persistentVolumeClaim?.claimName ?? "";
    const members = this.#pools.get(objectKey(ns, pool)) ?? new Map<string, Standby>();
    members.set(keyOf(pod), {
      namespace: ns,
      pool,
      name,
      resourceVersion: meta.resourceVersion ?? "",
      uid: meta.uid ?? "",
      podIP: pod.status!.podIP!,
      templateHash: meta.labels?.[LABEL_TEMPLATE_HASH],
      rootfsPVCName: claim("rootfs"),
      workspacePVCName: claim("workspace"),
      ...(meta.annotations?.[ANNOTATION_PODD_IMAGE]
        ? { poddImage: meta.annotations[ANNOTATION_PODD_IMAGE] }
        : {}),
      ...egressOfPod(meta.annotations),
    });
    this.#pools.set(objectKey(ns, pool), members);
  }

  #recordClaimed(podKey: string, claim: { box: string; pool: string } | undefined): void {
    const before = this.#claimedPods.get(podKey);
    if (before) this.#claimedBy.delete(before.box);
    this.#claimedPods.delete(podKey);
    if (!claim) return;
    this.#claimedPods.set(podKey, claim);
    this.#claimedBy.set(claim.box, podKey);
  }

  /**
   * True when a Pod that still carries a pool's labels is the box's: claimed, by this process or
   * one before it, and not relabelled yet. Known only for a pool read since this process started
   * ({@link wasRead}); the watch keeps it from then on.
   */
  holdsClaimed(boxUID: string): boolean {
    return this.#claimedBy.has(boxUID);
  }

  /** Whether the pool's Pods have been read from the API server since this process started. */
  wasRead(namespace: string, pool: string): boolean {
    return this.#read.has(objectKey(namespace, pool));
  }

  /** Takes a ready standby of the pool with the template hash, if any, out of the index. */
  take(namespace: string, pool: string, templateHash?: string): Standby | undefined {
    const poolKey = objectKey(namespace, pool);
    const members = this.#pools.get(poolKey);
    if (!members) return undefined;
    for (const [k, s] of members) {
      if (templateHash !== undefined && s.templateHash !== templateHash) continue;
      members.delete(k);
      this.#taken.set(k, { pool: poolKey, resourceVersion: s.resourceVersion });
      return s;
    }
    return undefined;
  }

  /** Ready standbys per pool, for the metrics. */
  counts(): { namespace: string; pool: string; ready: number }[] {
    return [...this.#pools.entries()].map(([k, m]) => {
      const [namespace, pool] = k.split("/");
      return { namespace, pool, ready: m.size };
    });
  }
}
