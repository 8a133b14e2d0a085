import type { PodBox } from "../../../../capabilities/api/kinds";
import { SandboxesApi } from "../../../../gateway/control/sandboxes";
import { SandboxStarter } from "../../../../gateway/control/start";
import { box, controlContext } from "./fixtures";

describe("the control API's list", () => {
  const made = (name: string, startedAt: string, extra: Record<string, unknown> = {}) =>
    box(name, {
      metadata: {
        name,
        namespace: "a",
        creationTimestamp: "2026-12-01T10:00:00Z",
        annotations: {
          "pod.cubeplex.ai/sandbox-started-at": startedAt,
          "pod.cubeplex.ai/sandbox-template": "base",
          "pod.cubeplex.ai/sandbox-metadata": JSON.stringify({ run: "r" }),
        },
      },
      status: { phase: "Running" },
      ...extra,
    } as unknown as Partial<PodBox>);
  const setUp = (...boxes: PodBox[]) => {
    const context = controlContext(...boxes);
    const api = new SandboxesApi(context, new SandboxStarter(context));
    return (q: string, v2 = true) => api.list("a", new URLSearchParams(q), v2);
  };
  const ids = (a: { body?: unknown }) => (a.body as { sandboxID: string }[]).map(s => s.sandboxID);
  // Three boxes created within one second: only the gateway's stamp tells them apart.
  const older = made("older", "2026-12-01T10:00:00.100Z");
  const newer = made("newer", "2026-12-01T10:00:00.900Z");
  const paused = made("paused", "2026-12-01T10:00:00.500Z", { status: { phase: "Paused" } });

  it("sorts newest first by default, or oldest first, to the millisecond", () => {
    const list = setUp(older, newer, paused);
    expect(ids(list(""))).toEqual(["newer", "paused", "older"]);
    expect(ids(list("order=asc"))).toEqual(["older", "paused", "newer"]);
    expect(ids(list("", false))).toEqual(["newer", "older"]);
  });

  it("pages with X-Next-Token in either order, and counts the running matches", () => {
    const list = setUp(older, newer, paused);
    for (const order of ["desc", "asc"]) {
      const seen: string[] = [];
      let token: string | undefined;
      do {
        const page = list(`order=${order}&limit=1${token ? `&nextToken=${token}` : ""}`);
        expect(page.headers?.["X-Total-Running"]).toBe("2");
        seen.push(...ids(page));
        token = page.headers?.["X-Next-Token"];
      } while (token);
      expect(seen).toEqual(ids(list(`order=${order}`)));
    }
    expect(list("state=paused").headers).toEqual({});
  });

  it("filters by start time (inclusive), template and state", () => {
    const list = setUp(older, newer, paused);
    expect(ids(list("startedAfter=2026-12-01T10:00:00.500Z"))).toEqual(["newer", "paused"]);
    expect(ids(list("template=base&state=paused"))).toEqual(["paused"]);
    expect(ids(list("template=other"))).toEqual([]);
  });

  it("falls back to the box's creation for a box the gateway did not make", () => {
    const gitops = box("gitops", { status: { phase: "Running" } } as Partial<PodBox>);
    expect(ids(setUp(gitops, older)("order=asc"))).toEqual(["gitops", "older"]);
  });

  it.each([
    ["limit=0", /limit: expected an integer from 1 to 100/],
    ["order=up", /order: expected asc or desc, got "up"/],
    ["startedAfter=yesterday", /startedAfter: expected an RFC 3339 time/],
    ["state=running,gone", /state: expected running or paused, got "gone"/],
    ["nextToken=bm9wZQ", /nextToken: "bm9wZQ" is not a token this API gave/],
  ])("refuses %s with a clear 400", (q, message) => {
    expect(() => setUp(older)(q)).toThrow(message);
  });
});
