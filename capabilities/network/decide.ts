import type {
  V1LabelSelector,
  V1NetworkPolicyPeer,
  V1NetworkPolicyPort,
  V1ObjectMeta,
} from "@kubernetes/client-node";
import { isIP } from "node:net";
import { API_VERSION, type Condition } from "../api/common";
import type { PodTemplateSpec } from "../api/podtemplate";
import type { NetworkConfig } from "../config";
import { condition } from "../kit/conditions";
import {
  GATEWAY_POD_LABELS,
  LABEL_EGRESS,
  LABEL_MANAGED_BY,
  LABEL_TEMPLATE,
  MANAGED_BY,
} from "../manifests/labels";

/** The namespace's policy over every sandbox Pod: traffic from the gateway only, no egress. */
export const SANDBOX_POLICY = "cubepod-sandboxes";
/** The condition a template reports its sandboxes' isolation in. */
export const ISOLATION_CONDITION = "NetworkIsolated";
/** The ports of the cluster's DNS, which `Internet` egress reaches. */
const DNS_PORTS = [
  { protocol: "UDP", port: 53 },
  { protocol: "TCP", port: 53 },
];

const labels = { [LABEL_MANAGED_BY]: MANAGED_BY };

type Rule = { ports?: V1NetworkPolicyPort[] };
/**
 * networking.k8s.io/v1 NetworkPolicy as JSON: the client library's model names `from` `_from`,
 * and objects here are sent as they are.
 */
export type NetworkPolicy = {
  apiVersion: "networking.k8s.io/v1";
  kind: "NetworkPolicy";
  metadata: V1ObjectMeta;
  spec: {
    podSelector: V1LabelSelector;
    policyTypes: ("Ingress" | "Egress")[];
    ingress?: (Rule & { from?: V1NetworkPolicyPeer[] })[];
    egress?: (Rule & { to?: V1NetworkPolicyPeer[] })[];
  };
};

/**
 * The policy every sandbox Pod of a namespace falls under, its template's or a hand-declared
 * one's alike (any Pod labelled with a template): ingress from the gateway's Pods only, on every
 * port (the gateway routes a sandbox's own ports too), and no egress. NetworkPolicies add up, so
 * a template's egress policy opens egress and nothing can open ingress wider; a Pod whose
 * template is gone keeps this one. The node the Pod runs on (its kubelet's probes) is always
 * allowed by NetworkPolicy itself.
 */
export function sandboxPolicy(namespace: string, network: NetworkConfig): NetworkPolicy {
  return {
    apiVersion: "networking.k8s.io/v1",
    kind: "NetworkPolicy",
    metadata: { name: SANDBOX_POLICY, namespace, labels },
    spec: {
      podSelector: { matchExpressions: [{ key: LABEL_TEMPLATE, operator: "Exists" }] },
      policyTypes: ["Ingress", "Egress"],
      ingress: [
        {
          from: [
            {
              namespaceSelector: {
                matchLabels: { "kubernetes.io/metadata.name": network.gatewayNamespace },
              },
              podSelector: { matchLabels: GATEWAY_POD_LABELS },
            },
          ],
        },
      ],
      // No egress rules: nothing out. Not `egress: []`, which the API server stores as no field,
      // so that every apply would find a change and write again.
    },
  };
}

/** The name of a template's egress policy (template names are label values: at most 63). */
export const egressPolicyName = (template: string) => `cubepod-egress-${template}`;

/** A template as its egress policy needs it. */
export type NetworkTemplate = {
  namespace: string;
  name: string;
  uid: string;
  spec: Pick<PodTemplateSpec, "network">;
};

/**
 * What a template's sandboxes may reach, as a policy over its Pods (but those of boxes with
 * `egress: None`, which carry the egress label): with `Internet`, the cluster's DNS Pods and every
 * address outside the cluster's networks (and the node egress agent's proxy, where the cluster
 * runs it); the template's own CIDRs in any case. Undefined when
 * they reach nothing: the namespace's policy then denies all. Owned by the template, so that it
 * goes with it.
 */
export function egressPolicy(
  t: NetworkTemplate,
  network: NetworkConfig,
): NetworkPolicy | undefined {
  const { egress, egressCIDRs = [] } = t.spec.network;
  const rules: NonNullable<NetworkPolicy["spec"]["egress"]> = [];
  if (egress === "Internet") {
    rules.push({
      to: [
        {
          namespaceSelector: {},
          podSelector: { matchLabels: { "k8s-app": "kube-dns" } },
        },
      ],
      ports: DNS_PORTS,
    });
    rules.push({ to: outside(network.clusterNetworks) });
    // The node egress agent redirects a policed sandbox's TCP to the internet to its proxy on
    // the node, where the network plugin then judges the node's address (decision 0028).
    if (network.egressAgent) {
      rules.push({
        to: network.egressAgent.addresses.map(cidr => ({ ipBlock: { cidr } })),
        ports: network.egressAgent.ports.map(port => ({ protocol: "TCP", port })),
      });
    }
  }
  if (egressCIDRs.length > 0) rules.push({ to: egressCIDRs.map(cidr => ({ ipBlock: { cidr } })) });
  if (rules.length === 0) return undefined;
  return {
    apiVersion: "networking.k8s.io/v1",
    kind: "NetworkPolicy",
    metadata: {
      name: egressPolicyName(t.name),
      namespace: t.namespace,
      labels: { ...labels, [LABEL_TEMPLATE]: t.name },
      ownerReferences: [
        {
          apiVersion: API_VERSION,
          kind: "PodTemplate",
          name: t.name,
          uid: t.uid,
          controller: true,
        },
      ],
    },
    spec: {
      podSelector: {
        matchExpressions: [
          { key: LABEL_TEMPLATE, operator: "In", values: [t.name] },
          { key: LABEL_EGRESS, operator: "DoesNotExist" },
        ],
      },
      policyTypes: ["Egress"],
      egress: rules,
    },
  };
}

/** Every address of each family but the cluster's networks of that family. */
function outside(clusterNetworks: string[]) {
  const family = (v: 4 | 6) => clusterNetworks.filter(c => isIP(c.split("/")[0]) === v);
  return [
    { ipBlock: { cidr: "0.0.0.0/0", except: family(4) } },
    { ipBlock: { cidr: "::/0", except: family(6) } },
  ].map(p => (p.ipBlock.except.length > 0 ? p : { ipBlock: { cidr: p.ipBlock.cidr } }));
}

/** What the template's last reconcile of its policies came to. */
export type IsolationOutcome = { applied: true } | { applied: false; error: string };

/**
 * The template's `NetworkIsolated` condition: True once its policies are applied in a cluster
 * declared to enforce them; False, with the reason, when they could not be applied or nothing
 * enforces them: CubePod cannot see enforcement, so it says so instead of staying silent.
 */
export function isolationCondition(
  previous: Condition[] | undefined,
  outcome: IsolationOutcome,
  spec: Pick<PodTemplateSpec, "network">,
  network: NetworkConfig,
  generation: number,
  now: string,
): Condition {
  const reach = describeEgress(spec.network);
  const c = !outcome.applied
    ? {
        status: "False" as const,
        reason: "PolicyNotApplied",
        message: `the sandboxes' NetworkPolicies could not be applied: ${outcome.error}`,
      }
    : network.policyEnforced
      ? {
          status: "True" as const,
          reason: "PoliciesApplied",
          message: `sandboxes take traffic from the gateway only, and reach ${reach}`,
        }
      : {
          status: "False" as const,
          reason: "NetworkPolicyNotEnforced",
          message:
            "NetworkPolicies are applied, but the cluster is not declared to enforce them " +
            "(CUBEPOD_NETWORK_POLICY=enforced): without a network plugin that enforces " +
            "NetworkPolicy, sandboxes can reach each other, the nodes and the API server",
        };
  return condition(previous, { type: ISOLATION_CONDITION, ...c }, generation, now);
}

function describeEgress(n: PodTemplateSpec["network"]): string {
  const cidrs = n.egressCIDRs?.length ? n.egressCIDRs.join(", ") : "";
  if (n.egress === "Internet") {
    return `the cluster's DNS and addresses outside its networks${cidrs ? `, and ${cidrs}` : ""}`;
  }
  return cidrs || "nothing";
}
