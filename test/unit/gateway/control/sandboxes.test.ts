import type { PodBox } from "../../../../capabilities/api/kinds";
import { SandboxesApi } from "../../../../gateway/control/sandboxes";
import { SandboxStarter } from "../../../../gateway/control/start";
import {
  ALL_TRAFFIC,
  ApiError,
  invalidBody,
  networkSpec,
  newSandboxSchema,
  sandbox,
} from "../../../../gateway/e2b";
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

describe("E2B's network fields", () => {
  const api = (...boxes: PodBox[]) => {
    const context = controlContext(...boxes);
    return new SandboxesApi(context, new SandboxStarter(context));
  };
  const refusal = (f: () => unknown) => {
    try {
      f();
    } catch (e) {
      return { code: (e as ApiError).code, message: (e as Error).message };
    }
    throw new Error("not refused");
  };

  it("keeps what it serves on the box: private ports, a masked Host, no internet access", () => {
    expect(
      networkSpec({ network: { allowPublicTraffic: false, maskRequestHost: "app:${PORT}" } }),
    ).toEqual({
      network: { allowPublicTraffic: false, maskRequestHost: "app:${PORT}" },
    });
    // E2B's defaults leave nothing on the box; denyOut of all traffic is no internet access.
    expect(
      networkSpec({ allow_internet_access: true, network: { allowPublicTraffic: true } }),
    ).toEqual({});
    expect(networkSpec({ network: { denyOut: [ALL_TRAFFIC] } })).toEqual({ egress: "None" });
    expect(networkSpec({ allow_internet_access: false })).toEqual({ egress: "None" });
  });

  it("refuses every field and value it does not enforce, naming it, and accepts empty ones", () => {
    const parse = (network: unknown) => newSandboxSchema.safeParse({ templateID: "base", network });
    for (const [network, named] of [
      [{ allowOut: ["example.com"], denyOut: [ALL_TRAFFIC] }, "network.allowOut: not enforced"],
      [{ rules: { "example.com": [] } }, "network.rules: not enforced"],
      [{ egressProxy: { address: "p:1080" } }, "network.egressProxy: not enforced"],
      [{ httpsPorts: [8443] }, "network.httpsPorts: not enforced"],
      [{ denyOut: ["10.0.0.0/8"] }, 'network.denyOut: only "0.0.0.0/0"'],
      [{ whatever: true }, "network.whatever: not a field of E2B's network"],
      [{ maskRequestHost: "bad host" }, "network.maskRequestHost: must be host[:port]"],
    ] as const) {
      const r = parse(network);
      expect(r.success).toBe(false);
      expect(invalidBody(r.error!).message).toContain(named);
    }
    expect(parse({ allowOut: [], denyOut: null, rules: null, egressProxy: null }).success).toBe(
      true,
    );
    expect(parse(null).success).toBe(true);
  });

  it("answers a private sandbox's traffic token, and only its, in create and connect", () => {
    const open = box("open", { status: { phase: "Running" } as PodBox["status"] });
    const closed = box("closed", {
      spec: { network: { allowPublicTraffic: false } } as PodBox["spec"],
      status: { phase: "Running" } as PodBox["status"],
    });
    const config = controlContext().config;
    const tokens = config.tokenKeys.tokens(closed);
    expect(tokens.traffic).toMatch(/^[0-9a-f]{64}$/);
    expect(tokens.traffic).not.toBe(tokens.access);
    expect(config.tokenKeys.tokens(open).traffic).toBeNull();
    expect(sandbox(closed, tokens, "d")).toMatchObject({ trafficAccessToken: tokens.traffic });
    expect(api(closed).info("a", "closed").body).toMatchObject({
      network: { allowPublicTraffic: false },
    });
  });

  it("updates a sandbox's network only to what it has, refusing any change by name", () => {
    const online = box("online", { status: { phase: "Running" } as PodBox["status"] });
    const offline = box("offline", {
      spec: { egress: "None" } as PodBox["spec"],
      status: { phase: "Running" } as PodBox["status"],
    });
    const a = api(online, offline);
    expect(a.updateNetwork("a", "online", {})).toEqual({ status: 204 });
    expect(a.updateNetwork("a", "offline", { denyOut: [ALL_TRAFFIC] })).toEqual({ status: 204 });
    expect(a.updateNetwork("a", "offline", { allow_internet_access: false })).toEqual({
      status: 204,
    });
    expect(refusal(() => a.updateNetwork("a", "online", { allow_internet_access: false }))).toEqual(
      {
        code: 400,
        message: expect.stringContaining("has internet access, which CubePod cannot change"),
      },
    );
    expect(refusal(() => a.updateNetwork("a", "offline", {}))).toMatchObject({ code: 400 });
    expect(refusal(() => a.updateNetwork("a", "online", { allowOut: ["1.2.3.4"] }))).toEqual({
      code: 400,
      message: expect.stringContaining("allowOut: not enforced"),
    });
    expect(refusal(() => a.updateNetwork("a", "online", { maskRequestHost: "x" }))).toEqual({
      code: 400,
      message: expect.stringContaining("maskRequestHost: set at create only"),
    });
    expect(refusal(() => a.updateNetwork("a", "nobody", {}))).toMatchObject({ code: 404 });
  });
});
