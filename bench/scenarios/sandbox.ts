import { randomBytes } from "node:crypto";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Sandbox } from "e2b";
import { PoddControl } from "../../gateway/podd-control";
import type { PodBox } from "../../capabilities/api/kinds";
import { Kube, ROOT } from "../../testkit/kube";
import { processCpuMs } from "../lib/process-cpu";
import { results } from "../lib/results";
import { sdkTenant } from "../lib/sdk";
import { now, sleep, stats, tenths } from "../lib/stats";

/** Creates per turn. */
const CREATES = 3;
/** Turns of enforced, enforced with the policy controller stopped, and open, in that order. */
const TURNS = 12;
/** Commands per round, on one sandbox; the rounds alternate isolated and open. */
const COMMANDS = 50;
const COMMAND_ROUNDS = 8;
const SIGNATURES = 2000;
const SETTLE_MS = 3000;

/** Enforcing NetworkPolicy on the real node, or not (kube-router's policy controller). */
const policies = (on: boolean) =>
  execFileSync(
    "bash",
    [join(ROOT, "local-cluster", "real-node.sh"), "policies", on ? "on" : "off"],
    {
      stdio: "ignore",
    },
  );

/** kube-router's pid, while it runs. */
export const policyControllerPid = () =>
  Number(readFileSync(join(ROOT, ".cluster", "pids", "kube-router.pid"), "utf8").trim());

/** CPU milliseconds kube-router has used (with its policy syncs' iptables), or 0 while stopped. */
function policyControllerCpuMs(): number {
  try {
    return processCpuMs(policyControllerPid());
  } catch {
    return 0;
  }
}

/**
 * A sandbox's isolation against the same run without it, on the real node through the gateway
 * and the E2B SDK: warm creates (`Sandbox.create`, a standby claimed and its podd initialised)
 * and command round trips (`commands.run("true")`) on one sandbox, in alternating turns with
 * kube-router enforcing the NetworkPolicies and with it stopped and its rules removed. podd's
 * control credential cannot be switched off (a daemon that could skip it would be the hole it
 * closes): its cost is the gateway's signature, timed here, and podd's check, which verifies a
 * credential once per Pod and then compares it.
 */
export async function benchSandbox(kube: Kube) {
  const { ns, key, opts, standbys } = await sdkTenant(kube, "bench-sandbox", 2);
  const m = {
    isolated: { create: [] as number[], command: [] as number[] },
    open: { create: [] as number[], command: [] as number[] },
  };
  /**
   * Creates with the policies enforced and kube-router stopped (SIGSTOP) for the create's
   * duration: its rules filter every packet, but none of its syncs runs.
   */
  const frozen: number[] = [];
  /** kube-router's CPU over each create and its pool's refill, ms. */
  const syncCpu: number[] = [];

  try {
    for (let turn = 0; turn < TURNS; turn++) {
      const arm = (["isolated", "frozen", "open"] as const)[turn % 3];
      policies(arm !== "open");
      for (let i = 0; i < CREATES; i++) {
        // Each create starts with the pool full and the policy controller done with it.
        await standbys.atLeast(2);
        await sleep(SETTLE_MS);
        const cpu0 = policyControllerCpuMs();
        if (arm === "frozen") process.kill(policyControllerPid(), "SIGSTOP");
        const t0 = now();
        const sbx = await Sandbox.create("real", opts).finally(() => {
          if (arm === "frozen") process.kill(policyControllerPid(), "SIGCONT");
        });
        const ms = now() - t0;
        (arm === "frozen" ? frozen : m[arm].create).push(ms);
        await standbys.atLeast(2);
        if (arm === "isolated") syncCpu.push(policyControllerCpuMs() - cpu0);
        await sbx.kill();
      }
    }
    // Commands on one sandbox, its Pod and policies unchanged, with its packets filtered and
    // not: once the pool is full and the policy controller has synced what the last change
    // made, since its syncs take the CPUs a command would wait for.
    const sbx = await Sandbox.create("real", { ...opts, timeoutMs: 900_000 });
    for (let round = 0; round < COMMAND_ROUNDS; round++) {
      const isolated = round % 2 === 0;
      policies(isolated);
      await standbys.atLeast(2);
      await sleep(SETTLE_MS);
      for (let c = 0; c < COMMANDS; c++) {
        const t1 = now();
        await sbx.commands.run("true");
        (isolated ? m.isolated : m.open).command.push(now() - t1);
      }
    }
    await sbx.kill();
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
    createWithoutSyncs: stats(frozen),
    addedToCreateWithoutSyncsP50: tenths(stats(frozen).p50 - open.create.p50),
    addedToCommandP50: tenths(isolated.command.p50 - open.command.p50),
    policyControllerCpuMsPerCreate: stats(syncCpu),
    credentialSignatureMicrosP50: tenths(stats(signature).p50 * 1000),
  };
}
