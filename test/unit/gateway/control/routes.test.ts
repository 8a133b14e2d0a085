import { findRoute, type Call, type ControlApi } from "../../../../gateway/control/routes";

/** The handler a request reaches, and what it is given, through an API that records its calls. */
function reached(method: string, path: string) {
  const found = findRoute(method, path);
  if (!found?.route) return found && { name: found.name, invalid: found.invalid?.message };
  let call: string[] = [];
  const record =
    (resource: string) =>
    (_: unknown, handler: string | symbol) =>
    (...args: unknown[]) => {
      call = [`${resource}.${String(handler)}`, ...args.map(a => String(a))];
      return { status: 200 };
    };
  const api = Object.fromEntries(
    ["sandboxes", "snapshots", "metrics"].map(r => [r, new Proxy({}, { get: record(r) })]),
  ) as unknown as ControlApi;
  const given: Call = {
    ns: "a",
    id: found.id,
    body: "body",
    query: new URLSearchParams("q=1"),
    v2: found.v2,
  };
  void found.route.handle(api, given);
  return { name: found.name, call };
}

describe("the control API's routes", () => {
  it.each([
    ["GET", "/sandboxes", "list", ["sandboxes.list", "a", "q=1", "false"]],
    ["GET", "/v2/sandboxes", "list", ["sandboxes.list", "a", "q=1", "true"]],
    ["POST", "/sandboxes", "create", ["sandboxes.create", "a", "body"]],
    ["POST", "/v2/sandboxes/", "create", ["sandboxes.create", "a", "body"]],
    ["GET", "/sandboxes/abc", "info", ["sandboxes.info", "a", "abc"]],
    ["DELETE", "/sandboxes/abc-6532622b", "kill", ["sandboxes.kill", "a", "abc"]],
    ["POST", "/sandboxes/abc/connect", "connect", ["sandboxes.connect", "a", "abc", "body"]],
    ["POST", "/v2/sandboxes/abc/connect", "connect", ["sandboxes.connect", "a", "abc", "body"]],
    ["POST", "/sandboxes/abc/resume", "resume", ["sandboxes.connect", "a", "abc", "body"]],
    ["POST", "/sandboxes/abc/pause", "pause", ["sandboxes.pause", "a", "abc"]],
    ["POST", "/sandboxes/abc/timeout", "timeout", ["sandboxes.setTimeout", "a", "abc", "body"]],
    ["GET", "/sandboxes/abc/metrics", "metrics", ["metrics.ofSandbox", "a", "abc", "q=1"]],
    ["GET", "/sandboxes/metrics", "metrics", ["metrics.ofSandboxes", "a", "q=1"]],
    ["GET", "/v2/sandboxes/metrics", "metrics", ["metrics.ofSandboxes", "a", "q=1"]],
    ["POST", "/sandboxes/abc/fork", "fork", ["sandboxes.fork", "a", "abc", "body"]],
    ["POST", "/sandboxes/abc/snapshots", "snapshots", ["snapshots.create", "a", "abc", "body"]],
    ["GET", "/snapshots", "snapshots", ["snapshots.list", "a", "q=1"]],
    ["DELETE", "/templates/app%3Av1", "delete-template", ["snapshots.delete", "a", "app%3Av1"]],
  ])("sends %s %s to its handler, counted as %s", (method, path, name, call) => {
    expect(reached(method, path)).toEqual({ name, call });
  });

  it.each([
    ["GET", "/"],
    ["GET", "/v2"],
    ["GET", "/templates"],
    ["POST", "/snapshots"],
    ["GET", "/v2/snapshots"],
    ["GET", "/templates/app"],
    ["DELETE", "/v2/templates/app"],
    ["GET", "/sandboxes/abc/pause/now"],
  ])("answers %s %s 404 before reading its key", (method, path) => {
    expect(findRoute(method, path)).toBeUndefined();
  });

  it.each([
    ["PUT", "/sandboxes", "list"],
    ["DELETE", "/sandboxes", "list"],
    ["POST", "/sandboxes/abc", "info"],
    ["GET", "/sandboxes/abc/pause", "pause"],
    ["GET", "/sandboxes/abc/resume", "resume"],
    ["POST", "/sandboxes/abc/nothing", "unknown"],
  ])("checks the key of %s %s before its 404, counted as %s", (method, path, name) => {
    expect(reached(method, path)).toEqual({ name, invalid: undefined });
  });

  it.each([
    ["GET", "/sandboxes/A_B", '"A_B"'],
    ["POST", "/sandboxes/a_b/nothing", '"a_b"'],
  ])("refuses %s %s with a 400 naming its ID", (method, path, id) => {
    expect(findRoute(method, path)?.invalid?.message).toBe(
      `invalid sandbox ID ${id}: expected [a-z0-9]+`,
    );
    expect(findRoute(method, path)?.invalid?.code).toBe(400);
  });
});
