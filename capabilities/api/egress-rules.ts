import { z } from "zod";

/** The `denyOut` entry that is all traffic: with it, `allowOut` is an allow-list. */
export const ALL_TRAFFIC = "0.0.0.0/0";

/** At most this many entries in each list. */
export const MAX_EGRESS_ENTRIES = 256;

const IPV4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})(?:\/(\d{1,2}))?$/;
const LABEL = /^[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?$/;

/**
 * What an egress entry is, as the node egress agent reads it (podd/egressagent/policy.go):
 * an IPv4 address or CIDR, a domain pattern (`example.com`, `*.example.com`, `*`), or why it is
 * neither.
 */
export function egressEntry(entry: string): "address" | "domain" | { error: string } {
  const ip = IPV4.exec(entry);
  if (ip) {
    const octets = ip.slice(1, 5).map(Number);
    const bits = ip[5] === undefined ? 32 : Number(ip[5]);
    if (octets.some(o => o > 255) || bits > 32)
      return { error: `${entry} is not an IPv4 address or CIDR` };
    if (octets.every(o => o === 0) && entry !== ALL_TRAFFIC) {
      return {
        error: `${entry}: an unspecified address matches nothing; ${ALL_TRAFFIC} is all traffic`,
      };
    }
    return "address";
  }
  if (entry.includes(":"))
    return { error: `${entry}: only IPv4 addresses and CIDRs are supported` };
  if (entry === "*") return "domain";
  const name = entry.replace(/^\*\./, "").replace(/\.$/, "");
  if (name.length === 0 || name.length > 253 || !name.split(".").every(l => LABEL.test(l))) {
    return { error: `${entry} is not an IPv4 address, a CIDR or a domain` };
  }
  return "domain";
}

const OCTET = "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";
/** An IPv4 address or CIDR, in RE2 for the CRD's patterns and rules. */
const IPV4_SOURCE = `${OCTET}(\\.${OCTET}){3}(/(3[0-2]|[12]?[0-9]))?`;
const LABEL_SOURCE = "[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?";
const DOMAIN_SOURCE = `\\*|(\\*\\.)?(${LABEL_SOURCE}\\.)*${LABEL_SOURCE}\\.?`;

/**
 * The rules the API server checks itself (box writes do not reach the webhook: admission/
 * webhook-policy.ts): each entry's shape, no unspecified address but all traffic, and domains
 * only in an allow-list. The node's agent checks again, and refuses what it cannot read.
 */
const ENTRY_RULES = [
  {
    rule: "self.all(e, !e.startsWith('0.0.0.0') || e == '0.0.0.0/0')",
    message: "an unspecified address matches nothing; 0.0.0.0/0 is all traffic",
  },
];
export const EGRESS_RULES_CEL = [
  {
    rule:
      `!has(self.allowOut) || self.allowOut.all(e, e.matches(r'^${IPV4_SOURCE}$')) || ` +
      `(has(self.denyOut) && self.denyOut.exists(d, d == '${ALL_TRAFFIC}'))`,
    message: `allowOut names domains, so denyOut must include ${ALL_TRAFFIC} (ALL_TRAFFIC)`,
    fieldPath: ".denyOut",
  },
];

/** E2B's `allowOut` and `denyOut`, as PodTemplates and PodBoxes take them in `spec.network`. */
export const egressRulesFields = {
  allowOut: z
    .array(
      z
        .string()
        .max(256)
        .regex(new RegExp(`^(${IPV4_SOURCE}|${DOMAIN_SOURCE})$`), {
          error: "must be an IPv4 address, a CIDR or a domain",
        }),
    )
    .max(MAX_EGRESS_ENTRIES)
    .optional()
    .meta({
      "x-kubernetes-validations": ENTRY_RULES,
      description:
        "Reachable whatever denyOut says (E2B's allowOut): IPv4 addresses, CIDRs, and domains (example.com, *.example.com for the names under it, * for any name) matched on the name the sandbox sends (TLS SNI, HTTP Host); domains need 0.0.0.0/0 in denyOut. Enforced by the node egress agent.",
    }),
  denyOut: z
    .array(
      z
        .string()
        .max(18)
        .regex(new RegExp(`^${IPV4_SOURCE}$`), { error: "must be an IPv4 address or CIDR" }),
    )
    .max(MAX_EGRESS_ENTRIES)
    .optional()
    .meta({
      "x-kubernetes-validations": ENTRY_RULES,
      description:
        "Not reachable unless allowOut allows it (E2B's denyOut): IPv4 addresses and CIDRs; 0.0.0.0/0 for all traffic. Enforced by the node egress agent.",
    }),
};

export type EgressRules = { allowOut?: string[]; denyOut?: string[] };

/** Checks the lists as E2B's API does, for a schema's superRefine. */
export function checkEgressRules(rules: EgressRules, ctx: z.RefinementCtx): void {
  let domains = false;
  for (const [i, entry] of (rules.denyOut ?? []).entries()) {
    const kind = egressEntry(entry);
    if (kind === "address") continue;
    const message =
      kind === "domain" ? `invalid denied CIDR ${entry}: only addresses and CIDRs` : kind.error;
    ctx.addIssue({ code: "custom", path: ["denyOut", i], message });
  }
  for (const [i, entry] of (rules.allowOut ?? []).entries()) {
    const kind = egressEntry(entry);
    if (typeof kind === "object")
      ctx.addIssue({ code: "custom", path: ["allowOut", i], message: kind.error });
    if (kind === "domain") domains = true;
  }
  if (domains && !(rules.denyOut ?? []).includes(ALL_TRAFFIC)) {
    ctx.addIssue({
      code: "custom",
      path: ["denyOut"],
      // E2B's own words (its API's ErrMsgDomainsRequireBlockAll).
      message: `When specifying allowed domains in allow out, you must include 'ALL_TRAFFIC' (${ALL_TRAFFIC}) in deny out to block all other traffic.`,
    });
  }
}
