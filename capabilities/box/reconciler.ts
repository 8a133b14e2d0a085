import { a, Log } from "pepr";
import type { V1ObjectMeta } from "@kubernetes/client-node";
import type { PodBox } from "../api/kinds";
import type { PodBoxStatus } from "../api/podbox";
import { paths } from "../client/paths";
import { ClaimReconciler } from "../claim/reconciler";
import type { WarmClaims } from "../claim/warm-claims";
import { NamespaceTerminatingError, PermanentError, RefusedError } from "../kit/api-errors";
import { kubeTime, readyCondition } from "../kit/conditions";
import { applyAction, ActionContext, ObjectAction } from "../kit/object-actions";
import { objectKey } from "../kit/object-key";
import type { WorkQueue, WorkResult } from "../kit/work-queue";
import { WriteEchoes } from "../kit/write-echoes";
import { boxOfPod, isControlledBy } from "../manifests/owner";
import { countTransition, reconcileDuration, reconcileErrors } from "../metrics/registry";
import type { PoolReconciler } from "../pool/reconciler";
import {
  addFinalizer,
  BoxEventRecorder,
  hasFinalizer,
  removeFinalizer,
  writeBoxStatus,
} from "./apply";
import { decideBox, readsFromCache } from "./decide";
import { observeBox } from "./observe";
import type { SeedIndex } from "../seed/seed-index";
import type { AwaitedObject, BoxPlan, NameConflict } from "./types";
import { WaitingBoxes } from "./waiting-boxes";

/** Passes of one reconcile: from the cache, consistent, with the conflict found. */
const MAX_PASSES = 3;

export type BoxReconcilerDeps = ActionContext & {
  queue: WorkQueue;
  /** The time observations and claimed statuses are stamped with. */
  clock: () => Date;
  /** The warm claims' state, which the box's claim runner ({@link ClaimReconciler}) keeps. */
  claims: WarmClaims;
  pools: Pick<PoolReconciler, "templateOf" | "replenishSoon" | "asked">;
  events: BoxEventRecorder;
  /** The templates' filled seeds, which new rootfs volumes are cloned from. */
  seeds?: SeedIndex;
  /** The namespace of the tenant default templates (CUBEPOD_DEFAULT_TEMPLATES_NAMESPACE). */
  defaultTemplates?: string;
  /** The cluster runs the node egress agent (see {@link BoxObservation.egressAgent}). */
  egressAgent?: boolean;
};

/**
 * Reconciles PodBoxes: every event about a box (the box, its Pod, its template, the reaper) goes
 * through one lane of the queue, and each run reads the box afresh, decides and applies. A new
 * box of a warm pool first tries to claim a standby: the claim's run is {@link ClaimReconciler},
 * which sees each event of the box and starts each reconcile.
 */
export class BoxReconciler {
  /** Box versions this reconciler wrote: their watch events need no reconcile. */
  readonly #writes = new WriteEchoes();
  /** Boxes waiting for an object to appear, be ready or go: its watch event wakes them. */
  readonly #waiting = new WaitingBoxes();
  /** The warm claims of new boxes of a pool, with the box's writes it needs passed in. */
  readonly #claims: ClaimReconciler;

  constructor(private readonly deps: BoxReconcilerDeps) {
    const { client, events } = deps;
    this.#claims = new ClaimReconciler({
      client,
      failpoints: deps.failpoints,
      clock: deps.clock,
      claims: deps.claims,
      pools: deps.pools,
      boxes: {
        echoes: this.#writes,
        writeStatus: (box, status) => writeBoxStatus(client, box, status),
        hasFinalizer,
        addFinalizer: box => addFinalizer(client, box),
        recordEvent: (box, event) => events.record(box, event),
      },
    });
  }

  /** Reads the API server's clock, once: called when the process starts watching boxes. */
  start(): Promise<number> {
    return this.#claims.start();
  }

  /**
   * A watch event of the box: a claim jumps the queue; the echo of our own write is dropped (by
   * the claim, which sees every event of the box, echoes included).
   */
  onBoxEvent(box: PodBox): void {
    const { queue } = this.deps;
    const key = objectKey(box.metadata!.namespace!, box.metadata!.name!);
    // Forks wait for their parent's status, which is one of our own writes: before the echo check.
    this.wake("PodBox", box.metadata!.namespace!, box.metadata!.name!);
    this.#claims.onBoxEvent(key, box, outcome => {
      if (outcome === "claim") queue.addFirst(key);
      // Not reconcileSoon: the claim has seen the change already.
      else queue.add(key);
    });
  }

  /**
   * A watch event of a sandbox Pod: its box looks again, unless the event is the echo of the
   * claim that gave the Pod to the box.
   */
  onPodEvent(pod: a.Pod, deleted: boolean): void {
    const namespace = pod.metadata?.namespace;
    const boxName = boxOfPod(pod.metadata ?? {});
    if (!namespace || !boxName) return;
    this.#claims.onPodEvent(pod, deleted, () => this.reconcileSoon(objectKey(namespace, boxName)));
  }

  /** A watch event of an object boxes may wait for: they look again. */
  wake(kind: AwaitedObject["kind"], namespace: string, name: string): void {
    for (const key of this.#waiting.event(kind, namespace, name)) this.reconcileSoon(key);
  }

  /** Asks for a full reconcile of the box: something about it changed. */
  reconcileSoon(key: string): void {
    this.#claims.eventCame(key);
    this.deps.queue.add(key);
  }

  /**
   * One reconcile of a box: a waiting claim, or the finish of a claim, first. Otherwise: add the
   * finalizer if it is missing, observe, decide, apply the actions in order (PVCs before the Pod),
   * write the status when it changed, record the transition as an Event, and drop the finalizer
   * once a deletion is cleaned up. Errors a retry cannot fix end in `phase: Failed`; the others
   * are thrown, and the queue retries them with backoff. A create refused because the namespace
   * is being deleted ends the reconcile quietly: the box is deleted next.
   */
  async reconcile(key: string): Promise<WorkResult> {
    const { client, events } = this.deps;
    const claim = await this.#claims.reconcile(key);
    if (claim === "done") return;
    // No standby: back in line, to wait its turn for a cold start.
    if (claim === "requeue") return { requeueAfterMs: 0 };

    const [namespace, name] = key.split("/");
    const since = this.#waiting.mark();
    const box = await client.get<PodBox>(paths.podBoxes(namespace, name));
    if (!box) {
      this.#writes.forget(key);
      this.#waiting.forget(key);
      return;
    }
    const end = reconcileDuration.startTimer({ kind: "PodBox" });
    try {
      // Before anything is created for the box, so that a deletion always finds it held.
      if (!hasFinalizer(box)) await this.#writes.during(key, () => addFinalizer(client, box));
      const plan = await this.#observeDecideApply(box);
      const rv = await this.#writes.during(key, () => writeBoxStatus(client, box, plan.status));
      // A transition is counted once, when its reason first appears.
      if (rv && plan.status.reason !== box.status?.reason && plan.status.reason) {
        countTransition(plan.status.reason, { namespace });
      }
      for (const event of plan.events) events.record(box, event);
      if (plan.cleanupDone) await removeFinalizer(client, box);
      // What it waits for came meanwhile: look again now, else sleep until it comes.
      if (this.#waiting.waitFor(key, namespace, plan.waitingFor ?? [], since)) {
        return { requeueAfterMs: 0 };
      }
      if (plan.recheckAfterMs !== undefined) return { requeueAfterMs: plan.recheckAfterMs };
    } catch (e) {
      if (e instanceof NamespaceTerminatingError) {
        Log.debug({ box: key, error: e.message }, "namespace is being deleted; nothing to do");
        return;
      }
      if (e instanceof RefusedError) {
        // Said in the status, then retried with backoff by the queue: the cause may go.
        await this.#reportRefusal(key, box, e.message);
        throw e;
      }
      if (!(e instanceof PermanentError)) throw e;
      reconcileErrors.inc({ kind: "PodBox", permanent: "true" });
      Log.warn({ box: key, error: e.message }, "PodBox failed permanently");
      const failed = {
        ...box.status,
        phase: "Failed" as const,
        reason: "APIError" as const,
        message: e.message,
        observedGeneration: box.metadata?.generation,
      };
      await this.#writes.during(key, () => writeBoxStatus(client, box, failed));
      events.record(box, { type: "Warning", reason: "APIError", message: e.message });
      this.#waiting.forget(key);
    } finally {
      end();
    }
  }

  /** A refused write: the box waits (Pending, reason Forbidden), with no Pod to show. */
  async #reportRefusal(key: string, box: PodBox, message: string): Promise<void> {
    const { client, events } = this.deps;
    const prev = box.status ?? {};
    const generation = box.metadata?.generation ?? 0;
    const now = kubeTime(this.deps.clock());
    // The fields of a Pod that is not there go (sent as null by the status patch).
    const kept = Object.fromEntries(
      Object.entries(prev).filter(([k]) => !["podName", "podIP", "podUID", "poddURL"].includes(k)),
    );
    const status: PodBoxStatus = {
      ...kept,
      phase: "Pending",
      reason: "Forbidden",
      message: `${message}; retrying`,
      observedGeneration: generation,
      conditions: [
        readyCondition(prev.conditions, false, generation, now, "Forbidden", message),
        ...(prev.conditions ?? []).filter(c => c.type !== "Ready"),
      ],
    };
    const written = await this.#writes.during(key, () => writeBoxStatus(client, box, status));
    if (written && prev.reason !== "Forbidden") {
      events.record(box, { type: "Warning", reason: "Forbidden", message });
    }
  }

  /**
   * Observes the box, decides and applies, and returns the plan whose status is to be written.
   * Its Pods and PVCs are read from the API server's watch cache when that is safe
   * ({@link readsFromCache}). An action that finds its work done (a create that exists, a delete
   * of what is gone) shows the read was outdated: the rest of the plan is dropped, and the box is
   * read again consistently and decided anew. A create that still finds its object after a
   * consistent read has met an object that is not the box's, or one it owns but no longer
   * labels: only the first is a conflict, and the box is decided anew knowing it.
   */
  async #observeDecideApply(box: PodBox): Promise<BoxPlan> {
    const { namespace, name } = box.metadata!;
    let fromCache = readsFromCache({
      name: name!,
      volumeKey: box.spec?.volumeKey,
      deleting: Boolean(box.metadata?.deletionTimestamp),
      workspacePVCName: box.status?.workspacePVCName,
    });
    let conflict: NameConflict | undefined;
    for (let pass = 1; ; pass++) {
      const observation = await observeBox(this.deps.client, box, {
        fromCache,
        conflict,
        now: this.deps.clock(),
        seeds: this.deps.seeds,
        defaultTemplates: this.deps.defaultTemplates,
        egressAgent: this.deps.egressAgent,
      });
      const plan = decideBox(observation);
      const stopped = await this.#applyUntilOutdated(box, plan.actions, fromCache);
      if (!stopped) return plan;
      if (pass === MAX_PASSES) {
        throw new Error(
          `the objects of PodBox ${namespace}/${name} kept changing during its reconcile`,
        );
      }
      conflict ??= stopped.conflict;
      fromCache = false;
    }
  }

  /**
   * Applies the actions in order, and stops at the first that shows the plan was decided on an
   * outdated read; returns that stop (with the conflict it found, if any), or undefined when
   * every action was applied. After a consistent read, only a create whose object is not the
   * box's (or is gone again) stops.
   */
  async #applyUntilOutdated(
    box: PodBox,
    actions: ObjectAction[],
    fromCache: boolean,
  ): Promise<{ conflict?: NameConflict } | undefined> {
    const { namespace, name, uid } = box.metadata!;
    for (const action of actions) {
      if (await applyAction(this.deps, namespace!, name!, action)) continue;
      if (fromCache) return {};
      const wanted = nameTaken(action);
      if (!wanted) continue;
      const at = wanted.kind === "Pod" ? paths.pods : paths.pvcs;
      const found = await this.deps.client.get<{ metadata?: V1ObjectMeta }>(
        at(namespace!, wanted.name),
      );
      if (!found) return {};
      if (!isControlledBy(found.metadata, uid!)) return { conflict: wanted };
    }
    return undefined;
  }
}

/** The kind and name a create action takes, or undefined for the other actions. */
function nameTaken(action: ObjectAction): NameConflict | undefined {
  if (action.type === "createPod") return { kind: "Pod", name: action.pod.metadata!.name! };
  if (action.type === "createPVC") {
    return { kind: "PersistentVolumeClaim", name: action.pvc.metadata!.name! };
  }
  return undefined;
}
