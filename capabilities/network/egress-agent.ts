import { createHash } from "node:crypto";
import { type Condition, GROUP } from "../api/common";
import { condition } from "../kit/conditions";
import type { EgressRules } from "../api/egress-rules";

/**
 * The node egress agent's side of a sandbox Pod (podd/egressagent/plan.go; decision 0028): the
 * operator writes the box's rules on its Pod, and the agent of the Pod's node answers with their
 * digest once its node enforces them ("invalid: " and why, when it refused them).
 */
export const ANNOTATION_EGRESS = `${GROUP}/egress`;
export const ANNOTATION_EGRESS_APPLIED = `${GROUP}/egress-applied`;

/** The box condition that says whether its Pod's node enforces its rules. */
export const EGRESS_CONDITION = "EgressApplied";

type WithNetwork = { network?: EgressRules | null } | undefined | null;

/**
 * A box's egress rules: its own `allowOut`/`denyOut` when it sets either (both replace its
 * template's), else its template's; none with `egress: None`, which its NetworkPolicy already
 * makes nothing, or when neither sets them.
 */
export function egressRulesOf(
  box: { egress?: string; network?: EgressRules | null } | undefined,
  template: WithNetwork,
): EgressRules | undefined {
  if (box?.egress === "None") return undefined;
  const own = box?.network;
  const from =
    own?.allowOut !== undefined || own?.denyOut !== undefined
      ? own
      : template?.network?.allowOut !== undefined || template?.network?.denyOut !== undefined
        ? template.network
        : undefined;
  if (!from) return undefined;
  return {
    ...(from.allowOut?.length ? { allowOut: from.allowOut } : {}),
    ...(from.denyOut?.length ? { denyOut: from.denyOut } : {}),
  };
}

/** The annotation's value: the rules as JSON, keys in a fixed order. */
export const egressAnnotation = (rules: EgressRules): string =>
  JSON.stringify({
    ...(rules.allowOut ? { allowOut: rules.allowOut } : {}),
    ...(rules.denyOut ? { denyOut: rules.denyOut } : {}),
  });

/** What the agent answers once it enforces an annotation's value. */
export const egressDigest = (value: string): string =>
  createHash("sha256").update(value).digest("hex");

/** Where a Pod's rules stand, from its two annotations and the value it should have. */
export function egressState(
  wanted: string,
  pod: { egress?: string; egressApplied?: string } | undefined,
): { applied: boolean; reason: string; message: string } {
  if (!pod) return { applied: false, reason: "NoPod", message: "no Pod runs the sandbox" };
  if (pod.egress !== wanted) {
    return {
      applied: false,
      reason: "Updating",
      message: "the rules are being written on the Pod",
    };
  }
  if (pod.egressApplied === egressDigest(wanted)) {
    return { applied: true, reason: "Enforced", message: `the node enforces ${wanted}` };
  }
  if (pod.egressApplied?.startsWith("invalid: ")) {
    return {
      applied: false,
      reason: "RefusedByAgent",
      message: `the node's egress agent refused the rules: ${pod.egressApplied.slice(9)}; the sandbox reaches nothing`,
    };
  }
  return {
    applied: false,
    reason: "WaitingForAgent",
    message: "waiting for the node's egress agent to enforce the rules",
  };
}

/** A Pod's egress annotations, as the decisions read them (an observed Pod, a standby). */
export function egressOfPod(annotations: Record<string, string> | undefined): {
  egress?: string;
  egressApplied?: string;
} {
  const egress = annotations?.[ANNOTATION_EGRESS];
  const egressApplied = annotations?.[ANNOTATION_EGRESS_APPLIED];
  return {
    ...(egress !== undefined ? { egress } : {}),
    ...(egressApplied !== undefined ? { egressApplied } : {}),
  };
}

/**
 * A box's {@link EGRESS_CONDITION} for the rules it wants on the Pod it runs on; none when it
 * wants none.
 */
export function egressCondition(
  wanted: string | undefined,
  pod: { egress?: string; egressApplied?: string } | undefined,
  previous: Condition[] | undefined,
  generation: number,
  now: string,
): Condition[] {
  if (wanted === undefined) return [];
  const state = egressState(wanted, pod);
  const status = state.applied ? ("True" as const) : ("False" as const);
  return [
    condition(
      previous,
      { type: EGRESS_CONDITION, status, reason: state.reason, message: state.message },
      generation,
      now,
    ),
  ];
}
