import type { PodBox } from "../../../../capabilities/api/kinds";
import { SandboxesApi } from "../../../../gateway/control/sandboxes";
import { SandboxStarter } from "../../../../gateway/control/start";
import { ALL_TRAFFIC } from "../../../../capabilities/api/egress-rules";
import type { ApiClient } from "../../../../capabilities/client/api-client";
import { EGRESS_CONDITION } from "../../../../capabilities/network/egress-agent";
import {
  ApiError,
  invalidBody,
  networkSpec,
  newSandboxSchema,
  sandbox,
} from "../../../../gateway/e2b";
import { box, controlContext, controlContextWith } from "./fixtures";

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
  const refusal = async (f: () => unknown) => {
    try {
      await f();
    } catch (e) {
      return { code: (e as ApiError).code, message: (e as Error).message };
    }
    throw new Error("not refused");
  };

  it("without the node egress agent: private ports, a masked Host, no internet access", async () => {
    expect(
      networkSpec(
        { network: { allowPublicTraffic: false, maskRequestHost: "app:${PORT}" } },
        false,
      ),
    ).toEqual({
      network: { allowPublicTraffic: false, maskRequestHost: "app:${PORT}" },
    });
    // E2B's defaults leave nothing on the box; denyOut of all traffic is no internet access.
    expect(
      networkSpec({ allow_internet_access: true, network: { allowPublicTraffic: true } }, false),
    ).toEqual({});
    expect(networkSpec({ network: { denyOut: [ALL_TRAFFIC] } }, false)).toEqual({ egress: "None" });
    expect(networkSpec({ allow_internet_access: false }, false)).toEqual({ egress: "None" });
    // Any other rule would need the agent: refused, never ignored.
    for (const network of [
      { allowOut: ["198.19.0.10"], denyOut: [ALL_TRAFFIC] },
      { denyOut: ["198.19.0.0/24"] },
    ]) {
      expect(await refusal(() => networkSpec({ network }, false))).toEqual({
        code: 400,
        message: expect.stringContaining("the node egress agent, which this cluster does not run"),
      });
    }
  });

  it("with the node egress agent: allowOut and denyOut on the box, as E2B's API makes them", () => {
    expect(
      networkSpec({ network: { allowOut: ["a.test"], denyOut: [ALL_TRAFFIC] } }, true),
    ).toEqual({ network: { allowOut: ["a.test"], denyOut: [ALL_TRAFFIC] } });
    // No internet access denies all traffic, whatever denyOut said; allowOut still allows.
    expect(
      networkSpec(
        { allow_internet_access: false, network: { allowOut: ["1.2.3.4"], denyOut: ["5.6.7.8"] } },
        true,
      ),
    ).toEqual({ network: { allowOut: ["1.2.3.4"], denyOut: [ALL_TRAFFIC] } });
    expect(networkSpec({ allow_internet_access: true }, true)).toEqual({});
    expect(networkSpec({ network: { allowPublicTraffic: false, denyOut: [] } }, true)).toEqual({
      network: { allowPublicTraffic: false, denyOut: [] },
    });
  });

  it("refuses every field and value it does not enforce, naming it, and accepts empty ones", () => {
    const parse = (network: unknown) => newSandboxSchema.safeParse({ templateID: "base", network });
    for (const [network, named] of [
      [{ rules: { "example.com": [] } }, "network.rules: not enforced"],
      [{ egressProxy: { address: "p:1080" } }, "network.egressProxy: not enforced"],
      [{ httpsPorts: [8443] }, "network.httpsPorts: not enforced"],
      [{ whatever: true }, "network.whatever: not a field of E2B's network"],
      [{ maskRequestHost: "bad host" }, "network.maskRequestHost: must be host[:port]"],
      [{ denyOut: ["example.com"] }, "network.denyOut.0: invalid denied CIDR example.com"],
      [{ allowOut: ["a.test"] }, "you must include 'ALL_TRAFFIC'"],
      [{ allowOut: ["2001:db8::1"] }, "only IPv4"],
      [
        { allowOut: ["not a name"], denyOut: [ALL_TRAFFIC] },
        "not an IPv4 address, a CIDR or a domain",
      ],
      [{ denyOut: ["0.0.0.0/8"] }, "an unspecified address matches nothing"],
    ] as const) {
      const r = parse(network);
      expect(r.success).toBe(false);
      expect(invalidBody(r.error!).message).toContain(named);
    }
    expect(parse({ allowOut: [], denyOut: null, rules: null, egressProxy: null }).success).toBe(
      true,
    );
    expect(parse({ allowOut: ["*.a.test", "198.19.0.0/24"], denyOut: [ALL_TRAFFIC] }).success).toBe(
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

  it("without the agent, updates a sandbox's network only to what it has", async () => {
    const online = box("online", { status: { phase: "Running" } as PodBox["status"] });
    const offline = box("offline", {
      spec: { egress: "None" } as PodBox["spec"],
      status: { phase: "Running" } as PodBox["status"],
    });
    const a = api(online, offline);
    expect(await a.updateNetwork("a", "online", {})).toEqual({ status: 204 });
    expect(await a.updateNetwork("a", "offline", { denyOut: [ALL_TRAFFIC] })).toEqual({
      status: 204,
    });
    expect(await a.updateNetwork("a", "offline", { allow_internet_access: false })).toEqual({
      status: 204,
    });
    expect(
      await refusal(() => a.updateNetwork("a", "online", { allow_internet_access: false })),
    ).toEqual({
      code: 400,
      message: expect.stringContaining("started with internet access, which CubePod cannot change"),
    });
    expect(await refusal(() => a.updateNetwork("a", "offline", {}))).toMatchObject({ code: 400 });
    expect(
      await refusal(() =>
        a.updateNetwork("a", "online", { allowOut: ["1.2.3.4"], denyOut: [ALL_TRAFFIC] }),
      ),
    ).toEqual({
      code: 400,
      message: expect.stringContaining("allowOut: enforced by the node egress agent"),
    });
    expect(await refusal(() => a.updateNetwork("a", "online", { maskRequestHost: "x" }))).toEqual({
      code: 400,
      message: expect.stringContaining("maskRequestHost: set at create only"),
    });
    expect(await refusal(() => a.updateNetwork("a", "nobody", {}))).toMatchObject({ code: 404 });
  });

  describe("with the agent, PUT /network", () => {
    const running = (name: string, extra: Partial<PodBox> = {}) =>
      box(name, {
        metadata: { name, namespace: "a", uid: `uid-${name}`, generation: 1 },
        status: {
          phase: "Running",
          podIP: "198.18.0.9",
          poddURL: "http://198.18.0.9:49983",
          podUID: "pod",
          observedGeneration: 1,
        },
        ...extra,
      } as Partial<PodBox>);
    const setUp = (b: PodBox) => {
      const patches: unknown[] = [];
      const client = {
        mergePatch: async (_path: string, body: { spec: PodBox["spec"] }) => {
          patches.push(body);
          return { ...b, metadata: { ...b.metadata, generation: 2 }, spec: body.spec };
        },
      } as unknown as ApiClient;
      const context = controlContextWith({ CUBEPOD_GATEWAY_EGRESS_AGENT: "enabled" }, client, b);
      return { api: new SandboxesApi(context, new SandboxStarter(context)), context, patches };
    };
    const rules = { network: { allowOut: [], denyOut: ["198.19.0.11"] } };
    const enforced = (b: PodBox, generation: number, reason = "Enforced") =>
      ({
        ...b,
        metadata: { ...b.metadata, generation },
        spec: rules,
        status: {
          ...b.status,
          observedGeneration: generation,
          conditions: [
            {
              type: EGRESS_CONDITION,
              status: reason === "Enforced" ? "True" : "False",
              reason,
              message: reason === "Enforced" ? "enforced" : "the agent refused: bad",
              observedGeneration: generation,
              lastTransitionTime: "2026-12-07T00:00:00Z",
            },
          ],
        },
      }) as unknown as PodBox;

    it("replaces the box's rules and answers once its node enforces them", async () => {
      const b = running("s");
      const { api, context, patches } = setUp(b);
      let answered = false;
      const answer = api
        .updateNetwork("a", "s", { denyOut: ["198.19.0.11"], allow_internet_access: null })
        .then(a => ((answered = true), a));
      await new Promise(r => setImmediate(r));
      expect(patches).toEqual([{ spec: { network: { allowOut: [], denyOut: ["198.19.0.11"] } } }]);
      // The operator has seen the new generation, but the node does not enforce it yet.
      context.boxes.observe(
        { ...enforced(b, 2), status: { ...b.status, observedGeneration: 2 } },
        false,
      );
      await new Promise(r => setImmediate(r));
      expect(answered).toBe(false);
      context.boxes.observe(enforced(b, 2), false);
      expect(await answer).toEqual({ status: 204 });
    });

    it("says why when the node's agent refused the rules", async () => {
      const b = running("s");
      const { api, context } = setUp(b);
      const answer = refusal(() => api.updateNetwork("a", "s", { denyOut: [ALL_TRAFFIC] }));
      await new Promise(r => setImmediate(r));
      context.boxes.observe(enforced(b, 2, "RefusedByAgent"), false);
      expect(await answer).toEqual({ code: 500, message: expect.stringContaining("refused: bad") });
    });

    it("leaves a paused sandbox's rules for its resume, and refuses a sandbox of egress None", async () => {
      const paused = box("p", { spec: { desiredState: "Paused" } as PodBox["spec"] });
      const { api: a, patches } = setUp(paused);
      expect(
        await a.updateNetwork("a", "p", { allowOut: ["a.test"], denyOut: [ALL_TRAFFIC] }),
      ).toEqual({
        status: 204,
      });
      expect(patches).toEqual([
        { spec: { network: { allowOut: ["a.test"], denyOut: [ALL_TRAFFIC] } } },
      ]);
      const offline = running("o", { spec: { egress: "None" } as PodBox["spec"] });
      expect(await refusal(() => setUp(offline).api.updateNetwork("a", "o", {}))).toEqual({
        code: 400,
        message: expect.stringContaining("no internet access (egress: None)"),
      });
    });
  });
});
