import { randomBytes } from "node:crypto";
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { Sandbox } from "e2b";
import { PoddControl } from "../../gateway/podd-control";
import type { PodBox } from "../../capabilities/api/kinds";
import { Kube, ROOT } from "../../hack/lib/kube";
import { realTenant } from "../../hack/lib/tenant";
import { poolReadiness } from "../lib/pools";
import { results } from "../lib/results";
import { now, sleep, stats, tenths } from "../lib/stats";

const GATEWAY = `http://127.0.0.1:${process.env.CUBEPOD_GATEWAY_PORT ?? 8080}`;
/** Creates per turn; the turns alternate isolated and open. */
const CREATES = 5;
const TURNS = 4;
/** Commands run in each sandbox. */
const COMMANDS = 20;
const SIGNATURES = 2000;
const SETTLE_MS = 3000;

/** Enforcing NetworkPolicy on the real node, or not (kube-router's policy controller). */
const policies = (on: boolean) =>
  execFileSync(
    "bash",
    [join(ROOT, "hack", "cluster", "real-node.sh"), "policies", on ? "on" : "off"],
    {
      stdio: "ignore",
    },
  );

/**
 * A sandbox's isolation against the same run without it, on the real node through the gateway
 * and the E2B SDK: warm creates (`Sandbox.create`, a standby claimed and its podd initialised)
 * and command round trips (`commands.run("true")`, once the pool is full and quiet again), in turns with kube-router enforcing the
 * NetworkPolicies and with it stopped and its rules removed. podd's control credential cannot be
 * switched off (a daemon that could skip it would be the hole it closes): its cost is the
 * gateway's signature, timed here, and podd's check, which verifies a credential once per Pod and
 * then compares it.
 */
export async function benchSandbox(kube: Kube) {
  const { ns, key } = await realTenant(kube, {
    prefix: "bench-sandbox",
    template: "real",
    replicas: 2,
  });
  const standbys = poolReadiness(kube, ns, "real");
  const opts = { apiKey: key, apiUrl: GATEWAY, sandboxUrl: GATEWAY, domain: "cubepod.localhost" };
  const m = {
    isolated: { create: [] as number[], command: [] as number[] },
    open: { create: [] as number[], command: [] as number[] },
  };

  try {
    for (let turn = 0; turn < TURNS; turn++) {
      const isolated = turn % 2 === 0;
      policies(isolated);
      const into = isolated ? m.isolated : m.open;
      for (let i = 0; i < CREATES; i++) {
        await standbys.atLeast(2);
        const t0 = now();
        const sbx = await Sandbox.create("real", opts);
        into.create.push(now() - t0);
        // Commands once the pool has replaced its standby and the policy controller has synced
        // what that changed: its syncs take the CPUs a command would wait for.
        await standbys.atLeast(2);
        await sleep(SETTLE_MS);
        for (let c = 0; c < COMMANDS; c++) {
          const t1 = now();
          await sbx.commands.run("true");
          into.command.push(now() - t1);
        }
        await sbx.kill();
      }
    }
  } finally {
    policies(true);
    standbys.stop();
  }

  const control = new PoddControl(key);
  const box = { metadata: { uid: randomBytes(16).toString("hex") } } as PodBox;
  const signature: number[] = [];
  for (let i = 0; i < SIGNATURES; i++) {
    box.status = { podUID: randomBytes(16).toString("hex") } as PodBox["status"];
    const t0 = now();
    control.credential(box);
    signature.push(now() - t0);
  }
  await kube.delete(`/api/v1/namespaces/${ns}`);

  const isolated = { create: stats(m.isolated.create), command: stats(m.isolated.command) };
  const open = { create: stats(m.open.create), command: stats(m.open.command) };
  results.sandbox = {
    what:
      'real node through the gateway and the E2B SDK: warm Sandbox.create and commands.run("true") ' +
      "with the NetworkPolicies enforced (kube-router) and without, in alternating turns (ms); " +
      "the gateway's signature of a new control credential (µs)",
    isolated,
    open,
    addedToCreateP50: tenths(isolated.create.p50 - open.create.p50),
    addedToCommandP50: tenths(isolated.command.p50 - open.command.p50),
    credentialSignatureMicrosP50: tenths(stats(signature).p50 * 1000),
  };
}
