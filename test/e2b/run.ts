/**
 * E2B's own SDK test suites (../shared/e2b-sdk-tests, E2B's files unedited) against the gateway
 * on the real node: the conformance tier.
 * Usage: tsx test/e2b/run.ts [js|py|all] [--tier all] [--only <part of a path>,...] [--py-sync]
 * [--runtime gvisor] (`--py-sync` leaves out Python's async files, which repeat the sync ones;
 * `--runtime` names the sandboxes' RuntimeClass, the real node's runc when not given).
 *
 * The files are copied at run time into a folder of the cache, where the only adaptations that
 * folder's README names are made (imports of E2B's source point at the published `e2b` package,
 * and the setup file that mocks a module only E2B's source has is left out). A test that cannot
 * pass on CubePod by design is skipped by name (skips.json), with the reason in docs/gateway.md;
 * a run that leaves out any other test, or has no test of a listed name, fails (skip-check.ts).
 * The tenant gets the template the suites name (`base`: the real node's Debian image) and a warm
 * pool sized for them. The suites run as an agent runs E2B's SDKs, given only E2B_DOMAIN and
 * E2B_API_KEY (E2B's standard setup, testkit/standard-setup.ts): a gateway on 443 of its own
 * address, the names resolved by a resolver started here, its CA trusted by the suites' processes.
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from "node:child_process";
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { CACHE_DIR, CLUSTER_DIR, Kube, KUBECONFIG, paths, ROOT } from "../../testkit/kube";
import {
  STANDARD_DOMAIN,
  STANDARD_GATEWAY_IP,
  standardGatewaySettings,
  startStandardSetup,
  underResolver,
} from "../../testkit/standard-setup";
import { realTenant } from "../../testkit/tenant";
import { excused, jsNames, pyNames, type Seen, skipPattern, skipProblems } from "./skip-check";

const SUITES = process.env.CUBEPOD_E2B_SDK_TESTS ?? join(ROOT, "..", "shared", "e2b-sdk-tests");
/** Where the setup's gateway serves /metrics and /healthz (its own address). */
const GATEWAY_METRICS_PORT = 18098;
/** The published SDK and the test runner the JS files were written for. */
const JS_PACKAGES = { e2b: "2.51.0", vitest: "4.1.10" };
/** Standbys kept for the suites: each test creates its own sandbox. */
const POOL = Number(process.env.CUBEPOD_E2B_POOL ?? 8);

/** The tests left out, by suite and name, each with the key of its reason (docs/gateway.md). */
type Skips = Record<"js" | "py", Record<string, string>>;
const skips = JSON.parse(readFileSync(join(__dirname, "skips.json"), "utf8")) as Skips;

/** The sandboxes' RuntimeClass: the real node's runc (none), or `gvisor`. */
const RUNTIME = flag("--runtime") ?? process.env.CUBEPOD_E2B_RUNTIME_CLASS ?? "";

/** The names of a suite's tests left out under this run's runtime: `runc`'s only under runc. */
const skipped = (suite: "js" | "py") =>
  Object.entries(skips[suite])
    .filter(([, reason]) => reason !== "runc" || RUNTIME !== "gvisor")
    .map(([name]) => name);

/**
 * Files the shared lists leave out that CubePod runs too, as `core`: E2B's network tests. Those
 * that reach the public internet or need a template CubePod lacks are left out by name
 * (skips.json, `internet` and `egress`).
 */
const MORE: Record<string, string[]> = {
  "selected-js.txt": ["tests/sandbox/network.test.ts"],
  "selected-py.txt": [
    "tests/sync/sandbox_sync/test_network.py",
    "tests/async/sandbox_async/test_network.py",
  ],
};

/**
 * The files of a selection list (`<tier> <path>`), in its order, and CubePod's own; `restrict`:
 * only those `--only` names, if given.
 */
function selected(list: string, all: boolean, restrict = true): string[] {
  const only = restrict ? flag("--only")?.split(",") : undefined;
  return readFileSync(join(SUITES, list), "utf8")
    .split("\n")
    .concat((MORE[list] ?? []).map(path => `core ${path}`))
    .map(l => l.trim())
    .filter(l => l && !l.startsWith("#"))
    .map(l => l.split(/\s+/))
    .filter(([tier]) => tier === "core" || all)
    .map(([, path]) => path)
    .filter(path => !only || only.some(part => path.includes(part)));
}

/** The value after a command-line flag, if given. */
function flag(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

/** A tenant for the suites: its API key, the `base` template and a pool of standbys. */
async function tenant(kube: Kube): Promise<{ ns: string; key: string }> {
  const t = await realTenant(kube, {
    prefix: "e2b-sdk",
    template: "base",
    replicas: POOL,
    size: "1Gi",
    runtimeClassName: RUNTIME,
    // Standbys start on clones of one rootfs filled from the image, as the `real` sample's do:
    // no standby fills its root, and the pool keeps up with the suites' bursts.
    seed: true,
  });
  await kube.waitFor(
    paths.podwarmpools(t.ns, "base"),
    o => o?.status?.readyReplicas >= POOL,
    600_000,
  );
  return t;
}

/**
 * The SDKs' settings in E2B's standard setup: the domain and the key, nothing else (no
 * `E2B_API_URL`, `E2B_SANDBOX_URL` or `E2B_DEBUG`); `trust` names the setup's CA as the suite's
 * runtime reads it.
 */
function sdkEnv(key: string, trust: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    E2B_API_KEY: key,
    E2B_DOMAIN: STANDARD_DOMAIN,
    ...trust,
  };
  for (const v of ["E2B_DEBUG", "E2B_API_URL", "E2B_SANDBOX_URL", "HTTPS_PROXY", "https_proxy"]) {
    delete env[v];
  }
  return env;
}

/** The JSON reporter's report, as far as it is read here. */
type VitestReport = {
  numPassedTests: number;
  numFailedTests: number;
  numPendingTests: number;
  numTodoTests: number;
  testResults: {
    name: string;
    status: string;
    message?: string;
    assertionResults: { fullName: string; status: string }[];
  }[];
};

function runJs(key: string, all: boolean, setup: string): Outcome {
  const tools = join(CACHE_DIR, "e2b-sdk-js", Object.values(JS_PACKAGES).join("-"));
  if (!existsSync(join(tools, "node_modules", "vitest"))) {
    mkdirSync(tools, { recursive: true });
    writeFileSync(
      join(tools, "package.json"),
      JSON.stringify({ private: true, type: "module", dependencies: JS_PACKAGES }),
    );
    execFileSync("npm", ["install", "--no-audit", "--no-fund", "--ignore-scripts"], {
      cwd: tools,
      stdio: "inherit",
    });
  }
  const work = join(tools, "run");
  rmSync(work, { recursive: true, force: true });
  cpSync(join(SUITES, "packages", "js-sdk", "tests"), join(work, "tests"), { recursive: true });
  const tests = join(work, "tests");
  for (const f of readdirSync(tests, { recursive: true, encoding: "utf8" })
    .filter(f => /\.tsx?$/.test(f))
    .map(f => join(tests, f))) {
    const text = readFileSync(f, "utf8");
    // E2B's source, as the README says, is the published package here.
    const adapted = text.replace(/from '(\.\.\/)+src(\/[^']*)?'/g, "from 'e2b'");
    if (adapted !== text) writeFileSync(f, adapted);
  }
  const files = selected("selected-js.txt", all);
  writeFileSync(
    join(work, "vitest.config.mts"),
    `import { defineConfig } from 'vitest/config'
export default defineConfig({ test: { include: ${JSON.stringify(files)}, environment: 'node',
  globals: false, testTimeout: 60_000, hookTimeout: 60_000, isolate: true, fileParallelism: false,
  deps: { interopDefault: true } } })
`,
  );
  const report = join(work, "report.json");
  const names = skipped("js");
  const [file, args] = underResolver(setup, [
    join(tools, "node_modules", ".bin", "vitest"),
    "run",
    "--root",
    work,
    "--reporter=default",
    "--reporter=json",
    `--outputFile.json=${report}`,
    ...skipPattern(names),
  ]);
  const r = spawnSync(file, args, {
    cwd: work,
    env: {
      ...sdkEnv(key, { NODE_EXTRA_CA_CERTS: join(setup, "ca.crt") }),
      NODE_PATH: join(tools, "node_modules"),
    },
    stdio: "inherit",
  });
  if (!existsSync(report)) throw new Error(`vitest wrote no report (exit ${r.status})`);
  const json = JSON.parse(readFileSync(report, "utf8")) as VitestReport;
  const seen: Seen[] = json.testResults.flatMap(f =>
    f.assertionResults.map(t => ({
      name: t.fullName,
      status: t.status,
      file: relative(work, f.name),
    })),
  );
  // Whether a file has a test of a listed name (for a run of some files): its title, as written.
  const has = (f: string, name: string) =>
    existsSync(join(work, f)) && readFileSync(join(work, f), "utf8").includes(name);
  const notRun = selected("selected-js.txt", true, false).filter(f => !files.includes(f));
  return {
    passed: json.numPassedTests,
    failed: json.numFailedTests,
    skipped: json.numPendingTests + json.numTodoTests,
    problems: [
      ...skipProblems(names, seen, jsNames, excused(names, files, notRun, has)),
      // A file that fails outside its tests (an import, an afterAll) fails the run too.
      ...json.testResults
        .filter(f => f.status === "failed" && !f.assertionResults.some(t => t.status === "failed"))
        .map(f => `${relative(work, f.name)} failed outside its tests: ${f.message ?? ""}`),
    ],
  };
}

type Counts = { passed: number; failed: number; skipped: number };
/** A suite's counts, and how the tests it left out differ from those skips.json lists for it. */
type Outcome = Counts & { problems: string[] };

/** The junit report's totals. */
function junitCounts(xml: string): Counts {
  const suite = /<testsuite\b([^>]*)>/.exec(xml)?.[1] ?? "";
  const n = (a: string) => Number(new RegExp(`\\b${a}="(\\d+)"`).exec(suite)?.[1] ?? 0);
  const failed = n("failures") + n("errors");
  return { passed: n("tests") - failed - n("skipped"), failed, skipped: n("skipped") };
}

/**
 * A pytest plugin (`-p cubepod_outcomes`) that writes each test's outcome to `out` by node ID,
 * the deselected ones too: the junit report has only the tests that were run, and which ones
 * `--deselect` left out only pytest knows (it takes prefixes of node IDs).
 */
const outcomesPlugin = (out: string) => `import json

outcomes = {}


def pytest_deselected(items):
    for item in items:
        outcomes[item.nodeid] = "deselected"


def pytest_collectreport(report):
    # A module skipped as a whole as it is imported.
    if report.skipped:
        outcomes[report.nodeid] = "skipped"


def pytest_runtest_logreport(report):
    # Skipped (an xfail too) at any phase stays so; else a failure at any phase, or the call's pass.
    if outcomes.get(report.nodeid) != "skipped" and (report.when == "call" or not report.passed):
        outcomes[report.nodeid] = report.outcome


def pytest_sessionfinish(session):
    with open(${JSON.stringify(out)}, "w") as f:
        json.dump(outcomes, f)
`;

async function runPy(
  key: string,
  all: boolean,
  syncOnly: boolean,
  setup: string,
): Promise<Outcome> {
  const python = execFileSync("bash", [join(ROOT, "testkit", "python-e2b.sh")], {
    encoding: "utf8",
  }).trim();
  const work = join(CACHE_DIR, "e2b-sdk-py-run");
  rmSync(work, { recursive: true, force: true });
  cpSync(join(SUITES, "packages", "python-sdk"), work, { recursive: true });
  const files = selected("selected-py.txt", all).filter(f => !syncOnly || !f.includes("/async/"));
  // The SDK trusts its own CA bundle only: the setup's CA is added to it.
  const certifi = execFileSync(python, ["-m", "certifi"], { encoding: "utf8" }).trim();
  const bundle = join(work, "ca-bundle.pem");
  writeFileSync(
    bundle,
    readFileSync(certifi, "utf8") + readFileSync(join(setup, "ca.crt"), "utf8"),
  );
  const names = skipped("py");
  const report = join(work, "report.xml");
  const outcomes = join(work, "outcomes.json");
  const plugins = join(work, "cubepod-plugins");
  mkdirSync(plugins);
  writeFileSync(join(plugins, "cubepod_outcomes.py"), outcomesPlugin(outcomes));
  /** Whether a file defines a test function of a listed name (at any indentation). */
  let exit: number | null = null;
  const defines = (f: string, name: string) =>
    existsSync(join(work, f)) &&
    new RegExp(`^\\s*(async\\s+)?def ${name}\\(`, "m").test(readFileSync(join(work, f), "utf8"));
  {
    const env = {
      ...sdkEnv(key, { SSL_CERT_FILE: bundle }),
      PYTHONPATH: [plugins, process.env.PYTHONPATH].filter(Boolean).join(":"),
    };
    // By node ID, not `-k`, which matches parts of names and would leave out test_fork_by_id
    // with test_fork. `--deselect` takes a prefix of node IDs, though, and misses a method of a
    // class (`file::Class::name`): the check of the outcomes below tells.
    const deselect = files.flatMap(f =>
      names.filter(n => defines(f, n)).map(n => `--deselect=${f}::${n}`),
    );
    const args = [
      ...["-m", "pytest", ...files, "-p", "no:cacheprovider", "-p", "cubepod_outcomes"],
      ...[`--junitxml=${report}`, "-q", ...deselect],
    ];
    const [file, wrapped] = underResolver(setup, [python, ...args]);
    exit = await new Promise<number | null>((resolve, reject) => {
      const child = spawn(file, wrapped, { cwd: work, env, stdio: "inherit" });
      child.on("error", reject);
      child.on("exit", code => resolve(code));
    });
  }
  if (!existsSync(report)) throw new Error("pytest wrote no report");
  if (!existsSync(outcomes)) throw new Error("pytest wrote no outcomes (cubepod_outcomes)");
  const seen: Seen[] = Object.entries(
    JSON.parse(readFileSync(outcomes, "utf8")) as Record<string, string>,
  ).map(([name, status]) => ({ name, status }));
  const notRun = selected("selected-py.txt", true, false).filter(f => !files.includes(f));
  return {
    ...junitCounts(readFileSync(report, "utf8")),
    problems: [
      ...skipProblems(names, seen, pyNames, excused(names, files, notRun, defines)),
      // 0: all passed, 1: some failed (counted); anything else is pytest's own failure.
      ...(exit === 0 || exit === 1 ? [] : [`pytest ended with ${exit ?? "a signal"}`]),
    ],
  };
}

/**
 * The gateway of the setup: the local cluster's, from the source, on 80 and 443 of its own
 * address, with the cluster's token key (the module's public key is its).
 */
function startGateway(setup: string): ChildProcess {
  return spawn(join(ROOT, "node_modules", ".bin", "tsx"), [join(ROOT, "gateway", "main.ts")], {
    env: {
      ...process.env,
      KUBECONFIG,
      CUBEPOD_GATEWAY_TOKEN_KEY: readFileSync(
        join(CLUSTER_DIR, "gateway-token-key"),
        "utf8",
      ).trim(),
      ...standardGatewaySettings(setup, GATEWAY_METRICS_PORT),
    },
    stdio: ["ignore", "ignore", "inherit"],
    detached: true,
  });
}

/** Resolves once the setup's gateway answers. */
async function untilServing(gateway: ChildProcess): Promise<void> {
  for (let i = 0; i < 600 && gateway.exitCode === null; i++) {
    const up = await fetch(`http://${STANDARD_GATEWAY_IP}:80/sandboxes`).then(
      () => true,
      () => false,
    );
    if (up) return;
    await new Promise(r => setTimeout(r, 100));
  }
  throw new Error(`the setup's gateway did not answer on ${STANDARD_GATEWAY_IP}:80 (see above)`);
}

async function main() {
  const which = process.argv[2] ?? "js";
  const all = flag("--tier") === "all";
  if (!existsSync(join(SUITES, "README.md"))) {
    throw new Error(
      `E2B's SDK tests are not at ${SUITES}: the project reads them from ../shared/e2b-sdk-tests ` +
        "beside the clone; set CUBEPOD_E2B_SDK_TESTS to where they are",
    );
  }
  // The local cluster and the real node, as `npm run up` brings them (a running one is reused).
  execFileSync("bash", [join(ROOT, "local-cluster", "up.sh")], { stdio: "inherit" });
  const kube = new Kube();
  const { ns, key } = await tenant(kube);
  const setup = mkdtempSync(join(tmpdir(), "cubepod-e2b-setup-"));
  const resolver = startStandardSetup(setup);
  const gateway = startGateway(setup);
  const results: Record<string, Outcome> = {};
  try {
    await untilServing(gateway);
    if (which === "js" || which === "all") results.js = runJs(key, all, setup);
    if (which === "py" || which === "all") {
      results.py = await runPy(key, all, process.argv.includes("--py-sync"), setup);
    }
  } finally {
    if (gateway.exitCode === null) process.kill(-gateway.pid!, "SIGTERM");
    resolver.kill();
    await kube.delete(`/api/v1/namespaces/${ns}`);
  }
  console.log(JSON.stringify(results));
  // A run fails too when it did not leave out exactly the tests skips.json lists for it: a name
  // that matches nothing documents a gap that is not there (E2B renamed the test: it runs again),
  // and a test left out otherwise (a marker, a name matching more than meant) is a gap no one
  // documented.
  for (const [suite, r] of Object.entries(results)) {
    if (r.problems.length === 0) continue;
    console.error(
      `${suite}: the tests left out are not those skips.json lists for this run ` +
        `(runtime ${RUNTIME || "runc"}):\n${r.problems.map(p => `  - ${p}`).join("\n")}`,
    );
  }
  const failed = (r: Outcome) => r.failed > 0 || r.problems.length > 0;
  process.exit(Object.values(results).some(failed) ? 1 : 0);
}

main().catch(e => {
  console.error(e);
  process.exit(1);
});
