import type { ApiClient } from "../../../capabilities/client/api-client";
import type { CubePodTemplate, PodBox, PodWarmPool } from "../../../capabilities/api/kinds";
import { loadGatewayConfig } from "../../../gateway/config";
import { ControlApi } from "../../../gateway/control";
import { NamespacedCache, SandboxIndex } from "../../../gateway/sandboxes";
import {
  parseSnapshotName,
  snapshotIdOf,
  snapshotInfo,
  snapshotsNamed,
} from "../../../gateway/snapshots";

const snapshot = (name: string, at: string, e2bName?: string): PodBox =>
  ({
    metadata: {
      name,
      namespace: "team",
      labels: { "pod.cubeplex.ai/snapshot": "true" },
      annotations: {
        "pod.cubeplex.ai/sandbox-started-at": at,
        ...(e2bName ? { "pod.cubeplex.ai/snapshot-name": e2bName } : {}),
      },
    },
    spec: {},
  }) as unknown as PodBox;
const sandbox = { metadata: { name: "plain", namespace: "team" }, spec: {} } as PodBox;

describe("snapshots", () => {
  const older = snapshot("aaa", "2026-12-01T10:00:00.100Z", "team/app:default");
  const newer = snapshot("bbb", "2026-12-01T10:00:00.200Z", "team/app:v2");
  const unnamed = snapshot("ccc", "2026-12-01T10:00:00.300Z");
  const all = [older, newer, unnamed, sandbox];

  it("parses E2B's names, lowercased, with the default tag, in the tenant's namespace only", () => {
    expect(parseSnapshotName(" My_App ", "team")).toEqual({
      namespace: "team",
      alias: "my_app",
      tag: "default",
    });
    expect(parseSnapshotName("team/app:v1.2", "team")).toMatchObject({ tag: "v1.2" });
    expect(() => parseSnapshotName("other/app", "team")).toThrow(/namespace "other" is not yours/);
    expect(() => parseSnapshotName("a b", "team")).toThrow(/expected \[namespace\/\]name\[:tag\]/);
  });

  it("names a snapshot by its name, else by its box with the default tag", () => {
    expect(snapshotInfo(newer)).toEqual({ snapshotID: "team/app:v2", names: ["team/app"] });
    expect(snapshotInfo(unnamed)).toEqual({ snapshotID: "ccc:default", names: [] });
    expect(snapshotIdOf(older)).toBe("team/app:default");
  });

  it("finds a snapshot by ID, by name with or without a tag (newest first), never a sandbox", () => {
    const names = (ref: string) => snapshotsNamed(all, ref, "team").map(b => b.metadata!.name);
    expect(names("ccc:default")).toEqual(["ccc"]);
    expect(names("ccc")).toEqual(["ccc"]);
    expect(names("app")).toEqual(["bbb", "aaa"]);
    expect(names("team/app:default")).toEqual(["aaa"]);
    expect(names("app:v3")).toEqual([]);
    expect(names("plain")).toEqual([]);
    expect(names("bad name")).toEqual([]);
    const deleting = snapshot("ddd", "2026-12-01T10:00:00.400Z");
    Object.assign(deleting.metadata!, { deletionTimestamp: "2026-12-01T10:01:00Z" });
    expect(snapshotsNamed([deleting], "ddd:default", "team")).toEqual([]);
  });
});

describe("the control API's snapshots", () => {
  const api = (...boxes: PodBox[]) => {
    const index = new SandboxIndex();
    boxes.forEach(b => index.observe(b, false));
    return new ControlApi(
      {} as ApiClient,
      index,
      new NamespacedCache<CubePodTemplate>(),
      new NamespacedCache<PodWarmPool>(),
      loadGatewayConfig({ CUBEPOD_GATEWAY_TOKEN_KEY: "k".repeat(32) }),
    );
  };
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
      const page = control.listSnapshots(
        "team",
        new URLSearchParams(`limit=1${token ? `&nextToken=${token}` : ""}`),
      );
      seen.push(...ids(page));
      token = page.headers?.["X-Next-Token"];
    } while (token);
    expect(seen).toEqual(["ccc:default", "bbb:default", "aaa:default"]);
  });

  it("refuses a template ID that is not percent-encoded, and a name of another namespace", async () => {
    await expect(api().deleteTemplate("team", "%E0%A4%A")).rejects.toThrow(/not percent-encoded/);
    expect(() => api().listSnapshots("team", new URLSearchParams("name=other/app"))).toThrow(
      /namespace "other" is not yours/,
    );
    await expect(api().deleteTemplate("team", "nothing%3Adefault")).rejects.toThrow(
      /snapshot "nothing:default" not found/,
    );
  });
});
