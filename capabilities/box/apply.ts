import { hostname } from "node:os";
import { API_VERSION } from "../api/common";
import type { PodBoxStatus } from "../api/podbox";
import type { PodBox } from "../api/kinds";
import type { ApiClient } from "../client/api-client";
import { paths } from "../client/paths";
import type { Config } from "../config";
import { DeferredWrites, QuietSource } from "../kit/deferred-writes";
import { writeStatusAt } from "../kit/status-patch";
import { FINALIZER } from "../manifests/labels";
import type { BoxEvent } from "./types";
import { Log } from "pepr";

/** Writes the box's status when it changed (see {@link writeStatusAt}). */
export const writeBoxStatus = (client: ApiClient, box: PodBox, status: PodBoxStatus) =>
  writeStatusAt(
    client,
    paths.podBoxes(box.metadata!.namespace!, box.metadata!.name!),
    box.status ?? {},
    status,
  );

/** True when the box carries the cleanup finalizer (or is being deleted: none may be added). */
export const hasFinalizer = (box: PodBox) =>
  Boolean(box.metadata?.deletionTimestamp) || (box.metadata?.finalizers ?? []).includes(FINALIZER);

/**
 * Adds the cleanup finalizer. A server-side apply of that one list entry: `finalizers` is a set,
 * so the API server merges it with everyone else's, with no read and no conflict to retry.
 * Returns the box's new resourceVersion.
 */
export async function addFinalizer(client: ApiClient, box: PodBox): Promise<string | undefined> {
  const { namespace, name } = box.metadata!;
  const updated = await client.apply<PodBox>(paths.podBoxes(namespace!, name!), {
    apiVersion: API_VERSION,
    kind: "PodBox",
    metadata: { name, finalizers: [FINALIZER] },
  });
  return updated.metadata?.resourceVersion;
}

/** Removes the finalizer, guarded by a test of the list read, so a concurrent change is not lost. */
export async function removeFinalizer(client: ApiClient, box: PodBox): Promise<void> {
  const finalizers = box.metadata?.finalizers ?? [];
  if (!finalizers.includes(FINALIZER)) return;
  await client.jsonPatch(paths.podBoxes(box.metadata!.namespace!, box.metadata!.name!), [
    { op: "test", path: "/metadata/finalizers", value: finalizers },
    {
      op: "replace",
      path: "/metadata/finalizers",
      value: finalizers.filter(f => f !== FINALIZER),
    },
  ]);
}

/** An Event to create: the events collection it goes to, and the Event. */
type PendingEvent = { path: string; event: object };

/**
 * Records Kubernetes Events on boxes. An Event is stamped when recorded and written once warm
 * claims are quiet ({@link DeferredWrites}); a lost Event never fails a reconcile, as the status
 * carries the same information.
 */
export class BoxEventRecorder {
  readonly #writes: DeferredWrites<PendingEvent>;

  constructor(client: ApiClient, config: Config, claims: QuietSource) {
    this.#writes = new DeferredWrites<PendingEvent>(
      ({ path, event }) => client.create(path, event).then(() => undefined),
      {
        ...config.events,
        concurrency: 4,
        capacity: 5000,
        onDropped: count =>
          Log.warn({ count }, "Events dropped: too many were waiting to be written"),
      },
      claims,
    );
  }

  record(box: PodBox, e: BoxEvent): void {
    const { namespace, name, uid } = box.metadata!;
    const now = new Date().toISOString();
    this.#writes.record({
      path: paths.events(namespace!),
      event: {
        metadata: { namespace, generateName: `${name}.` },
        involvedObject: { apiVersion: API_VERSION, kind: "PodBox", name, namespace, uid },
        type: e.type,
        reason: e.reason,
        message: e.message,
        firstTimestamp: now,
        lastTimestamp: now,
        count: 1,
        source: { component: "cubepod" },
        reportingComponent: "cubepod",
        reportingInstance: hostname(),
      },
    });
  }
}
