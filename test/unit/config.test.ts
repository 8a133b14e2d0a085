import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import {
  ConfigError,
  DEFAULT_CLUSTER_NETWORKS,
  DEFAULT_VM_RUNTIME_CLASSES,
  loadConfig,
  SETTINGS,
} from "../../capabilities/config";

const problemsOf = (env: Record<string, string>) => {
  try {
    loadConfig(env);
  } catch (e) {
    if (e instanceof ConfigError) return e.problems;
    throw e;
  }
  return [];
};

describe("loadConfig", () => {
  it("gives every default when nothing is set", () => {
    expect(loadConfig({})).toEqual({
      reconcileConcurrency: 8,
      claimConcurrency: 16,
      replenish: { quietMs: 1000, maxDelayMs: 2000 },
      shards: { count: 1, leaseSeconds: 15, namespace: "pepr-system" },
      apiTimeoutMs: 65_000,
      events: { quietMs: 100, maxDelayMs: 5000 },
      claimFinish: { quietMs: 100, maxDelayMs: 15_000 },
      reaperIntervalSeconds: 10,
      metricsPort: 8081,
      metricsHost: "127.0.0.1",
      network: {
        gatewayNamespace: "pepr-system",
        clusterNetworks: DEFAULT_CLUSTER_NETWORKS,
        policyEnforced: false,
      },
      vmRuntimeClasses: DEFAULT_VM_RUNTIME_CLASSES,
      gvisorRuntimeClasses: ["gvisor"],
      defaultTemplatesNamespace: "cubepod-defaults",
      poddInjectorImage: "ghcr.io/cubeplex/podd-injector:0.1.0",
      failpoint: undefined,
    });
  });

  it("reads the network settings", () => {
    expect(
      loadConfig({
        CUBEPOD_CLUSTER_NETWORKS: "10.0.0.0/8, fd00::/8",
        CUBEPOD_GATEWAY_NAMESPACE: "gateways",
        CUBEPOD_NETWORK_POLICY: "enforced",
      }),
    ).toMatchObject({
      network: {
        gatewayNamespace: "gateways",
        clusterNetworks: ["10.0.0.0/8", "fd00::/8"],
        policyEnforced: true,
      },
    });
  });

  it.each([
    [
      "CUBEPOD_CLUSTER_NETWORKS",
      "10.0.0.0/8,10.1.2.3,10.0.0.0/33",
      'expected CIDRs separated by commas, got "10.1.2.3,10.0.0.0/33"',
    ],
    ["CUBEPOD_GATEWAY_NAMESPACE", "Pepr_System", 'expected a namespace name, got "Pepr_System"'],
    ["CUBEPOD_NETWORK_POLICY", "on", 'expected "enforced" or "unenforced", got "on"'],
    [
      "CUBEPOD_EGRESS_AGENT_ADDRESSES",
      "198.18.0.1",
      'expected CIDRs separated by commas, got "198.18.0.1"',
    ],
    [
      "CUBEPOD_EGRESS_AGENT_PORTS",
      "15080,15443",
      'expected three ports separated by commas, got "15080,15443"',
    ],
    [
      "CUBEPOD_VM_RUNTIME_CLASSES",
      "kata-qemu,,Kata_FC",
      'expected RuntimeClass names separated by commas, got ",Kata_FC"',
    ],
  ])("refuses %s=%s, naming the variable", (variable, value, message) => {
    expect(problemsOf({ [variable]: value })).toEqual([`${variable}: ${message}`]);
  });

  it("reads the node egress agent's settings: none without its addresses", () => {
    expect(loadConfig({}).network.egressAgent).toBeUndefined();
    expect(
      loadConfig({ CUBEPOD_EGRESS_AGENT_ADDRESSES: "198.18.0.1/32" }).network.egressAgent,
    ).toEqual({ addresses: ["198.18.0.1/32"], ports: [15080, 15443, 15001] });
    expect(
      loadConfig({
        CUBEPOD_EGRESS_AGENT_ADDRESSES: "198.18.0.1/32,198.18.2.1/32",
        CUBEPOD_EGRESS_AGENT_PORTS: "1,2,3",
      }).network.egressAgent,
    ).toEqual({ addresses: ["198.18.0.1/32", "198.18.2.1/32"], ports: [1, 2, 3] });
  });

  it("reads the VM runtime classes", () => {
    expect(
      loadConfig({ CUBEPOD_VM_RUNTIME_CLASSES: "kata-qemu, vm-standin" }).vmRuntimeClasses,
    ).toEqual(["kata-qemu", "vm-standin"]);
  });

  it("reads set values, and an empty one as unset", () => {
    const c = loadConfig({
      CUBEPOD_RECONCILE_CONCURRENCY: " 3 ",
      CUBEPOD_CLAIM_CONCURRENCY: "0",
      CUBEPOD_METRICS_PORT: "",
      CUBEPOD_REAPER_INTERVAL_SECONDS: "30",
    });
    expect(c).toMatchObject({
      reconcileConcurrency: 3,
      claimConcurrency: 0,
      metricsPort: 8081,
      reaperIntervalSeconds: 30,
    });
  });

  it("listens on all addresses in a cluster, unless told otherwise", () => {
    expect(loadConfig({ KUBERNETES_SERVICE_HOST: "127.96.0.1" }).metricsHost).toBe("0.0.0.0");
    expect(
      loadConfig({ KUBERNETES_SERVICE_HOST: "127.96.0.1", CUBEPOD_METRICS_HOST: "127.0.0.1" })
        .metricsHost,
    ).toBe("127.0.0.1");
  });

  it.each([
    ["CUBEPOD_RECONCILE_CONCURRENCY", "8x", 'expected an integer >= 1, got "8x"'],
    ["CUBEPOD_RECONCILE_CONCURRENCY", "0", 'expected an integer >= 1, got "0"'],
    ["CUBEPOD_RECONCILE_CONCURRENCY", "1.5", 'expected an integer >= 1, got "1.5"'],
    ["CUBEPOD_CLAIM_CONCURRENCY", "-1", 'expected an integer >= 0, got "-1"'],
    ["CUBEPOD_API_TIMEOUT_MS", "1e3", 'expected an integer >= 1, got "1e3"'],
    ["CUBEPOD_REAPER_INTERVAL_SECONDS", "5", 'expected an integer >= 10, got "5"'],
    ["CUBEPOD_METRICS_PORT", "70000", 'expected an integer from 1 to 65535, got "70000"'],
    ["CUBEPOD_EVENT_QUIET_MS", "NaN", 'expected an integer >= 0, got "NaN"'],
    ["CUBEPOD_SHARDS", "0", 'expected an integer from 1 to 64, got "0"'],
    ["CUBEPOD_SHARDS", "65", 'expected an integer from 1 to 64, got "65"'],
    ["CUBEPOD_SHARD_LEASE_SECONDS", "2", 'expected an integer from 3 to 300, got "2"'],
    ["CUBEPOD_SHARD_NAMESPACE", "Pepr_System", 'expected a namespace name, got "Pepr_System"'],
  ])("refuses %s=%s, naming the variable", (variable, value, message) => {
    expect(problemsOf({ [variable]: value })).toEqual([`${variable}: ${message}`]);
  });

  it("reads the shards' count, Lease duration and namespace", () => {
    const env = {
      CUBEPOD_SHARDS: "3",
      CUBEPOD_SHARD_LEASE_SECONDS: "6",
      CUBEPOD_SHARD_NAMESPACE: "cubepod",
    };
    expect(loadConfig(env).shards).toEqual({ count: 3, leaseSeconds: 6, namespace: "cubepod" });
  });

  it("refuses a maximum delay below its quiet time", () => {
    expect(
      problemsOf({ CUBEPOD_REPLENISH_DELAY_MS: "3000", CUBEPOD_REPLENISH_MAX_DELAY_MS: "2000" }),
    ).toEqual([
      "CUBEPOD_REPLENISH_MAX_DELAY_MS: must not be less than CUBEPOD_REPLENISH_DELAY_MS (2000 < 3000)",
    ]);
  });

  it("reports every bad setting at once, in one message", () => {
    const env = { CUBEPOD_RECONCILE_CONCURRENCY: "x", CUBEPOD_METRICS_PORT: "0" };
    expect(() => loadConfig(env)).toThrow(
      /invalid configuration:\n {2}CUBEPOD_RECONCILE_CONCURRENCY: .*\n {2}CUBEPOD_METRICS_PORT: /,
    );
  });

  it("reads failpoints, and refuses ones that name no action", () => {
    expect(loadConfig({ CUBEPOD_FAILPOINT: "createPod:2" }).failpoint).toEqual({
      kind: "afterAction",
      action: "createPod",
      count: 2,
    });
    expect(loadConfig({ CUBEPOD_FAILPOINT: "deletePVC" }).failpoint).toEqual({
      kind: "afterAction",
      action: "deletePVC",
      count: 1,
    });
    expect(loadConfig({ CUBEPOD_FAILPOINT: "standby-watch-lags" }).failpoint).toEqual({
      kind: "standbyWatchLags",
    });
    for (const bad of ["createPod:0", "createpod:1", "createPod:x", "createPod:1:2"]) {
      expect(problemsOf({ CUBEPOD_FAILPOINT: bad })).toEqual([
        expect.stringMatching(/^CUBEPOD_FAILPOINT: expected "<action>:<n>"/),
      ]);
    }
  });
});

describe("docs/configuration.md", () => {
  it("documents every setting the module reads, with its default", () => {
    const doc = readFileSync(join(__dirname, "..", "..", "docs", "configuration.md"), "utf8");
    for (const s of SETTINGS) {
      const row = doc.split("\n").find(l => l.startsWith(`| \`${s.variable}\``));
      expect(row).toBeDefined();
      expect(row).toContain(s.default);
    }
  });
});

describe("the module with a bad setting", () => {
  it("stops at load, with a message naming the variable", () => {
    const root = join(__dirname, "..", "..");
    const run = spawnSync(
      process.execPath,
      [join(root, "node_modules", "tsx", "dist", "cli.mjs"), "-e", 'import "./pepr"'],
      {
        cwd: root,
        encoding: "utf8",
        env: { ...process.env, CUBEPOD_RECONCILE_CONCURRENCY: "8x", PEPR_WATCH_MODE: "true" },
        timeout: 60_000,
      },
    );
    expect(run.status).not.toBe(0);
    expect(run.stderr).toContain(
      'CUBEPOD_RECONCILE_CONCURRENCY: expected an integer >= 1, got "8x"',
    );
  }, 60_000);
});
