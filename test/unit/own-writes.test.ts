import { OwnWrites } from "../../capabilities/reconcilers/own-writes";

describe("OwnWrites", () => {
  it("recognises the echoes of the last few writes of an object, and nothing else", () => {
    const w = new OwnWrites(2);
    w.record("ns/a", "10");
    w.record("ns/a", "11");
    w.record("ns/b", "12");
    expect(w.isEcho("ns/a", "10")).toBe(true);
    expect(w.isEcho("ns/a", "11")).toBe(true);
    expect(w.isEcho("ns/a", "12")).toBe(false);
    expect(w.isEcho("ns/b", "12")).toBe(true);
    w.record("ns/a", "13");
    expect(w.isEcho("ns/a", "10")).toBe(false);
    expect(w.isEcho("ns/a", "13")).toBe(true);
  });

  it("ignores writes without a version and forgets objects that are gone", () => {
    const w = new OwnWrites();
    w.record("ns/a", undefined);
    expect(w.size).toBe(0);
    expect(w.isEcho("ns/a", undefined)).toBe(false);
    w.record("ns/a", "1");
    w.forget("ns/a");
    expect(w.isEcho("ns/a", "1")).toBe(false);
  });
});
