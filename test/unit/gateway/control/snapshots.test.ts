import type { PodBox } from "../../../../capabilities/api/kinds";
import { SnapshotsApi } from "../../../../gateway/control/snapshots";
import { controlContext } from "./fixtures";

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
