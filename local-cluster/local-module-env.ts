/**
 * The local module's settings that follow from the local cluster, as `export` lines for
 * module.sh (and the chart's values in the tests): the local networks a sandbox's default egress excludes, beside the
 * private ranges; NetworkPolicy declared enforced, as real-node.sh runs an enforcer; and the
 * RuntimeClass that stands in for a VM on the real node, for Block mode.
 * Usage: local-module-env.ts
 */
import { DEFAULT_CLUSTER_NETWORKS, DEFAULT_VM_RUNTIME_CLASSES } from "../capabilities/config";

/** The real node's runc as it stands in for a VM runtime, for Block mode (runtime-class.yaml). */
export const VM_STANDIN = "vm-standin";

/** The settings, by variable. */
export function localModuleEnv(): Record<string, string> {
  // The real node's Pods and the Services, with env.sh's defaults and overrides.
  const local = [
    process.env.CUBEPOD_REAL_POD_SUBNET ?? "198.18.0.0/24",
    process.env.CUBEPOD_SERVICE_CIDR ?? "198.18.1.0/24",
  ];
  return {
    CUBEPOD_CLUSTER_NETWORKS: [...DEFAULT_CLUSTER_NETWORKS, ...local].join(","),
    CUBEPOD_NETWORK_POLICY: "enforced",
    // The real node's egress agent (real-node.sh): a redirected connection lands on the node's
    // address on its bridge.
    CUBEPOD_EGRESS_AGENT_ADDRESSES: `${process.env.CUBEPOD_REAL_GATEWAY_IP ?? "198.18.0.1"}/32`,
    // The release's injector, from the local registry as a cluster's nodes pull it (images.sh).
    CUBEPOD_PODD_INJECTOR_IMAGE: "cubepod.local/podd-injector:dev",
    CUBEPOD_VM_RUNTIME_CLASSES: [...DEFAULT_VM_RUNTIME_CLASSES, VM_STANDIN].join(","),
  };
}

if (require.main === module) {
  const env = localModuleEnv();
  for (const [k, v] of Object.entries(env)) console.log(`export ${k}=${JSON.stringify(v)}`);
}
