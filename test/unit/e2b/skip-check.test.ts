import {
  excused,
  jsNames,
  pyNames,
  type Seen,
  skipPattern,
  skipProblems,
} from "../../e2b/skip-check";

describe("skipPattern and jsNames", () => {
  it("gives no pattern for no names", () => {
    expect(skipPattern([])).toEqual([]);
  });

  it("leave out the same tests: a listed name, or a full name ending in one after a space", () => {
    const names = ["fork (count < 1) fails", "deny all"];
    const [flag, pattern] = skipPattern(names);
    expect(flag).toBe("-t");
    const cases: [string, boolean][] = [
      ["fork (count < 1) fails", true],
      ["fork tests fork (count < 1) fails", true],
      ["network deny all", true],
      ["network deny all traffic", false],
      ["network undeny all", false],
      ["fork (count < 1)XfailsX", false],
      ["fork (count . 1) fails", false],
      ["create", false],
    ];
    for (const [fullName, leftOut] of cases) {
      // Vitest runs a test whose full name matches -t (new RegExp, no flags).
      expect([fullName, !new RegExp(pattern).test(fullName)]).toEqual([fullName, leftOut]);
      expect([fullName, names.some(n => jsNames(fullName, n))]).toEqual([fullName, leftOut]);
    }
  });

  it("match a name that spans a describe's title and the test's", () => {
    expect(jsNames("network rules deny all", "rules deny all")).toBe(true);
    expect(jsNames("network rules deny all", "network rules")).toBe(false);
  });
});

describe("pyNames", () => {
  it("matches the function of that name, with any parameters or class", () => {
    expect(pyNames("tests/sync/test_x.py::test_a", "test_a")).toBe(true);
    expect(pyNames("tests/sync/test_x.py::test_a[1-2]", "test_a")).toBe(true);
    expect(pyNames("tests/sync/test_x.py::test_a[a::b]", "test_a")).toBe(true);
    expect(pyNames("tests/sync/test_x.py::TestX::test_a", "test_a")).toBe(true);
  });

  it("does not match a name it begins with, nor a module", () => {
    expect(pyNames("tests/sync/test_x.py::test_a_more", "test_a")).toBe(false);
    expect(pyNames("tests/sync/test_x.py::test_", "test_a")).toBe(false);
    expect(pyNames("tests/sync/test_x.py", "test_a")).toBe(false);
  });
});

describe("excused", () => {
  const sources: Record<string, string> = {
    "ran.ts": "test('a', ...)",
    "other.ts": "test('b', ...); test('a', ...)",
  };
  const has = (f: string, n: string) => sources[f].includes(`'${n}'`);

  it("excuses only names found in files not run and in none that ran", () => {
    expect(excused(["a", "b", "c"], ["ran.ts"], ["other.ts"], has)).toEqual(["b"]);
  });

  it("excuses nothing when every file ran", () => {
    expect(excused(["a", "b", "c"], ["ran.ts", "other.ts"], [], has)).toEqual([]);
  });
});

describe("skipProblems", () => {
  const seen = (...tests: [string, string][]): Seen[] =>
    tests.map(([name, status]) => ({ name, status }));

  it("finds none when exactly the listed tests were left out", () => {
    const tests = seen(
      ["create", "passed"],
      ["fork fails", "failed"],
      ["network deny all", "skipped"],
      ["snapshot deny all", "skipped"],
    );
    expect(skipProblems(["deny all"], tests, jsNames)).toEqual([]);
    expect(skipProblems([], seen(["create", "passed"]), jsNames)).toEqual([]);
  });

  it("names a listed name that matched no test, unless excused", () => {
    const tests = seen(["create", "passed"], ["deny all", "skipped"]);
    expect(skipProblems(["deny all", "gone"], tests, jsNames)).toEqual([
      '"gone" is listed, but no test of this run has that name',
    ]);
    expect(skipProblems(["deny all", "gone"], tests, jsNames, ["gone"])).toEqual([]);
  });

  it("names a listed test that ran", () => {
    const tests: Seen[] = [
      { name: "tests/x.py::TestX::test_a", status: "passed" },
      { name: "tests/x.py::test_a", status: "deselected" },
    ];
    expect(skipProblems(["test_a"], tests, pyNames)).toEqual([
      '"tests/x.py::TestX::test_a" ran (passed), though "test_a" is listed',
    ]);
  });

  it("names every test left out that no listed name matches, with its file and status", () => {
    const tests: Seen[] = [
      { name: "create", status: "skipped", file: "tests/create.test.ts" },
      { name: "later", status: "todo", file: "tests/create.test.ts" },
      { name: "cut", status: "pending", file: "tests/create.test.ts" },
      { name: "deny all", status: "skipped", file: "tests/network.test.ts" },
      { name: "tests/x.py::test_a_more", status: "deselected" },
    ];
    expect(skipProblems(["deny all"], tests, jsNames)).toEqual([
      'tests/create.test.ts: "create" was skipped, though no listed name matches it',
      'tests/create.test.ts: "later" was todo, though no listed name matches it',
      'tests/create.test.ts: "cut" was pending, though no listed name matches it',
      '"tests/x.py::test_a_more" was deselected, though no listed name matches it',
    ]);
  });
});
