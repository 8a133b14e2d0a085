import { podTemplateSpecSchema } from "../../../capabilities/api/podtemplate";
import { DEFAULT_CLUSTER_NETWORKS, type NetworkConfig } from "../../../capabilities/config";
import {
  egressPolicy,
  isolationCondition,
  sandboxPolicy,
} from "../../../capabilities/network/decide";

const network: NetworkConfig = {
  gatewayNamespace: "pepr-system",
  clusterNetworks: ["10.0.0.0/8", "198.18.0.0/15", "fc00::/7"],
  policyEnforced: true,
};
const template = (networkSpec: object = {}) => ({
  namespace: "team-a",
  name: "python",
  uid: "tpl-uid",
  spec: podTemplateSpecSchema.parse({ image: "py:3", network: networkSpec }),
});

/** Paths of empty lists: the API server drops them, so an apply holding one always differs. */
function emptyLists(v: unknown, at = ""): string[] {
  if (Array.isArray(v))
    return v.length === 0 ? [at] : v.flatMap((x, i) => emptyLists(x, `${at}[${i}]`));
  if (v && typeof v === "object")
    return Object.entries(v).flatMap(([k, x]) => emptyLists(x, `${at}.${k}`));
  return [];
}

describe("every policy applies unchanged a second time", () => {
  it.each([
    ["the sandbox policy", sandboxPolicy("team-a", network)],
    ["Internet egress", egressPolicy(template(), network)],
    [
      "None with CIDRs",
      egressPolicy(template({ egress: "None", egressCIDRs: ["203.0.113.0/24"] }), network),
    ],
    ["IPv4 only", egressPolicy(template(), { ...network, clusterNetworks: ["10.0.0.0/8"] })],
  ])("%s holds no empty list", (_, policy) => {
    expect(emptyLists(policy)).toEqual([]);
  });
});

describe("sandboxPolicy: every sandbox Pod of a namespace", () => {
  it("takes traffic from the gateway's Pods only, on any port, and sends none", () => {
    expect(sandboxPolicy("team-a", network)).toEqual({
      apiVersion: "networking.k8s.io/v1",
      kind: "NetworkPolicy",
      metadata: {
        name: "cubepod-sandboxes",
        namespace: "team-a",
        labels: { "app.kubernetes.io/managed-by": "cubepod" },
      },
      spec: {
        podSelector: {
          matchExpressions: [{ key: "pod.cubeplex.ai/template", operator: "Exists" }],
        },
        policyTypes: ["Ingress", "Egress"],
        ingress: [
          {
            from: [
              {
                namespaceSelector: {
                  matchLabels: { "kubernetes.io/metadata.name": "pepr-system" },
                },
                podSelector: {
                  matchLabels: {
                    "app.kubernetes.io/name": "cubepod",
                    "app.kubernetes.io/component": "gateway",
                  },
                },
              },
            ],
          },
        ],
      },
    });
  });
});

describe("egressPolicy: what a template's sandboxes reach", () => {
  it("by default the cluster's DNS and every address outside its networks, per family", () => {
    const p = egressPolicy(template(), network)!;
    expect(p.metadata).toMatchObject({
      name: "cubepod-egress-python",
      namespace: "team-a",
      labels: { "pod.cubeplex.ai/template": "python" },
      ownerReferences: [{ kind: "PodTemplate", name: "python", uid: "tpl-uid", controller: true }],
    });
    expect(p.spec.podSelector).toEqual({
      matchExpressions: [
        { key: "pod.cubeplex.ai/template", operator: "In", values: ["python"] },
        // Boxes with `egress: None` are left to the namespace's policy: nothing.
        { key: "pod.cubeplex.ai/egress", operator: "DoesNotExist" },
      ],
    });
    expect(p.spec.policyTypes).toEqual(["Egress"]);
    expect(p.spec.egress).toEqual([
      {
        to: [{ namespaceSelector: {}, podSelector: { matchLabels: { "k8s-app": "kube-dns" } } }],
        ports: [
          { protocol: "UDP", port: 53 },
          { protocol: "TCP", port: 53 },
        ],
      },
      {
        to: [
          { ipBlock: { cidr: "0.0.0.0/0", except: ["10.0.0.0/8", "198.18.0.0/15"] } },
          { ipBlock: { cidr: "::/0", except: ["fc00::/7"] } },
        ],
      },
    ]);
  });

  it("excludes the metadata range and private networks with the default settings", () => {
    const p = egressPolicy(template(), { ...network, clusterNetworks: DEFAULT_CLUSTER_NETWORKS })!;
    const v4 = p.spec.egress![1].to![0].ipBlock!;
    expect(v4.except).toEqual(
      expect.arrayContaining(["169.254.0.0/16", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]),
    );
  });

  it("admits the node egress agent's ports at its addresses, with Internet egress only", () => {
    const agent = { addresses: ["198.18.0.1/32"], ports: [15080, 15443, 15001] };
    const p = egressPolicy(template(), { ...network, egressAgent: agent })!;
    expect(p.spec.egress![2]).toEqual({
      to: [{ ipBlock: { cidr: "198.18.0.1/32" } }],
      ports: [
        { protocol: "TCP", port: 15080 },
        { protocol: "TCP", port: 15443 },
        { protocol: "TCP", port: 15001 },
      ],
    });
    expect(egressPolicy(template({ egress: "None" }), { ...network, egressAgent: agent })).toBe(
      undefined,
    );
  });

  it("adds the template's CIDRs, alone with egress None", () => {
    const cidrs = ["203.0.113.0/25", "2001:db8::/64"];
    const both = egressPolicy(template({ egressCIDRs: cidrs }), network)!;
    expect(both.spec.egress).toHaveLength(3);
    expect(both.spec.egress![2]).toEqual({
      to: [{ ipBlock: { cidr: "203.0.113.0/25" } }, { ipBlock: { cidr: "2001:db8::/64" } }],
    });
    const only = egressPolicy(template({ egress: "None", egressCIDRs: cidrs }), network)!;
    expect(only.spec.egress).toEqual([both.spec.egress![2]]);
  });

  it("is none at all with egress None: the namespace's policy denies everything", () => {
    expect(egressPolicy(template({ egress: "None" }), network)).toBeUndefined();
  });

  it("leaves out a family the cluster names no network of", () => {
    const p = egressPolicy(template(), { ...network, clusterNetworks: ["10.0.0.0/8"] })!;
    expect(p.spec.egress![1].to).toEqual([
      { ipBlock: { cidr: "0.0.0.0/0", except: ["10.0.0.0/8"] } },
      { ipBlock: { cidr: "::/0" } },
    ]);
  });
});

describe("isolationCondition", () => {
  const spec = template().spec;
  const at = "2026-12-02T10:00:00Z";

  it("is True once applied in a cluster that enforces NetworkPolicy", () => {
    expect(isolationCondition(undefined, { applied: true }, spec, network, 3, at)).toEqual({
      type: "NetworkIsolated",
      status: "True",
      observedGeneration: 3,
      lastTransitionTime: at,
      reason: "PoliciesApplied",
      message:
        "sandboxes take traffic from the gateway only, and reach the cluster's DNS and addresses outside its networks",
    });
  });

  it("warns when nothing is declared to enforce the policies, and when they could not be applied", () => {
    const unenforced = { ...network, policyEnforced: false };
    expect(isolationCondition(undefined, { applied: true }, spec, unenforced, 1, at)).toMatchObject(
      { status: "False", reason: "NetworkPolicyNotEnforced" },
    );
    const failed = { applied: false as const, error: "forbidden" };
    expect(isolationCondition(undefined, failed, spec, network, 1, at)).toMatchObject({
      status: "False",
      reason: "PolicyNotApplied",
      message: "the sandboxes' NetworkPolicies could not be applied: forbidden",
    });
  });

  it("keeps its transition time while its status holds", () => {
    const first = isolationCondition(undefined, { applied: true }, spec, network, 1, at);
    const later = isolationCondition(
      [first],
      { applied: true },
      spec,
      network,
      2,
      "2026-12-03T00:00:00Z",
    );
    expect(later.lastTransitionTime).toBe(at);
    const none = template({ egress: "None" }).spec;
    expect(isolationCondition([first], { applied: true }, none, network, 2, at).message).toBe(
      "sandboxes take traffic from the gateway only, and reach nothing",
    );
  });
});
