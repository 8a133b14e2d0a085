import { WaitingBoxes } from "../../../capabilities/box/waiting-boxes";

const TEMPLATE = { kind: "PodTemplate" as const, name: "python" };
const PARENT = { kind: "PodBox" as const, name: "parent" };

describe("WaitingBoxes", () => {
  it("wakes the boxes waiting for an object, in its namespace only", () => {
    const w = new WaitingBoxes();
    expect(w.waitFor("ns/a", "ns", [TEMPLATE], w.mark())).toBe(false);
    expect(w.waitFor("ns/b", "ns", [TEMPLATE, PARENT], w.mark())).toBe(false);
    expect(w.event("PodTemplate", "other", "python")).toEqual([]);
    expect(w.event("PodWarmPool", "ns", "python")).toEqual([]);
    expect(w.event("PodTemplate", "ns", "python").sort()).toEqual(["ns/a", "ns/b"]);
    expect(w.event("PodBox", "ns", "parent")).toEqual(["ns/b"]);
  });

  it("replaces what a box waits for, and forgets a box that waits for nothing", () => {
    const w = new WaitingBoxes();
    w.waitFor("ns/a", "ns", [TEMPLATE], w.mark());
    w.waitFor("ns/a", "ns", [PARENT], w.mark());
    expect(w.event("PodTemplate", "ns", "python")).toEqual([]);
    expect(w.event("PodBox", "ns", "parent")).toEqual(["ns/a"]);
    w.waitFor("ns/a", "ns", [], w.mark());
    expect(w.event("PodBox", "ns", "parent")).toEqual([]);
    w.waitFor("ns/a", "ns", [PARENT], w.mark());
    w.forget("ns/a");
    expect(w.event("PodBox", "ns", "parent")).toEqual([]);
  });

  it("says to look again when the object had an event while the box was being reconciled", () => {
    const w = new WaitingBoxes();
    const since = w.mark();
    w.event("PodTemplate", "ns", "unrelated");
    w.event("PodTemplate", "ns", "python");
    expect(w.waitFor("ns/a", "ns", [TEMPLATE], since)).toBe(true);
    // Not for an event that came before the reconcile began.
    expect(w.waitFor("ns/a", "ns", [TEMPLATE], w.mark())).toBe(false);
  });

  it("says to look again when more events came than it keeps", () => {
    const w = new WaitingBoxes(2);
    const since = w.mark();
    for (let i = 0; i < 3; i++) w.event("PodTemplate", "ns", `t${i}`);
    expect(w.waitFor("ns/a", "ns", [TEMPLATE], since)).toBe(true);
    const later = w.mark();
    w.event("PodTemplate", "ns", "t9");
    expect(w.waitFor("ns/a", "ns", [TEMPLATE], later)).toBe(false);
  });
});
