import { execFileSync } from "node:child_process";
import { Agent, request } from "node:http";
import { join } from "node:path";
import { Sandbox } from "e2b";
import { accessToken } from "../../gateway/e2b";
import { CONTROL_HEADER, PoddControl } from "../../gateway/podd-control";
import type { PodBox } from "../../capabilities/api/kinds";
import { CACHE_DIR, Kube, paths, ROOT } from "../../testkit/kube";
import { connectFrame, localTokenKey } from "../../testkit/podd-client";
import { realTenant } from "../../testkit/tenant";
import { results } from "../lib/results";
import { sdkOptions } from "../lib/sdk";
import { hundredths, now, stats, tenths } from "../lib/stats";

const GATEWAY_PORT = Number(process.env.CUBEPOD_GATEWAY_PORT ?? 8080);
const ENVD_PORT = 49983;
/** Round trips per route, alternating between them. */
const ROUND_TRIPS = 200;
const SMALL_FILES = 50;
const LARGE_FILES = 3;
const LARGE_MIB = 100;
const LIST_ENTRIES = 10_000;
const LISTS = 5;
const AT_ONCE = 100;
const BURSTS = 3;
/** Iterations of each side of podd's Go benchmark. */
const GO_ITERATIONS = 2000;

/**
 * `commands.run("true")` as the SDK sends it (a Connect JSON Start of `/bin/bash -l -c true`),
 * to a host and port on one kept-alive connection, read to its end event. The same request goes
 * through the gateway (which finds the sandbox by the SDK's headers and adds podd's credential)
 * and straight to the Pod IP (with the credential the gateway would add), so that the difference
 * is the gateway's alone.
 */
function startTrue(
  agent: Agent,
  host: string,
  port: number,
  headers: Record<string, string>,
): Promise<number> {
  const body = connectFrame({
    process: { cmd: "/bin/bash", args: ["-l", "-c", "true"], envs: {} },
  });
  return new Promise((resolve, reject) => {
    const t0 = now();
    const req = request(
      {
        host,
        port,
        path: "/process.Process/Start",
        method: "POST",
        agent,
        headers: {
          ...headers,
          "Content-Type": "application/connect+json",
          "Connect-Protocol-Version": "1",
          "Content-Length": body.length,
        },
      },
      res => {
        let seen = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => (seen += chunk));
        res.on("end", () => {
          if (res.statusCode !== 200 || !seen.includes('"end"')) {
            reject(new Error(`Start via ${host}:${port}: ${res.statusCode} ${seen.slice(0, 300)}`));
          } else resolve(now() - t0);
        });
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

/** ns/op of each side of podd's Go benchmark (podd/daemon/bench_test.go), in ms. */
function goRoundTrips(): { podd: number; bare: number } {
  const out = execFileSync(
    "go",
    [
      "test",
      "-run",
      "^$",
      "-bench",
      "CommandRoundTrip",
      "-benchtime",
      `${GO_ITERATIONS}x`,
      "-count",
      "3",
      "./daemon",
    ],
    {
      cwd: join(ROOT, "podd"),
      encoding: "utf8",
      env: {
        ...process.env,
        GOWORK: "off",
        GOTOOLCHAIN: "local",
        CGO_ENABLED: "0",
        GOFLAGS: "-buildvcs=false",
        GOMODCACHE: join(CACHE_DIR, "go", "mod"),
        GOCACHE: join(CACHE_DIR, "go", "build"),
      },
    },
  );
  const side = (name: string) => {
    const runs = [
      ...out.matchAll(new RegExp(`CommandRoundTrip/${name}\\S*\\s+\\d+\\s+(\\d+) ns/op`, "g")),
    ];
    if (runs.length === 0) throw new Error(`no ${name} figure in:\n${out}`);
    const ns = runs.map(r => Number(r[1])).sort((a, b) => a - b);
    return ns[Math.floor(ns.length / 2)] / 1e6;
  };
  return { podd: side("podd"), bare: side("bare") };
}

/**
 * podd as an agent uses it, on the real node through the gateway and E2B's SDK: a command round
 * trip through the gateway against the same request straight to the Pod IP; files of 1 KiB and
 * 100 MiB written and read; a directory of 10,000 entries listed; 100 commands at once; and
 * podd's own round trip against the least Go handler doing the same work (Go's benchmark).
 */
export async function benchEnvd(kube: Kube) {
  const { ns, key } = await realTenant(kube, {
    prefix: "bench-envd",
    template: "real",
    replicas: 1,
    size: "512Mi",
  });
  const opts = sdkOptions(key);
  const sbx = await Sandbox.create("real", { ...opts, timeoutMs: 3_600_000 });
  try {
    const box = (await kube.get(paths.podboxes(ns, sbx.sandboxId))).body as PodBox;
    const tokenKey = localTokenKey();
    const token = accessToken(tokenKey, box);
    const credential = new PoddControl(tokenKey).credential(box);
    if (!credential || !box.status?.podIP) throw new Error(`box names no Pod: ${box.status}`);
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const viaGateway = () =>
      startTrue(agent, "127.0.0.1", GATEWAY_PORT, {
        "E2b-Sandbox-Id": sbx.sandboxId,
        "E2b-Sandbox-Port": String(ENVD_PORT),
        "X-Access-Token": token,
      });
    const direct = () =>
      startTrue(agent, box.status!.podIP!, ENVD_PORT, {
        [CONTROL_HEADER]: credential,
        "X-Access-Token": token,
      });
    const gateway: number[] = [];
    const straight: number[] = [];
    const sdk: number[] = [];
    for (let i = 0; i < 10; i++) await Promise.all([viaGateway(), direct()]);
    for (let i = 0; i < ROUND_TRIPS; i++) {
      // Each first in turn, so that neither always follows the other.
      if (i % 2 === 0) {
        gateway.push(await viaGateway());
        straight.push(await direct());
      } else {
        straight.push(await direct());
        gateway.push(await viaGateway());
      }
      const t0 = now();
      await sbx.commands.run("true");
      sdk.push(now() - t0);
    }
    agent.destroy();

    const small = Buffer.alloc(1024, "a");
    const large = Buffer.alloc(LARGE_MIB << 20, "b");
    const timed = async (n: number, f: (i: number) => Promise<unknown>) => {
      const ms: number[] = [];
      for (let i = 0; i < n; i++) {
        const t0 = now();
        await f(i);
        ms.push(now() - t0);
      }
      return ms;
    };
    const smallWrite = await timed(SMALL_FILES, i => sbx.files.write(`small-${i}`, small));
    const smallRead = await timed(SMALL_FILES, i => sbx.files.read(`small-${i}`));
    const largeWrite = await timed(LARGE_FILES, () => sbx.files.write("large", large));
    const largeRead = await timed(LARGE_FILES, async () => {
      const bytes = await sbx.files.read("large", { format: "bytes" });
      if (bytes.length !== large.length) throw new Error(`read ${bytes.length} bytes`);
    });

    await sbx.commands.run(`mkdir many && cd many && seq 1 ${LIST_ENTRIES} | xargs touch`);
    const list = await timed(LISTS, async () => {
      const entries = await sbx.files.list("many");
      if (entries.length !== LIST_ENTRIES) throw new Error(`listed ${entries.length}`);
    });

    const bursts: number[] = [];
    const each: number[] = [];
    for (let b = 0; b < BURSTS; b++) {
      const t0 = now();
      await Promise.all(
        Array.from({ length: AT_ONCE }, async () => {
          const t1 = now();
          await sbx.commands.run("true");
          each.push(now() - t1);
        }),
      );
      bursts.push(now() - t0);
    }

    const go = goRoundTrips();
    const mibps = (ms: number[]) => tenths(LARGE_MIB / (stats(ms).p50 / 1000));
    const g = stats(gateway);
    const d = stats(straight);
    results.envd = {
      what:
        'real node, one sandbox of the Debian image: commands.run("true")\'s request through the gateway ' +
        "against the same request to the Pod IP (alternating), and the SDK's own commands.run; " +
        "files.write and files.read of 1 KiB and 100 MiB; files.list of 10,000 entries; 100 " +
        "commands.run at once; podd's command round trip against the least Go handler doing the " +
        "same work, from Go's benchmark on the same machine (ms)",
      commandViaGateway: g,
      commandToPodIP: d,
      addedByGatewayP50: tenths(g.p50 - d.p50),
      sdkCommandRun: stats(sdk),
      write1KiB: stats(smallWrite),
      read1KiB: stats(smallRead),
      write100MiB: stats(largeWrite),
      read100MiB: stats(largeRead),
      write100MiBMiBPerS: mibps(largeWrite),
      read100MiBMiBPerS: mibps(largeRead),
      list10000: stats(list),
      hundredAtOnce: stats(bursts),
      hundredAtOnceEach: stats(each),
      goRoundTrip: { podd: hundredths(go.podd), bare: hundredths(go.bare) },
      poddOverBareGoHandler: hundredths(go.podd / go.bare),
    };
  } finally {
    await sbx.kill().catch(() => undefined);
    await kube.delete(`/api/v1/namespaces/${ns}`);
  }
}
