import { Log } from "pepr";
import type { PodBox } from "../api/kinds";
import { decideBox } from "./box-decide";
import { applyAction, recordEvent, removeFinalizer, writeStatus } from "./box-apply";
import { describeError, PermanentError } from "./errors";
import { getBox, observeBox } from "./box-observe";
import { KeyedQueue, WorkResult } from "./queue";

/** `namespace/name` of a box. */
export const boxKey = (namespace: string, name: string) => `${namespace}/${name}`;

/** resourceVersions this reconciler wrote itself: their watch events need no reconcile. */
const ownWrites = new Map<string, string>();

/**
 * One reconcile of a box: observe it in the API server, decide, apply the actions in order (PVCs
 * before the Pod), write the status when it changed, record the transition as an Event, and drop
 * the finalizer once a deletion is cleaned up. Errors a retry cannot fix end in `phase: Failed`;
 * the others are thrown, and the queue retries them with backoff.
 */
export async function reconcileBox(key: string): Promise<WorkResult> {
  const [namespace, name] = key.split("/");
  const box = await getBox(namespace, name);
  if (!box) {
    ownWrites.delete(key);
    return;
  }
  try {
    const observation = await observeBox(box);
    const plan = decideBox(observation);
    for (const action of plan.actions) await applyAction(namespace, name, action);
    const rv = await writeStatus(box, plan.status);
    if (rv) ownWrites.set(key, rv);
    for (const event of plan.events) await recordEvent(box, event);
    if (plan.cleanupDone) await removeFinalizer(box);
    return plan.requeueAfterMs !== undefined ? { requeueAfterMs: plan.requeueAfterMs } : undefined;
  } catch (e) {
    if (!(e instanceof PermanentError)) throw e;
    Log.warn({ box: key, error: e.message }, "PodBox failed permanently");
    await writeStatus(box, {
      ...box.status,
      phase: "Failed",
      reason: "APIError",
      message: e.message,
      observedGeneration: box.metadata?.generation,
    });
    await recordEvent(box, { type: "Warning", reason: "APIError", message: e.message });
  }
}

/** The queue every event about a box goes through. */
export const boxQueue = new KeyedQueue(reconcileBox, {
  concurrency: Number(process.env.CUBEPOD_RECONCILE_CONCURRENCY ?? 8),
  baseDelayMs: 200,
  maxDelayMs: 30_000,
  onError: (key, error, attempt, retryInMs) =>
    Log.warn(
      { box: key, attempt, retryInMs, error: describeError(error) },
      "PodBox reconcile failed; retrying",
    ),
});

/** Enqueues the box of a watch event, unless the event is the echo of our own status write. */
export function enqueueBox(box: PodBox): void {
  const key = boxKey(box.metadata!.namespace!, box.metadata!.name!);
  if (ownWrites.get(key) === box.metadata?.resourceVersion) return;
  boxQueue.add(key);
}
