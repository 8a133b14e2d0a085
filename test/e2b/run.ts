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
 * pass on CubePod by design is skipped by name (skips.json), with the reason in docs/gateway.md.
 * The tenant gets the template the suites name (`base`: the real node's Debian image) and a warm
 * pool sized for them.
 */
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { createServer as createHttpServer } from "node:http";
import { connect as connectTcp, type AddressInfo } from "node:net";
import {
  cpSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { CACHE_DIR, CLUSTER_DIR, Kube, paths, ROOT } from "../../testkit/kube";
import { realTenant } from "../../testkit/tenant";

const SUITES = process.env.CUBEPOD_E2B_SDK_TESTS ?? join(ROOT, "..", "shared", "e2b-sdk-tests");
const GATEWAY = `http://127.0.0.1:${process.env.CUBEPOD_GATEWAY_PORT ?? 8080}`;
const GATEWAY_TLS_PORT = process.env.CUBEPOD_GATEWAY_TLS_PORT ?? "8443";
const DOMAIN = process.env.CUBEPOD_GATEWAY_DOMAIN ?? "cubepod.localhost";
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

/** The files of a selection list (`<tier> <path>`), in its order. */
function selected(list: string, all: boolean): string[] {
  const only = flag("--only")?.split(",");
  return readFileSync(join(SUITES, list), "utf8")
    .split("\n")
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
    size: "256Mi",
    runtimeClassName: RUNTIME,
    // E2B's tests keep files in the home directory and /tmp, not in /usr: without it on the
    // rootfs volume, a standby's first start copies a few MiB instead of the whole image, and
    // the pool keeps up with the suites' bursts. The real-node tier covers /usr.
    rootfsPaths: ["etc", "home", "opt", "root", "srv", "tmp", "var"],
  });
  await kube.waitFor(
    paths.podwarmpools(t.ns, "base"),
    o => o?.status?.readyReplicas >= POOL,
    600_000,
  );
  return t;
}

/**
 * The SDKs' settings, as the suites' README names them: the control API at the gateway's plain
 * port, and each sandbox at its own host, `https://<port>-<id>.<domain>`, as E2B serves them
 * (no `E2B_SANDBOX_URL`: a signed URL then names its sandbox). The cluster's CA is trusted.
 */
function sdkEnv(key: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    E2B_API_KEY: key,
    E2B_API_URL: GATEWAY,
    E2B_DOMAIN: DOMAIN,
    CUBEPOD_E2B_DOMAIN: DOMAIN,
    CUBEPOD_E2B_TLS_PORT: GATEWAY_TLS_PORT,
  };
  delete env.E2B_DEBUG;
  delete env.E2B_SANDBOX_URL;
  return env;
}

/** Vitest's -t pattern that leaves out the skipped tests by name (a full name ends with it). */
const skipPattern = (names: string[]) =>
  names.length === 0
    ? []
    : [
        "-t",
        `^(?!(.* )?(${names.map(n => n.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("|")})$).*$`,
      ];

function runJs(key: string, all: boolean): Counts {
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
  const files = selected("selected-js.txt", all).map(p => p.replace(/^tests\//, "tests/"));
  writeFileSync(
    join(work, "vitest.config.mts"),
    `import { defineConfig } from 'vitest/config'
export default defineConfig({ test: { include: ${JSON.stringify(files)}, environment: 'node',
  globals: false, testTimeout: 60_000, hookTimeout: 60_000, isolate: true, fileParallelism: false,
  deps: { interopDefault: true } } })
`,
  );
  const report = join(work, "report.json");
  const r = spawnSync(
    join(tools, "node_modules", ".bin", "vitest"),
    [
      "run",
      "--root",
      work,
      "--reporter=default",
      "--reporter=json",
      `--outputFile.json=${report}`,
      ...skipPattern(skipped("js")),
    ],
    {
      cwd: work,
      env: {
        ...sdkEnv(key),
        NODE_PATH: join(tools, "node_modules"),
        NODE_EXTRA_CA_CERTS: join(CLUSTER_DIR, "pki", "ca.crt"),
        // Sandboxes' hosts reach the gateway (sandbox-hosts.cjs).
        NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} --require ${join(__dirname, "sandbox-hosts.cjs")}`,
      },
      stdio: "inherit",
    },
  );
  if (!existsSync(report)) throw new Error(`vitest wrote no report (exit ${r.status})`);
  const json = JSON.parse(readFileSync(report, "utf8"));
  return {
    passed: json.numPassedTests,
    failed: json.numFailedTests,
    skipped: json.numPendingTests + json.numTodoTests,
  };
}

type Counts = { passed: number; failed: number; skipped: number };

/**
 * A CONNECT proxy for the Python suite: its SDK's HTTP client (Rust, with its own resolver) is
 * reached by nothing but `HTTPS_PROXY`. It tunnels `<host>.<domain>:443` to the gateway's HTTPS
 * port, where the TLS handshake names the sandbox's host, and refuses anything else.
 */
async function sandboxHostsProxy(): Promise<{ url: string; close: () => void }> {
  const proxy = createHttpServer((_, res) => res.writeHead(405).end("CONNECT only\n"));
  proxy.on("connect", (req, client, head) => {
    const [host, port] = (req.url ?? "").split(/:(?=\d+$)/);
    const ours = host === DOMAIN || host.toLowerCase().endsWith(`.${DOMAIN}`);
    if (!ours || port !== "443") return void client.end("HTTP/1.1 403 Forbidden\r\n\r\n");
    const upstream = connectTcp(Number(GATEWAY_TLS_PORT), "127.0.0.1", () => {
      client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
      if (head.length > 0) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    upstream.on("error", () => client.destroy());
    client.on("error", () => upstream.destroy());
  });
  await new Promise<void>(resolve => proxy.listen(0, "127.0.0.1", resolve));
  const { port } = proxy.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, close: () => proxy.close() };
}

/** The junit report's totals. */
function junitCounts(xml: string): Counts {
  const suite = /<testsuite\b([^>]*)>/.exec(xml)?.[1] ?? "";
  const n = (a: string) => Number(new RegExp(`\\b${a}="(\\d+)"`).exec(suite)?.[1] ?? 0);
  const failed = n("failures") + n("errors");
  return { passed: n("tests") - failed - n("skipped"), failed, skipped: n("skipped") };
}

async function runPy(key: string, all: boolean, syncOnly: boolean): Promise<Counts> {
  const python = execFileSync("bash", [join(ROOT, "testkit", "python-e2b.sh")], {
    encoding: "utf8",
  }).trim();
  const work = join(CACHE_DIR, "e2b-sdk-py-run");
  rmSync(work, { recursive: true, force: true });
  cpSync(join(SUITES, "packages", "python-sdk"), work, { recursive: true });
  const files = selected("selected-py.txt", all).filter(f => !syncOnly || !f.includes("/async/"));
  // The SDK trusts its own CA bundle only: the cluster's CA is added to it.
  const certifi = execFileSync(python, ["-m", "certifi"], { encoding: "utf8" }).trim();
  const bundle = join(work, "ca-bundle.pem");
  writeFileSync(
    bundle,
    readFileSync(certifi, "utf8") + readFileSync(join(CLUSTER_DIR, "pki", "ca.crt"), "utf8"),
  );
  const names = skipped("py");
  const report = join(work, "report.xml");
  const proxy = await sandboxHostsProxy();
  try {
    const env: NodeJS.ProcessEnv = {
      ...sdkEnv(key),
      HTTPS_PROXY: proxy.url,
      SSL_CERT_FILE: bundle,
    };
    // The API is plain HTTP on loopback and goes direct; `localhost` must not be listed, or the
    // sandboxes' hosts under it would bypass the proxy too.
    env.NO_PROXY = "127.0.0.1,::1";
    delete env.no_proxy;
    // By node ID, exactly: `-k` matches parts of names, and would leave out test_fork_by_id too.
    const deselect = files.flatMap(f => {
      const source = readFileSync(join(work, f), "utf8");
      return names
        .filter(n => new RegExp(`^\\s*(async\\s+)?def ${n}\\(`, "m").test(source))
        .map(n => `--deselect=${f}::${n}`);
    });
    const args = [
      ...["-m", "pytest", ...files, "-p", "no:cacheprovider", `--junitxml=${report}`, "-q"],
      ...deselect,
    ];
    await new Promise<void>((resolve, reject) => {
      const child = spawn(python, args, { cwd: work, env, stdio: "inherit" });
      child.on("error", reject);
      child.on("exit", () => resolve());
    });
  } finally {
    proxy.close();
  }
  if (!existsSync(report)) throw new Error("pytest wrote no report");
  return junitCounts(readFileSync(report, "utf8"));
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
  const results: Record<string, Counts> = {};
  try {
    if (which === "js" || which === "all") results.js = runJs(key, all);
    if (which === "py" || which === "all") {
      results.py = await runPy(key, all, process.argv.includes("--py-sync"));
    }
  } finally {
    await kube.delete(`/api/v1/namespaces/${ns}`);
  }
  console.log(JSON.stringify(results));
  process.exit(Object.values(results).some(r => r.failed > 0) ? 1 : 0);
}

main().catch(e => {
  console.error(e);
  process.exit(1);
});
