/**
 * Whether a run of E2B's suites (test/e2b/run.ts) left out exactly the tests skips.json lists for
 * it: no more (a marker in E2B's files, a pattern matching more than meant), no fewer (a name
 * that no longer matches, a test the runner's option misses). Pure, so that it is tested without
 * the suites.
 */

/** One test as a run reported it. */
export interface Seen {
  /** What the list's names are matched against: vitest's full name, or pytest's node ID. */
  name: string;
  /** `passed` or `failed` if it ran, else one of LEFT_OUT. */
  status: string;
  /** Its file, for the messages, when `name` does not hold it (vitest's full name does not). */
  file?: string;
}

/**
 * The statuses of a test that did not run: vitest's `skipped`, `todo` and `pending` (not run to
 * its end: the JSON reporter's name for a test with no result), pytest's `skipped` (an xfail too,
 * as its junit report has it) and `deselected`.
 */
export const LEFT_OUT = new Set(["skipped", "pending", "todo", "deselected"]);

/** Whether a reported test is the one the list names `name`, by the suite's rule. */
export type Names = (test: string, name: string) => boolean;

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/**
 * Vitest's -t pattern that leaves out the listed tests by name: vitest matches it against a
 * test's full name (its describes' titles and its own, joined by spaces), which must not end with
 * a listed name after a space (or be one). jsNames is the same rule.
 */
export const skipPattern = (names: string[]) =>
  names.length === 0 ? [] : ["-t", `^(?!(.* )?(${names.map(escape).join("|")})$).*$`];

/** A JS test the list names `name`: the rule of skipPattern, on the JSON report's full name. */
export const jsNames: Names = (fullName, name) =>
  new RegExp(`^(.* )?${escape(name)}$`).test(fullName);

/**
 * A Python test the list names `name`: the function of that name, with any parameters
 * (`path::test_x[param]`). run.ts leaves out a module's `def name(` by its node ID; pytest's
 * `--deselect` takes a prefix, so one that also left out `test_x_more` or missed a method of a
 * class shows here.
 */
export const pyNames: Names = (nodeId, name) => nodeId.split("[")[0].split("::").pop() === name;

/**
 * The listed names a run need not have matched: those found only in files of the selection it did
 * not run (`--only`, `--py-sync`, the tier), by `has` (a name found in the source of a file). A
 * name found in no file is not excused: it names a test E2B renamed or removed.
 */
export function excused(
  names: string[],
  ran: string[],
  notRun: string[],
  has: (file: string, name: string) => boolean,
): string[] {
  return names.filter(n => !ran.some(f => has(f, n)) && notRun.some(f => has(f, n)));
}

/**
 * What differs between the tests a run left out and those the list names, one line each: a name
 * no test matched (unless excused), a named test that ran, a test left out that no name matches.
 * None: the run left out exactly the listed tests.
 */
export function skipProblems(
  names: string[],
  seen: Seen[],
  matches: Names,
  excusedNames: string[] = [],
): string[] {
  const label = (t: Seen) => (t.file ? `${t.file}: ` : "") + JSON.stringify(t.name);
  const problems = names
    .filter(n => !excusedNames.includes(n) && !seen.some(t => matches(t.name, n)))
    .map(n => `${JSON.stringify(n)} is listed, but no test of this run has that name`);
  for (const t of seen) {
    const name = names.find(n => matches(t.name, n));
    const out = LEFT_OUT.has(t.status);
    if (name !== undefined && !out) {
      problems.push(`${label(t)} ran (${t.status}), though ${JSON.stringify(name)} is listed`);
    } else if (name === undefined && out) {
      problems.push(`${label(t)} was ${t.status}, though no listed name matches it`);
    }
  }
  return problems;
}
