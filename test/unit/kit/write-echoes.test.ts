import { WriteEchoes } from "../../../capabilities/kit/write-echoes";

describe("WriteEchoes", () => {
  it("recognises the echoes of the last few writes of an object, and nothing else", () => {
    const w = new WriteEchoes(2);
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
    const w = new WriteEchoes();
    w.record("ns/a", undefined);
    expect(w.isEcho("ns/a", undefined)).toBe(false);
    expect(w.isEcho("ns/a", "undefined")).toBe(false);
    w.record("ns/a", "1");
    w.forget("ns/a");
    expect(w.isEcho("ns/a", "1")).toBe(false);
  });
});

describe("WriteEchoes, with a write in flight", () => {
  const deferred = () => {
    let resolve!: (rv: string | undefined) => void;
    let reject!: (e: Error) => void;
    const promise = new Promise<string | undefined>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    return { promise, resolve, reject };
  };

  it("holds the events that arrive before the write answers, and drops its echo", async () => {
    const w = new WriteEchoes();
    const write = deferred();
    const done = w.during("ns/a", () => write.promise);
    const seen: string[] = [];
    w.unlessEcho("ns/a", "7", () => seen.push("7")); // the echo, ahead of the response
    w.unlessEcho("ns/a", "8", () => seen.push("8")); // somebody else's change
    w.unlessEcho("ns/b", "9", () => seen.push("9")); // another object: not held
    expect(seen).toEqual(["9"]);
    write.resolve("7");
    expect(await done).toBe("7");
    expect(seen).toEqual(["9", "8"]);
    w.unlessEcho("ns/a", "7", () => seen.push("7 again"));
    expect(seen).toEqual(["9", "8"]);
  });

  it("waits for every write in flight, and lets all held events go when a write fails", async () => {
    const w = new WriteEchoes();
    const first = deferred();
    const second = deferred();
    const a = w.during("ns/a", () => first.promise);
    const b = w.during("ns/a", () => second.promise);
    const seen: string[] = [];
    w.unlessEcho("ns/a", "5", () => seen.push("5"));
    first.resolve("4");
    await a;
    expect(seen).toEqual([]);
    second.reject(new Error("conflict"));
    await expect(b).rejects.toThrow("conflict");
    expect(seen).toEqual(["5"]);
  });
});
