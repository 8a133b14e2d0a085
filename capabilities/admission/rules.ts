import { dnsLabel } from "../api/common";
import { PodBoxSpec, podBoxSpecSchema } from "../api/podbox";
import { PodTemplateSpec, podTemplateSpecSchema } from "../api/podtemplate";
import { PodWarmPoolSpec, podWarmPoolSpecSchema } from "../api/podwarmpool";
import { parseWithMessages } from "./zod-errors";

/** The outcome of validating one object: its defaulted spec, or every broken rule. */
export type Verdict<T> = { ok: true; spec: T } | { ok: false; errors: string[] };

const verdict = <T>(spec: T, errors: string[]): Verdict<T> =>
  errors.length > 0 ? { ok: false, errors } : { ok: true, spec };

/** Validates a PodTemplate's spec: the schema, then the rules across fields. */
export function validatePodTemplate(spec: unknown): Verdict<PodTemplateSpec> {
  const parsed = parseWithMessages(podTemplateSpecSchema, spec);
  if (!parsed.ok) return parsed;
  const s = parsed.value;
  const errors: string[] = [];
  if (s.egress?.enabled && !s.egress.image) {
    errors.push("spec.egress.image: is required when spec.egress.enabled is true");
  }
  if (s.mtls?.enabled && s.egress?.enabled && s.mtls.mountPath === "/etc/cubepod/egress") {
    errors.push(
      "spec.mtls.mountPath: must not be /etc/cubepod/egress (used by the egress sidecar)",
    );
  }
  return verdict(s, errors);
}

/** Validates a PodWarmPool's spec. */
export function validatePodWarmPool(spec: unknown): Verdict<PodWarmPoolSpec> {
  const parsed = parseWithMessages(podWarmPoolSpecSchema, spec);
  return parsed.ok ? { ok: true, spec: parsed.value } : parsed;
}

/** What the PodBox rules need to know besides the box itself. */
export type PodBoxContext = {
  /** The box's name; it becomes a label value, so it must be a DNS-1123 label. */
  name: string;
  /** The stored spec on UPDATE; absent on CREATE. */
  oldSpec?: Partial<PodBoxSpec>;
  /** The `spec.templateRef` of the pool named by `spec.warmPoolRef`, when that pool exists. */
  poolTemplateRef?: string;
};

const IMMUTABLE = ["templateRef", "warmPoolRef", "forkFrom", "volumeKey"] as const;
const boxName = dnsLabel(63);

/** Validates a PodBox's spec on create or update. */
export function validatePodBox(spec: unknown, ctx: PodBoxContext): Verdict<PodBoxSpec> {
  const errors: string[] = [];
  const name = boxName.safeParse(ctx.name);
  if (!name.success) {
    errors.push(
      "metadata.name: must be a lowercase RFC 1123 label of at most 63 characters (it becomes a label value)",
    );
  }
  const parsed = parseWithMessages(podBoxSpecSchema, spec);
  if (!parsed.ok) return { ok: false, errors: [...errors, ...parsed.errors] };
  const s = parsed.value;

  if (!s.templateRef && !s.warmPoolRef) {
    errors.push("spec.templateRef: is required unless spec.warmPoolRef is set");
  }
  if (s.forkFrom && s.warmPoolRef) {
    errors.push(
      "spec.forkFrom: cannot be combined with spec.warmPoolRef (a fork clones its parent and never claims a warm standby)",
    );
  }
  if (s.volumeKey && s.warmPoolRef) {
    errors.push(
      "spec.volumeKey: cannot be combined with spec.warmPoolRef (re-attached volumes never come from a warm standby)",
    );
  }
  if (s.forkFrom && s.volumeKey) {
    errors.push(
      "spec.forkFrom: cannot be combined with spec.volumeKey (a box either clones a parent or re-attaches kept volumes)",
    );
  }
  if (s.forkFrom && s.forkFrom === ctx.name) {
    errors.push("spec.forkFrom: may not name the box itself");
  }
  if (
    s.warmPoolRef &&
    s.templateRef &&
    ctx.poolTemplateRef !== undefined &&
    ctx.poolTemplateRef !== s.templateRef
  ) {
    errors.push(
      `spec.warmPoolRef: PodWarmPool "${s.warmPoolRef}" uses PodTemplate "${ctx.poolTemplateRef}", not spec.templateRef "${s.templateRef}"`,
    );
  }

  const old = ctx.oldSpec;
  if (old) {
    for (const field of IMMUTABLE) {
      if (old[field] !== s[field]) {
        errors.push(`spec.${field}: is immutable (was ${show(old[field])}, got ${show(s[field])})`);
      }
    }
    const was = old.rootfsGeneration ?? 1;
    if (s.rootfsGeneration < was) {
      errors.push(
        `spec.rootfsGeneration: may not decrease (was ${was}, got ${s.rootfsGeneration})`,
      );
    }
  }
  return verdict(s, errors);
}

const show = (v: unknown) => (v === undefined ? "unset" : JSON.stringify(v));
