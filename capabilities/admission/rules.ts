import { dnsLabel } from "../api/common";
import { IMMUTABLE_BOX_FIELDS, PodBoxSpec, podBoxSpecSchema } from "../api/podbox";
import { PodTemplateSpec, podTemplateSpecSchema } from "../api/podtemplate";
import { PodWarmPoolSpec, podWarmPoolSpecSchema } from "../api/podwarmpool";
import { quantityValue } from "../api/quantity";
import { parseWithMessages } from "./zod-errors";

/**
 * Fields a PodTemplate no longer has, and why. The CRD leaves them out, so the API server refuses
 * or drops them; a CRD older than the module still takes them, and the schema would drop them
 * without a word, so validation names them.
 */
const REMOVED_TEMPLATE_FIELDS: Record<string, string> = {
  mtls:
    "removed (docs/decisions/0027-mtls-left-to-the-cluster-network.md): CubePod does not issue " +
    "per-Pod certificates; encrypt Pod traffic with the cluster network (CNI encryption or a service mesh)",
};

/** The removed fields a PodTemplate's spec still carries, each as a refusal. */
function removedFields(spec: unknown): string[] {
  if (typeof spec !== "object" || spec === null) return [];
  return Object.entries(REMOVED_TEMPLATE_FIELDS)
    .filter(([field]) => Object.hasOwn(spec, field))
    .map(([field, why]) => `spec.${field}: ${why}`);
}

/**
 * The longest name of a PodTemplate: it becomes the value of the label
 * `pod.cubeplex.ai/template` on its Pods, and label values have at most 63 characters.
 */
export const MAX_TEMPLATE_NAME = 63;
/** The longest name of a PodWarmPool: its standbys are `<pool>-<6 hex>`, a label value too. */
export const MAX_POOL_NAME = 56;

/** The rule on an object's name whose derived names must stay valid, if it is broken. */
export function nameRule(kind: "PodTemplate" | "PodWarmPool", name: string): string[] {
  const max = kind === "PodTemplate" ? MAX_TEMPLATE_NAME : MAX_POOL_NAME;
  if (name.length <= max) return [];
  const why =
    kind === "PodTemplate"
      ? "it becomes the label value pod.cubeplex.ai/template on its Pods"
      : "its standbys are named <pool>-<6 characters>, used as label values";
  return [`metadata.name: must be at most ${max} characters (${why}); got ${name.length}`];
}

/** The outcome of validating one object: its defaulted spec, or every broken rule. */
export type Verdict<T> = { ok: true; spec: T } | { ok: false; errors: string[] };

const verdict = <T>(spec: T, errors: string[]): Verdict<T> =>
  errors.length > 0 ? { ok: false, errors } : { ok: true, spec };

/** Validates a PodTemplate's spec: the schema, then the rules across fields. */
export function validatePodTemplate(spec: unknown): Verdict<PodTemplateSpec> {
  const errors = removedFields(spec);
  const parsed = parseWithMessages(podTemplateSpecSchema, spec);
  if (!parsed.ok) return { ok: false, errors: [...errors, ...parsed.errors] };
  const s = parsed.value;
  if (s.rootfs.seed && s.volumeMode !== "Filesystem") {
    errors.push(
      "spec.rootfs.seed: only Filesystem mode keeps a seed (in Block mode podd-init fills the device inside the sandbox)",
    );
  }
  for (const [resource, request] of Object.entries(s.resources?.requests ?? {})) {
    const limit = s.resources?.limits?.[resource];
    if (limit !== undefined && quantityValue(request)! > quantityValue(limit)!) {
      errors.push(
        `spec.resources.requests.${resource}: must not exceed spec.resources.limits.${resource} (${request} > ${limit})`,
      );
    }
  }
  return verdict(s, errors);
}

/**
 * Block mode's devices are formatted and mounted by podd-init inside the sandbox, which takes
 * rights CubePod grants only where the kernel is the sandbox's own: a VM runtime. A template that
 * names another runtime could never start a box.
 */
export function blockModeRule(
  spec: PodTemplateSpec,
  vmRuntimeClasses: readonly string[],
): string[] {
  if (spec.volumeMode !== "Block" || vmRuntimeClasses.includes(spec.runtimeClassName)) return [];
  const runtime = spec.runtimeClassName
    ? `runtimeClassName ${JSON.stringify(spec.runtimeClassName)} is not one`
    : "no runtimeClassName is the cluster's default runtime, not one";
  return [
    `spec.volumeMode: Block needs a VM runtime, one of the RuntimeClasses ${vmRuntimeClasses.join(", ")} ` +
      `(the module's CUBEPOD_VM_RUNTIME_CLASSES), as the sandbox formats and mounts its devices in its own kernel; ` +
      `${runtime}: use Filesystem, or one of those`,
  ];
}

/**
 * `allowOut` and `denyOut` are enforced by the node egress agent alone: in a cluster that does not
 * run it, a template with them is refused rather than its sandboxes started with them ignored.
 */
export function egressAgentRule(spec: PodTemplateSpec, egressAgent: boolean): string[] {
  const named = (["allowOut", "denyOut"] as const).filter(f => spec.network[f] !== undefined);
  if (egressAgent || named.length === 0) return [];
  return [
    `spec.network: ${named.join(" and ")} need the node egress agent, which this cluster does not ` +
      `run (the module's CUBEPOD_EGRESS_AGENT_ADDRESSES is unset; docs/network.md)`,
  ];
}

/**
 * The egress sidecar isolates the Pod with netfilter rules in its network namespace, which
 * gVisor's network stack does not serve (decision 0019): such a template's boxes would never
 * start. Refused with what to use instead.
 */
export function sidecarRuntimeRule(
  spec: PodTemplateSpec,
  gvisorRuntimeClasses: readonly string[],
): string[] {
  if (!spec.egress?.enabled || !gvisorRuntimeClasses.includes(spec.runtimeClassName)) return [];
  return [
    `spec.egress: the egress sidecar isolates the Pod with netfilter rules, which gVisor ` +
      `(runtimeClassName ${JSON.stringify(spec.runtimeClassName)}) does not serve; use ` +
      `spec.network.allowOut and denyOut, enforced by the node egress agent outside the sandbox, ` +
      `or a runtime other than gVisor`,
  ];
}

/** Validates a PodWarmPool's spec. */
export function validatePodWarmPool(spec: unknown): Verdict<PodWarmPoolSpec> {
  const parsed = parseWithMessages(podWarmPoolSpecSchema, spec);
  if (!parsed.ok) return parsed;
  const s = parsed.value;
  const max = s.autoscale?.maxReplicas;
  return verdict(
    s,
    max !== undefined && max < s.replicas
      ? [`spec.autoscale.maxReplicas: must be >= spec.replicas, the floor (${max} < ${s.replicas})`]
      : [],
  );
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
    for (const field of IMMUTABLE_BOX_FIELDS) {
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
