import type { a, PeprValidateRequest } from "pepr";
import type { CubePodTemplate, PodBox, PodWarmPool } from "../api/kinds";
import type { PodTemplateSpec } from "../api/podtemplate";
import type { Config } from "../config";
import type { ApiClient } from "../client/api-client";
import { paths } from "../client/paths";
import {
  blockModeRule,
  egressAgentRule,
  nameRule,
  sidecarRuntimeRule,
  validatePodBox,
  validatePodTemplate,
  validatePodWarmPool,
  Verdict,
} from "./rules";
import { accessNeeded, describeAccess, missingAccess } from "./template-access";
import { dryRunErrors } from "./template-dry-run";

type Req<T extends a.GenericKind> = PeprValidateRequest<T>;

/** An object on its way out is never held back, whatever its spec. */
const deleting = <T extends a.GenericKind>(req: Req<T>) =>
  Boolean(req.Raw.metadata?.deletionTimestamp);

const answer = <T extends a.GenericKind, S>(req: Req<T>, verdict: Verdict<S>) =>
  verdict.ok ? req.Approve() : req.Deny(verdict.errors.join("; "), 422);

/**
 * Validate action for PodTemplate creates and updates: the schema and rules, then the rights the
 * template would lend (see {@link accessNeeded}), asked of the API server for the requesting user,
 * and what the API server would say of the objects it makes ({@link dryRunErrors}).
 */
export async function validateTemplateRequest(
  req: Req<CubePodTemplate>,
  client: ApiClient,
  config: Pick<Config, "vmRuntimeClasses" | "gvisorRuntimeClasses"> & { egressAgent: boolean },
) {
  if (deleting(req)) return req.Approve();
  const { vmRuntimeClasses } = config;
  const spec = validatePodTemplate(req.Raw.spec);
  const rules = (s: PodTemplateSpec) => [
    ...blockModeRule(s, vmRuntimeClasses),
    ...egressAgentRule(s, config.egressAgent),
    ...sidecarRuntimeRule(s, config.gvisorRuntimeClasses),
  ];
  const verdict = withName(
    spec.ok ? withErrors(spec, rules(spec.spec)) : spec,
    nameRule("PodTemplate", req.Raw.metadata?.name ?? ""),
  );
  // Updates that leave the spec as it was never reach here (webhook-policy.ts, SPEC_CHANGES_ONLY).
  if (!verdict.ok) return answer(req, verdict);
  const namespace = req.Raw.metadata?.namespace || req.Request.namespace || "";
  const [missing, invalid] = await Promise.all([
    missingAccess(client, req.Request.userInfo, namespace, accessNeeded(verdict.spec)),
    dryRunErrors(client, namespace, req.Raw.metadata?.name ?? "", verdict.spec, vmRuntimeClasses),
  ]);
  if (invalid.length > 0) return req.Deny(invalid.join("; "), 422);
  if (missing.length === 0) return req.Approve();
  const rights = missing.map(a => describeAccess(a, namespace)).join("; ");
  return req.Deny(
    `a PodTemplate makes CubePod create Pods from it and mount the Secrets it names, so its ` +
      `author needs those rights; ${req.Request.userInfo.username ?? "the requester"} may not: ${rights}`,
    422,
  );
}

/** Validate action for PodWarmPool creates and updates. */
export async function validateWarmPoolRequest(req: Req<PodWarmPool>) {
  if (deleting(req)) return req.Approve();
  const name = nameRule("PodWarmPool", req.Raw.metadata?.name ?? "");
  return answer(req, withName(validatePodWarmPool(req.Raw.spec), name));
}

/** A verdict with the errors of a rule outside the schema added. */
function withErrors<S>(verdict: Verdict<S>, errors: string[]): Verdict<S> {
  return errors.length === 0 ? verdict : { ok: false, errors };
}

/** A verdict with the object's name rule added (names are fixed once created). */
function withName<S>(verdict: Verdict<S>, nameErrors: string[]): Verdict<S> {
  if (nameErrors.length === 0) return verdict;
  return { ok: false, errors: [...nameErrors, ...(verdict.ok ? [] : verdict.errors)] };
}

/** Validate action for PodBox creates and updates; `client` reads the pool a create names. */
export async function validateBoxRequest(req: Req<PodBox>, client: ApiClient) {
  if (deleting(req)) return req.Approve();
  const spec = req.Raw.spec;
  const oldSpec =
    req.Request.operation === "UPDATE"
      ? ((req.OldResource as PodBox | undefined)?.spec ?? {})
      : undefined;
  // Only a create can pair a pool with a template (both are immutable afterwards).
  const poolTemplateRef =
    !oldSpec && spec?.warmPoolRef && spec.templateRef
      ? await poolTemplate(
          client,
          req.Raw.metadata?.namespace || req.Request.namespace || "",
          spec.warmPoolRef,
        )
      : undefined;
  return answer(
    req,
    validatePodBox(spec, { name: req.Raw.metadata?.name ?? "", oldSpec, poolTemplateRef }),
  );
}

async function poolTemplate(
  client: ApiClient,
  namespace: string,
  pool: string,
): Promise<string | undefined> {
  // A pool that does not exist yet is fine (GitOps applies in any order); the reconciler reports it.
  return (await client.get<PodWarmPool>(paths.podWarmPools(namespace, pool)))?.spec?.templateRef;
}
