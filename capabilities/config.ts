import { isCIDR } from "./api/common";
import { DEFAULT_PODD_INJECTOR_IMAGE } from "./api/podd-injector";

/**
 * Every setting of the module, read from the environment once at start and validated: a bad value
 * stops the module with a message naming the variable, instead of turning into `NaN` somewhere.
 * `docs/configuration.md` is checked against {@link SETTINGS} by a unit test.
 */

/** The object actions a failpoint can stop after (see {@link Config.failpoint}). */
export const FAILPOINT_ACTIONS = [
  "createPVC",
  "createPod",
  "addPodOwner",
  "deletePod",
  "deletePVC",
  "adoptPVC",
  "orphanPVC",
  "claimStandby",
] as const;
export type FailpointAction = (typeof FAILPOINT_ACTIONS)[number];

/** A test hook: stop after the n-th action of a type, or keep the standby index deaf. */
export type Failpoint =
  | { kind: "afterAction"; action: FailpointAction; count: number }
  | { kind: "standbyWatchLags" };

/** Waiting for a quiet moment between warm claims: at least `quietMs`, at most `maxDelayMs`. */
export type QuietWindow = { quietMs: number; maxDelayMs: number };

export type Config = {
  reconcileConcurrency: number;
  claimConcurrency: number;
  replenish: QuietWindow;
  apiTimeoutMs: number;
  events: QuietWindow;
  claimFinish: QuietWindow;
  reaperIntervalSeconds: number;
  metricsPort: number;
  metricsHost: string;
  network: NetworkConfig;
  /** The namespace of the tenant default templates (docs/gateway.md, "Tenant defaults"). */
  defaultTemplatesNamespace: string;
  /** The podd injector image of templates that name none. */
  poddInjectorImage: string;
  /**
   * RuntimeClasses whose Pods run in a VM with a kernel of their own: only there does a Block
   * mode sandbox get the rights podd-init needs to format and mount its devices.
   */
  vmRuntimeClasses: string[];
  /**
   * RuntimeClasses whose Pods run under gVisor: its network stack serves no netfilter rules in
   * the Pod, so the egress sidecar's isolation cannot be written there.
   */
  gvisorRuntimeClasses: string[];
  failpoint?: Failpoint;
  shards: ShardConfig;
};

/**
 * How the watchers split the namespaces (capabilities/shard): one shard is one watcher with no
 * leases; more, and each namespace belongs to the shard its name hashes to, served by whichever
 * replica holds that shard's Lease.
 */
export type ShardConfig = {
  count: number;
  /** How long a shard's Lease lasts unrenewed before another replica may take it. */
  leaseSeconds: number;
  /** The namespace of the shards' Leases: the module's own. */
  namespace: string;
};

/** How sandboxes are isolated on the network (capabilities/network). */
export type NetworkConfig = {
  /** The namespace whose gateway Pods may reach sandboxes. */
  gatewayNamespace: string;
  /** What a template's default egress never reaches: the cluster's own networks. */
  clusterNetworks: string[];
  /** Whether the cluster is declared to enforce NetworkPolicy. */
  policyEnforced: boolean;
  /**
   * The node egress agent, when the cluster runs it (podd/egressagent, decision 0028): where
   * sandboxes reach its proxy (the addresses a redirected connection arrives at) and its ports.
   * Without it, `allowOut` and `denyOut` are refused.
   */
  egressAgent?: { addresses: string[]; ports: number[] };
};

/**
 * Networks no sandbox reaches by default: private and shared address space (the Pods, Services
 * and nodes of most clusters), loopback, link-local (cloud metadata at 169.254.169.254), and
 * their IPv6 counterparts.
 */
export const DEFAULT_CLUSTER_NETWORKS = [
  "10.0.0.0/8",
  "172.16.0.0/12",
  "192.168.0.0/16",
  "100.64.0.0/10",
  "169.254.0.0/16",
  "127.0.0.0/8",
  "0.0.0.0/8",
  "fc00::/7",
  "fe80::/10",
];

/** Kata Containers' RuntimeClasses as kata-deploy installs them: each Pod is a VM. */
export const DEFAULT_VM_RUNTIME_CLASSES = [
  "kata",
  "kata-qemu",
  "kata-clh",
  "kata-fc",
  "kata-dragonball",
  "kata-qemu-snp",
  "kata-qemu-tdx",
  "kata-qemu-sev",
];

type Env = Record<string, string | undefined>;

/** One setting: its variable, its default as written in the environment, and what it sets. */
export type Setting = { variable: string; default: string; description: string };

type IntRule = { variable: string; default: number; min: number; max?: number; doc: string };

const INTS = {
  reconcileConcurrency: {
    variable: "CUBEPOD_RECONCILE_CONCURRENCY",
    default: 8,
    min: 1,
    doc: "box reconciles at once (cold starts, pauses, deletions...)",
  },
  claimConcurrency: {
    variable: "CUBEPOD_CLAIM_CONCURRENCY",
    default: 16,
    min: 0,
    doc: "extra slots only warm claims may use, so that a burst of cold starts does not delay them",
  },
  replenishQuietMs: {
    variable: "CUBEPOD_REPLENISH_DELAY_MS",
    default: 1000,
    min: 0,
    doc: "quiet time after a pool's claims and standby events before it is replenished",
  },
  replenishMaxDelayMs: {
    variable: "CUBEPOD_REPLENISH_MAX_DELAY_MS",
    default: 2000,
    min: 0,
    doc: "the longest a replenishment waits for that quiet; a pool refills its replicas once per this time under a steady stream of claims",
  },
  apiTimeoutMs: {
    variable: "CUBEPOD_API_TIMEOUT_MS",
    default: 65_000,
    min: 1,
    doc: "the longest an API request (not a watch) waits for an answer; above the API server's own 60 s limit, so only a dead connection reaches it",
  },
  eventQuietMs: {
    variable: "CUBEPOD_EVENT_QUIET_MS",
    default: 100,
    min: 0,
    doc: "Events wait until no warm claim has started for this long",
  },
  eventMaxDelayMs: {
    variable: "CUBEPOD_EVENT_MAX_DELAY_MS",
    default: 5000,
    min: 0,
    doc: "the longest an Event waits for that quiet",
  },
  claimFinishQuietMs: {
    variable: "CUBEPOD_CLAIM_FINISH_QUIET_MS",
    default: 100,
    min: 0,
    doc: "a warm claim's finalizer, Pod labels and PVC handover wait until claims are quiet this long",
  },
  claimFinishMaxDelayMs: {
    variable: "CUBEPOD_CLAIM_FINISH_MAX_DELAY_MS",
    default: 15_000,
    min: 0,
    doc: "the longest they wait for that quiet",
  },
  reaperIntervalSeconds: {
    variable: "CUBEPOD_REAPER_INTERVAL_SECONDS",
    default: 10,
    // Pepr's OnSchedule refuses shorter intervals, and throws from a timer.
    min: 10,
    doc: "the reaper's period (Pepr refuses less than 10)",
  },
  shards: {
    variable: "CUBEPOD_SHARDS",
    default: 1,
    min: 1,
    max: 64,
    doc: "watcher shards; each namespace is served by the replica holding its shard's Lease (the chart sets it from `watcher.replicas`)",
  },
  shardLeaseSeconds: {
    variable: "CUBEPOD_SHARD_LEASE_SECONDS",
    default: 15,
    min: 3,
    max: 300,
    doc: "how long a shard's Lease lasts unrenewed; a dead replica's namespaces move to a live one after it",
  },
  metricsPort: {
    variable: "CUBEPOD_METRICS_PORT",
    default: 8081,
    min: 1,
    max: 65_535,
    doc: "the port of `/metrics` and `/healthz`",
  },
} satisfies Record<string, IntRule>;

const METRICS_HOST = "CUBEPOD_METRICS_HOST";
const FAILPOINT = "CUBEPOD_FAILPOINT";
const CLUSTER_NETWORKS = "CUBEPOD_CLUSTER_NETWORKS";
const GATEWAY_NAMESPACE = "CUBEPOD_GATEWAY_NAMESPACE";
const NETWORK_POLICY = "CUBEPOD_NETWORK_POLICY";
const EGRESS_AGENT_ADDRESSES = "CUBEPOD_EGRESS_AGENT_ADDRESSES";
const EGRESS_AGENT_PORTS = "CUBEPOD_EGRESS_AGENT_PORTS";
/** The agent's proxy ports for port 80, port 443 and the others (its own default). */
export const DEFAULT_EGRESS_AGENT_PORTS = [15080, 15443, 15001];
const VM_RUNTIME_CLASSES = "CUBEPOD_VM_RUNTIME_CLASSES";
const GVISOR_RUNTIME_CLASSES = "CUBEPOD_GVISOR_RUNTIME_CLASSES";
/** gVisor's RuntimeClass as its documentation and the local real node name it. */
export const DEFAULT_GVISOR_RUNTIME_CLASSES = ["gvisor"];
const SHARD_NAMESPACE = "CUBEPOD_SHARD_NAMESPACE";
const DEFAULT_TEMPLATES_NAMESPACE = "CUBEPOD_DEFAULT_TEMPLATES_NAMESPACE";
const PODD_INJECTOR_IMAGE = "CUBEPOD_PODD_INJECTOR_IMAGE";
/** Where the platform keeps the templates every tenant namespace gets when it lacks its own. */
export const DEFAULT_TEMPLATES = "cubepod-defaults";

/** The settings as documented: every variable the module reads, with its default. */
export const SETTINGS: Setting[] = [
  ...Object.values(INTS).map(r => ({
    variable: r.variable,
    default: String(r.default),
    description: r.doc,
  })),
  {
    variable: METRICS_HOST,
    default: "`0.0.0.0` in a cluster, `127.0.0.1` elsewhere",
    description: "the address `/metrics` and `/healthz` listen on",
  },
  {
    variable: CLUSTER_NETWORKS,
    default: DEFAULT_CLUSTER_NETWORKS.join(","),
    description:
      "CIDRs (comma-separated) that a template's `Internet` egress excludes: the cluster's Pod, Service and node networks, the API server, cloud metadata",
  },
  {
    variable: GATEWAY_NAMESPACE,
    default: "pepr-system",
    description:
      "the namespace of the gateway Pods, the only Pods sandboxes take traffic from, and of the gateway's token key (Secret `cubepod-gateway-token-key`, made at the module's first start)",
  },
  {
    variable: PODD_INJECTOR_IMAGE,
    default: DEFAULT_PODD_INJECTOR_IMAGE,
    description:
      "the podd injector image of templates that name none (`spec.poddInjectorImage`); the chart sets it from `images.registry` and `images.tag`",
  },
  {
    variable: DEFAULT_TEMPLATES_NAMESPACE,
    default: DEFAULT_TEMPLATES,
    description:
      "the namespace of the tenant default templates: a box naming a template its namespace lacks gets a copy of the one of that name there (the gateway reads `CUBEPOD_GATEWAY_DEFAULT_TEMPLATES_NAMESPACE`, which must agree)",
  },
  {
    variable: SHARD_NAMESPACE,
    default: "pepr-system",
    description: "the namespace of the shards' Leases (used only with more than one shard)",
  },
  {
    variable: NETWORK_POLICY,
    default: "unenforced",
    description:
      "`enforced` once the cluster's network plugin enforces NetworkPolicy; until then every template reports `NetworkIsolated=False`",
  },
  {
    variable: EGRESS_AGENT_ADDRESSES,
    default: "unset",
    description:
      "CIDRs (comma-separated) where sandboxes reach the node egress agent's proxy: each node's address on its Pod network, where the agent's redirect lands (docs/network.md). Set when the cluster runs the agent; unset, `allowOut` and `denyOut` are refused",
  },
  {
    variable: EGRESS_AGENT_PORTS,
    default: DEFAULT_EGRESS_AGENT_PORTS.join(","),
    description:
      "the node egress agent's proxy ports (for port 80, port 443, the others), as its `CUBEPOD_EGRESS_AGENT_PORTS`",
  },
  {
    variable: VM_RUNTIME_CLASSES,
    default: DEFAULT_VM_RUNTIME_CLASSES.join(","),
    description:
      "RuntimeClasses (comma-separated) whose Pods are VMs with a kernel of their own; `volumeMode: Block` templates must name one, as podd-init formats and mounts the devices there with rights no other runtime gets",
  },
  {
    variable: GVISOR_RUNTIME_CLASSES,
    default: DEFAULT_GVISOR_RUNTIME_CLASSES.join(","),
    description:
      "RuntimeClasses (comma-separated) whose Pods run under gVisor, where the egress sidecar's isolation cannot be written: a template pairing one with `spec.egress` is refused ([network](network.md#the-egress-sidecar))",
  },
  {
    variable: FAILPOINT,
    default: "unset",
    description:
      "tests only: `<action>:<n>` stops the reconciler dead after the n-th action of that type (as a crash would); `standby-watch-lags` keeps the standby index deaf to its watch",
  },
];

/** A setting that cannot be used; the message names the variable. */
export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  ${problems.join("\n  ")}`);
  }
}

/**
 * Reads and validates the configuration; throws a {@link ConfigError} listing every bad
 * setting at once. An unset or empty variable takes its default.
 */
export function loadConfig(env: Env = process.env): Config {
  const problems: string[] = [];
  const int = (r: IntRule): number => {
    const raw = env[r.variable]?.trim();
    if (raw === undefined || raw === "") return r.default;
    const n = /^-?\d+$/.test(raw) ? Number(raw) : NaN;
    const range = r.max === undefined ? `>= ${r.min}` : `from ${r.min} to ${r.max}`;
    if (!Number.isSafeInteger(n) || n < r.min || (r.max !== undefined && n > r.max)) {
      problems.push(`${r.variable}: expected an integer ${range}, got ${JSON.stringify(raw)}`);
      return r.default;
    }
    return n;
  };
  const v = Object.fromEntries(Object.entries(INTS).map(([k, r]) => [k, int(r)])) as Record<
    keyof typeof INTS,
    number
  >;

  const window = (quiet: IntRule, max: IntRule, q: number, m: number): QuietWindow => {
    if (m < q) {
      problems.push(`${max.variable}: must not be less than ${quiet.variable} (${m} < ${q})`);
    }
    return { quietMs: q, maxDelayMs: m };
  };

  const config: Config = {
    reconcileConcurrency: v.reconcileConcurrency,
    claimConcurrency: v.claimConcurrency,
    replenish: window(
      INTS.replenishQuietMs,
      INTS.replenishMaxDelayMs,
      v.replenishQuietMs,
      v.replenishMaxDelayMs,
    ),
    apiTimeoutMs: v.apiTimeoutMs,
    events: window(INTS.eventQuietMs, INTS.eventMaxDelayMs, v.eventQuietMs, v.eventMaxDelayMs),
    claimFinish: window(
      INTS.claimFinishQuietMs,
      INTS.claimFinishMaxDelayMs,
      v.claimFinishQuietMs,
      v.claimFinishMaxDelayMs,
    ),
    reaperIntervalSeconds: v.reaperIntervalSeconds,
    metricsPort: v.metricsPort,
    metricsHost:
      env[METRICS_HOST]?.trim() || (env.KUBERNETES_SERVICE_HOST ? "0.0.0.0" : "127.0.0.1"),
    network: {
      gatewayNamespace: parseNamespace(
        GATEWAY_NAMESPACE,
        env[GATEWAY_NAMESPACE]?.trim() || "pepr-system",
        problems,
      ),
      clusterNetworks: parseCIDRs(env[CLUSTER_NETWORKS]?.trim(), problems),
      policyEnforced: parseEnforcement(env[NETWORK_POLICY]?.trim(), problems),
      ...parseEgressAgent(env, problems),
    },
    poddInjectorImage: parseImage(
      PODD_INJECTOR_IMAGE,
      env[PODD_INJECTOR_IMAGE]?.trim() || DEFAULT_PODD_INJECTOR_IMAGE,
      problems,
    ),
    defaultTemplatesNamespace: parseNamespace(
      DEFAULT_TEMPLATES_NAMESPACE,
      env[DEFAULT_TEMPLATES_NAMESPACE]?.trim() || DEFAULT_TEMPLATES,
      problems,
    ),
    vmRuntimeClasses: parseRuntimeClasses(env[VM_RUNTIME_CLASSES]?.trim(), problems),
    gvisorRuntimeClasses: parseRuntimeClasses(
      env[GVISOR_RUNTIME_CLASSES]?.trim(),
      problems,
      GVISOR_RUNTIME_CLASSES,
      DEFAULT_GVISOR_RUNTIME_CLASSES,
    ),
    failpoint: parseFailpoint(env[FAILPOINT]?.trim(), problems),
    shards: {
      count: v.shards,
      leaseSeconds: v.shardLeaseSeconds,
      namespace: parseNamespace(
        SHARD_NAMESPACE,
        env[SHARD_NAMESPACE]?.trim() || "pepr-system",
        problems,
      ),
    },
  };
  if (problems.length > 0) throw new ConfigError(problems);
  return config;
}

function parseImage(variable: string, raw: string, problems: string[]): string {
  if (!/^\S{1,1024}$/.test(raw)) {
    problems.push(`${variable}: expected a container image reference, got ${JSON.stringify(raw)}`);
  }
  return raw;
}

function parseNamespace(variable: string, raw: string, problems: string[]): string {
  if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(raw)) {
    problems.push(`${variable}: expected a namespace name, got ${JSON.stringify(raw)}`);
  }
  return raw;
}

function parseCIDRs(
  raw: string | undefined,
  problems: string[],
  variable = CLUSTER_NETWORKS,
): string[] {
  if (!raw) return DEFAULT_CLUSTER_NETWORKS;
  const cidrs = raw.split(",").map(c => c.trim());
  const bad = cidrs.filter(c => !isCIDR(c));
  if (bad.length > 0) {
    problems.push(
      `${variable}: expected CIDRs separated by commas, got ${JSON.stringify(bad.join(","))}`,
    );
  }
  return cidrs;
}

function parseEgressAgent(env: Env, problems: string[]): Pick<NetworkConfig, "egressAgent"> {
  const addresses = env[EGRESS_AGENT_ADDRESSES]?.trim();
  const rawPorts = env[EGRESS_AGENT_PORTS]?.trim();
  let ports = DEFAULT_EGRESS_AGENT_PORTS;
  if (rawPorts) {
    ports = rawPorts.split(",").map(p => (/^\d{1,5}$/.test(p.trim()) ? Number(p.trim()) : NaN));
    if (ports.length !== 3 || ports.some(p => !(p >= 1 && p <= 65_535))) {
      problems.push(
        `${EGRESS_AGENT_PORTS}: expected three ports separated by commas, got ${JSON.stringify(rawPorts)}`,
      );
    }
  }
  if (!addresses) return {};
  return {
    egressAgent: { addresses: parseCIDRs(addresses, problems, EGRESS_AGENT_ADDRESSES), ports },
  };
}

function parseEnforcement(raw: string | undefined, problems: string[]): boolean {
  if (!raw || raw === "unenforced") return false;
  if (raw === "enforced") return true;
  problems.push(
    `${NETWORK_POLICY}: expected "enforced" or "unenforced", got ${JSON.stringify(raw)}`,
  );
  return false;
}

function parseRuntimeClasses(
  raw: string | undefined,
  problems: string[],
  variable = VM_RUNTIME_CLASSES,
  defaults = DEFAULT_VM_RUNTIME_CLASSES,
): string[] {
  if (!raw) return defaults;
  const names = raw.split(",").map(n => n.trim());
  const dns = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
  const bad = names.filter(n => n.length > 253 || !dns.test(n));
  if (bad.length > 0) {
    problems.push(
      `${variable}: expected RuntimeClass names separated by commas, got ${JSON.stringify(bad.join(","))}`,
    );
  }
  return names;
}

function parseFailpoint(raw: string | undefined, problems: string[]): Failpoint | undefined {
  if (!raw) return undefined;
  if (raw === "standby-watch-lags") return { kind: "standbyWatchLags" };
  const [action, count = "1", ...rest] = raw.split(":");
  const n = /^\d+$/.test(count) ? Number(count) : NaN;
  if (rest.length > 0 || !FAILPOINT_ACTIONS.includes(action as FailpointAction) || !(n >= 1)) {
    problems.push(
      `${FAILPOINT}: expected "<action>:<n>" (action one of ${FAILPOINT_ACTIONS.join(", ")}; n >= 1) or "standby-watch-lags", got ${JSON.stringify(raw)}`,
    );
    return undefined;
  }
  return { kind: "afterAction", action: action as FailpointAction, count: n };
}
