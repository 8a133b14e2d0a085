import type { PodBox } from "../../../capabilities/api/kinds";
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
