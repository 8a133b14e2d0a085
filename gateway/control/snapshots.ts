import { z } from "zod";
import { API_VERSION } from "../../capabilities/api/common";
import type { PodBox } from "../../capabilities/api/kinds";
import { KubeError } from "../../capabilities/client/api-client";
import { paths } from "../../capabilities/client/paths";
import {
  ANNOTATION_TEMPLATE,
  ApiError,
  newSandboxId,
  startedAt,
  templateIdOf,
  templateOf,
  inheritedNetwork,
} from "../e2b";
import { internalError } from "../internal-errors";
import {
  ANNOTATION_SNAPSHOT_NAME,
  ANNOTATION_SNAPSHOT_OF,
  formatName,
  isSnapshot,
  LABEL_SNAPSHOT,
  parseSnapshotName,
  snapshotIdOf,
  snapshotInfo,
  snapshotsNamed,
} from "../snapshots";
import { startedNow, type ControlContext } from "./context";
import { limitOf, pageToken, parse } from "./requests";
import type { Answer } from "./routes";

const snapshotSchema = z.looseObject({ name: z.string().min(1).optional() });

/**
 * E2B's snapshots (../snapshots.ts): taken of a sandbox, listed, and deleted as templates. A
 * create from one is a sandboxes' create (./sandboxes.ts).
 */
export class SnapshotsApi {
  constructor(private readonly context: ControlContext) {}

  /**
   * `POST /sandboxes/{id}/snapshots` (`{name?}`): a paused box forked from the sandbox's two
   * volumes, kept until deleted; the sandbox runs on. Answered once the copy is made: where the
   * template names a VolumeSnapshotClass, the box is created paused and takes them as
   * VolumeSnapshots, cut before the answer, with no Pod; else it runs once, to clone them, and is
   * paused then.
   */
  async create(ns: string, id: string, body: unknown): Promise<Answer> {
    const { client, boxes, config } = this.context;
    const input = parse(snapshotSchema, body ?? {});
    const source = this.context.own(ns, id);
    const templateRef = templateOf(source);
    if (!templateRef) throw new ApiError(409, `sandbox "${id}" has no template to snapshot yet`);
    const name = input.name === undefined ? undefined : parseSnapshotName(input.name, ns);
    const boxName = newSandboxId();
    const viaSnapshots = Boolean(this.context.templateOf(source)?.spec?.volumeSnapshotClassName);
    const box = {
      apiVersion: API_VERSION,
      kind: "PodBox",
      metadata: {
        name: boxName,
        labels: { [LABEL_SNAPSHOT]: "true" },
        annotations: {
          ...startedNow(),
          [ANNOTATION_SNAPSHOT_OF]: id,
          [ANNOTATION_TEMPLATE]: templateIdOf(source),
          ...(name ? { [ANNOTATION_SNAPSHOT_NAME]: formatName(name) } : {}),
          // Sandboxes made from the snapshot get the environment it was taken with.
          ...this.context.keyAnnotations(ns, boxName, this.context.keptEnvVars(ns, id)),
        },
      },
      spec: {
        templateRef,
        forkFrom: id,
        ...(viaSnapshots ? { desiredState: "Paused" } : {}),
        ...inheritedNetwork(source),
      },
    };
    const created = await client.create<PodBox>(paths.podBoxes(ns), box as unknown as PodBox);
    try {
      if (viaSnapshots) {
        const taken = await boxes.waitFor(
          ns,
          boxName,
          b =>
            b?.status?.reason === "Snapshotted" ||
            b?.status?.phase === "Failed" ||
            // The operator read no class (the template changed meanwhile): a paused fork.
            (b?.status?.phase === "Paused" && b.status.reason === "Paused"),
          config.startTimeoutMs,
        );
        if (taken?.status?.reason === "Snapshotted")
          return { status: 201, body: snapshotInfo(created) };
        if (taken?.status?.phase === "Failed") {
          throw new ApiError(502, `snapshot of "${id}" failed: ${taken.status.message ?? "gone"}`);
        }
        await client.mergePatch(paths.podBoxes(ns, boxName), { spec: { desiredState: "Running" } });
      }
      // The copy is made when the fork first starts; it is paused straight after.
      const running = await boxes.waitFor(
        ns,
        boxName,
        // The watch may not show the new box yet: only its phase ends the wait.
        b => b?.status?.phase === "Running" || b?.status?.phase === "Failed",
        config.startTimeoutMs,
      );
      if (running?.status?.phase !== "Running") {
        throw new ApiError(
          502,
          `snapshot of "${id}" failed: ${running?.status?.message ?? "gone"}`,
        );
      }
      await client.mergePatch(paths.podBoxes(ns, boxName), {
        spec: { desiredState: "Paused" },
      });
    } catch (e) {
      await client.delete(paths.podBoxes(ns, boxName)).catch(() => undefined);
      if (e instanceof ApiError) throw e;
      // The API server's refusals are the cluster's business; the wait's timeout is the tenant's.
      if (e instanceof KubeError) {
        throw internalError(e, { call: "snapshot", namespace: ns, sandbox: id });
      }
      throw new ApiError(504, `snapshot of "${id}" did not complete: ${(e as Error).message}`);
    }
    return { status: 201, body: snapshotInfo(created) };
  }

  /**
   * `GET /snapshots` (`sandboxID`, `name`, `limit`, `nextToken`): the namespace's snapshots,
   * newest first, one per name.
   */
  list(ns: string, query: URLSearchParams): Answer {
    const limit = limitOf(query);
    const name = query.get("name");
    const source = query.get("sandboxID");
    if (name) parseSnapshotName(name, ns);
    // Newest first, by name the other way on a tie, as the page token reads them.
    const everyOne = this.context.boxes
      .inNamespace(ns)
      .filter(isSnapshot)
      .sort(
        (a, b) =>
          startedAt(b) - startedAt(a) ||
          (b.metadata?.name ?? "").localeCompare(a.metadata?.name ?? ""),
      );
    let all = name ? snapshotsNamed(everyOne, name, ns) : everyOne;
    if (source) all = all.filter(b => b.metadata?.annotations?.[ANNOTATION_SNAPSHOT_OF] === source);
    const seen = new Set<string>();
    all = all
      .filter(b => !b.metadata?.deletionTimestamp)
      .filter(b => {
        const id = snapshotIdOf(b);
        return !seen.has(id) && Boolean(seen.add(id));
      });
    const key = (b: PodBox) => ({ at: startedAt(b), name: b.metadata?.name ?? "" });
    const token = query.get("nextToken");
    const after = token ? pageToken.read(token) : undefined;
    const from = after
      ? all.findIndex(
          b => key(b).at < after.at || (key(b).at === after.at && key(b).name < after.name),
        )
      : 0;
    const page = from < 0 ? [] : all.slice(from, from + limit);
    const more = from >= 0 && from + limit < all.length;
    return {
      status: 200,
      body: page.map(snapshotInfo),
      headers: more ? { "X-Next-Token": pageToken.write(key(page[page.length - 1])) } : {},
    };
  }

  /**
   * `DELETE /templates/{id}`, as the SDKs delete a snapshot: every tag of it, and its volumes.
   * CubePod's templates are PodTemplates, which this API does not delete.
   */
  async delete(ns: string, rawId: string): Promise<Answer> {
    const { client, boxes, templates } = this.context;
    let id: string;
    try {
      id = decodeURIComponent(rawId);
    } catch {
      throw new ApiError(400, `template ID "${rawId}" is not percent-encoded`);
    }
    const named = snapshotsNamed(boxes.inNamespace(ns), id.replace(/:[^/:]*$/, ""), ns);
    if (named.length === 0) {
      if (templates.get(ns, id)) {
        throw new ApiError(
          400,
          `template "${id}" is a PodTemplate: delete it with the Kubernetes API`,
        );
      }
      throw new ApiError(404, `snapshot "${id}" not found`);
    }
    await Promise.all(
      named.map(b =>
        client.delete(paths.podBoxes(ns, b.metadata!.name!)).catch(e => {
          if (!(e instanceof KubeError && e.status === 404)) throw e;
        }),
      ),
    );
    await Promise.all(
      named.map(b =>
        boxes
          .waitFor(ns, b.metadata!.name!, x => !x || Boolean(x.metadata?.deletionTimestamp), 5000)
          .catch(() => undefined),
      ),
    );
    return { status: 204 };
  }
}
