import { sameJSON, statusPatch } from "../../../capabilities/kit/status-patch";

describe("statusPatch", () => {
  it("sends the new status, and null for every field the new one no longer has", () => {
    const before = { phase: "Running", podIP: "127.64.0.3", podName: "p", reason: "Started" };
    const after = { phase: "Paused", reason: "Paused" };
    expect(statusPatch(before, after)).toEqual({
      phase: "Paused",
      reason: "Paused",
      podIP: null,
      podName: null,
    });
  });

  it("clears nothing when nothing went", () => {
    expect(statusPatch({ phase: "Pending" }, { phase: "Running", podIP: "x" })).toEqual({
      phase: "Running",
      podIP: "x",
    });
  });
});

describe("sameJSON", () => {
  it("ignores key order, not values or array order", () => {
    expect(sameJSON({ a: 1, b: { c: [1, 2] } }, { b: { c: [1, 2] }, a: 1 })).toBe(true);
    expect(sameJSON({ a: 1 }, { a: 2 })).toBe(false);
    expect(sameJSON({ c: [1, 2] }, { c: [2, 1] })).toBe(false);
    expect(sameJSON({ a: 1 }, { a: 1, b: undefined })).toBe(true);
  });
});
