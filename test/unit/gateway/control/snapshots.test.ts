import type { CubePodTemplate, PodBox } from "../../../../capabilities/api/kinds";
import type { ApiClient } from "../../../../capabilities/client/api-client";
import { SnapshotsApi } from "../../../../gateway/control/snapshots";
import { box, controlContext, controlContextWith } from "./fixtures";

const snapshot = (name: string, at: string): PodBox =>
  ({
    metadata: {
      name,
      namespace: "team",
      labels: { "pod.cubeplex.ai/snapshot": "true" },
      annotations: { "pod.cubeplex.ai/sandbox-started-at": at },
    },
    spec: {},
  }) as unknown as PodBox;
const sandbox = { metadata: { name: "plain", namespace: "team" }, spec: {} } as PodBox;

describe("the control API's snapshots", () => {
  const api = (...boxes: PodBox[]) => new SnapshotsApi(controlContext(...boxes));
  const ids = (a: { body?: unknown }) =>
    (a.body as { snapshotID: string }[]).map(s => s.snapshotID);

  it("pages newest first, also through snapshots of the same millisecond", () => {
    const at = "2026-12-01T10:00:00.100Z";
    const control = api(
      snapshot("aaa", at),
      snapshot("bbb", at),
      snapshot("ccc", "2026-12-01T10:00:00.200Z"),
      sandbox,
    );
    const seen: string[] = [];
    let token: string | undefined;
    do {
      const page = control.list(
        "team",
        new URLSearchParams(`limit=1${token ? `&nextToken=${token}` : ""}`),
      );
      seen.push(...ids(page));
      token = page.headers?.["X-Next-Token"];
    } while (token);
    expect(seen).toEqual(["ccc:default", "bbb:default", "aaa:default"]);
  });

  it("refuses a template ID that is not percent-encoded, and a name of another namespace", async () => {
    await expect(api().delete("team", "%E0%A4%A")).rejects.toThrow(/not percent-encoded/);
    expect(() => api().list("team", new URLSearchParams("name=other/app"))).toThrow(
      /namespace "other" is not yours/,
    );
    await expect(api().delete("team", "nothing%3Adefault")).rejects.toThrow(
      /snapshot "nothing:default" not found/,
    );
  });
});

describe("taking a snapshot", () => {
  const source = box("sbx", {
    spec: { templateRef: "real" } as PodBox["spec"],
    status: { phase: "Running" },
  });
  const template = (spec: object) =>
    ({ metadata: { name: "real", namespace: "a" }, spec }) as unknown as CubePodTemplate;

  /** The API calls of one snapshot, the watch then showing the box as `shown` says. */
  async function take(
    spec: object,
    shown: (b: PodBox) => PodBox["status"][],
    env: Record<string, string> = {},
  ) {
    const calls: string[] = [];
    const context = controlContextWith(
      env,
      {
        create: async (_: string, b: PodBox) => {
          calls.push(`create ${JSON.stringify(b.spec)}`);
          const made = { ...b, metadata: { ...b.metadata, namespace: "a", uid: "u" } } as PodBox;
          // The watch shows it, then each status the operator writes.
          setImmediate(() => {
            for (const status of shown(made)) context.boxes.observe({ ...made, status }, false);
          });
          return made;
        },
        mergePatch: async (_: string, patch: object) => {
          calls.push(`patch ${JSON.stringify(patch)}`);
          return {};
        },
        delete: async () => calls.push("delete"),
      } as unknown as ApiClient,
      source,
    );
    context.templates.observe(template(spec), false);
    const answer = await new SnapshotsApi(context).create("a", "sbx", {}).catch((e: Error) => e);
    return { answer, calls };
  }

  it("with a VolumeSnapshotClass: creates the box paused, answers once it is Snapshotted", async () => {
    const { answer, calls } = await take({ volumeSnapshotClassName: "snaps" }, () => [
      { phase: "Pending", reason: "Snapshotting" },
      { phase: "Paused", reason: "Snapshotted" },
    ]);
    expect(answer).toMatchObject({ status: 201 });
    expect(calls).toEqual([
      'create {"templateRef":"real","forkFrom":"sbx","desiredState":"Paused"}',
    ]);
  });

  it("with a class the operator did not see: runs the paused box once, as a fork, then pauses it", async () => {
    let resumed = false;
    const { answer, calls } = await take(
      { volumeSnapshotClassName: "snaps" },
      () => {
        resumed = true;
        return [{ phase: "Paused", reason: "Paused" }];
      },
      { CUBEPOD_GATEWAY_START_TIMEOUT_SECONDS: "1" },
    );
    expect(resumed).toBe(true);
    // Its run is the watch's business; this one never comes, so the wait ends in a timeout.
    expect(calls.slice(0, 2)).toEqual([
      'create {"templateRef":"real","forkFrom":"sbx","desiredState":"Paused"}',
      'patch {"spec":{"desiredState":"Running"}}',
    ]);
    expect(answer).toMatchObject({ code: 504 });
  });

  it("fails with the operator's message, and deletes the box", async () => {
    const { answer, calls } = await take({ volumeSnapshotClassName: "snaps" }, () => [
      { phase: "Failed", reason: "ForkParentDeleting", message: "PodBox sbx is being deleted" },
    ]);
    expect(answer).toMatchObject({
      code: 502,
      message: expect.stringContaining("being deleted"),
    });
    expect(calls).toContain("delete");
  });

  it("without a class: a fork that runs once, then is paused", async () => {
    const { answer, calls } = await take({}, () => [{ phase: "Running", reason: "ForkCloned" }]);
    expect(answer).toMatchObject({ status: 201 });
    expect(calls).toEqual([
      'create {"templateRef":"real","forkFrom":"sbx"}',
      'patch {"spec":{"desiredState":"Paused"}}',
    ]);
  });
});
