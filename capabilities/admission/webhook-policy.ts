import { DNS_LABEL, GROUP, TIMESTAMP_SHAPE } from "../api/common";
import { LABEL_SHARD, LABEL_TEMPLATE } from "../manifests/labels";

/**
 * Pepr 1.1.4 generates one webhook per configuration, with no objectSelector and, with
 * `onError: reject`, `failurePolicy: Fail`: every Pod create in the cluster would go through the
 * module and fail while it is down. This match condition, evaluated by the API server itself,
 * sends it only sandbox Pods (those labelled with a PodTemplate); every other request of the
 * webhook's rules (the CubePod kinds) still goes through. Unlabelled Pods never reach CubePod.
 *
 * Only CREATE and UPDATE are sent: no rule of the module concerns other operations, and a
 * binding that registered for every operation (Pepr's `Finalize` does) would make objects
 * impossible to delete while the module is down.
 */
export const SANDBOX_PODS_ONLY = {
  name: "cubepod-sandbox-pods-only",
  expression:
    `request.operation in ["CREATE", "UPDATE"] && ` +
    `(request.resource.group != "" || request.resource.resource != "pods" || ` +
    `(object != null && has(object.metadata.labels) && "${LABEL_TEMPLATE}" in object.metadata.labels))`,
};

/**
 * Updates of the CubePod kinds that leave `spec` as it was (the finalizer, labels, the activity
 * annotation a gateway bumps) are not sent either: every rule the module checks is about the
 * spec. They cost no webhook call, and they go through while the module is down.
 */
export const SPEC_CHANGES_ONLY = {
  name: "cubepod-spec-changes-only",
  expression:
    `request.operation != "UPDATE" || request.resource.group != "${GROUP}" || ` +
    `!has(object.spec) || !has(oldObject.spec) || object.spec != oldObject.spec`,
};

/**
 * PodBox fields whose every rule the API server checks itself before any validating webhook: the
 * CRD schema is generated from the same zod schema (patterns, enums, minimums), and the one rule
 * it lacks, zod's integer range, is checked below, as is the shape zod gives the two timestamps
 * ({@link TIME_FIELDS}). `forkFrom` and `volumeKey` are not here: they take part in rules across
 * fields.
 */
export const SCHEMA_CHECKED_BOX_FIELDS = [
  "templateRef",
  "warmPoolRef",
  "desiredState",
  "rootfsGeneration",
  "idleTimeoutSeconds",
  "volumeReclaimPolicy",
  "onExpiry",
  "leaseExpiresAt",
  "expiresAt",
  "egress",
  "network",
] as const;

/**
 * zod reads timestamps more strictly than the schema's `format: date-time`; this CEL check of
 * their shape, with that format, admits exactly what zod admits.
 */
export const TIME_FIELDS = ["leaseExpiresAt", "expiresAt"] as const;
const TIME_SHAPE = (field: string) =>
  `(!has(object.spec.${field}) || object.spec.${field}.matches(${JSON.stringify(TIMESTAMP_SHAPE.source)}))`;
const TIMES_SHAPED = TIME_FIELDS.map(TIME_SHAPE).join(" && ");

const SAFE_INT = (field: string) =>
  `(!has(object.spec.${field}) || (type(object.spec.${field}) == int && ` +
  `object.spec.${field} <= ${Number.MAX_SAFE_INTEGER}))`;

/**
 * The two common PodBox creates, a warm claim (`warmPoolRef` alone) and a cold start
 * (`templateRef` alone), are not sent when no rule of the module can refuse them: their fields
 * are all {@link SCHEMA_CHECKED_BOX_FIELDS}, exactly one reference is set (so no rule across
 * fields applies, and no pool has to be looked up), and the name rule is checked here. This takes
 * the webhook off the warm claim's path (a few milliseconds of its tens), and such boxes can be
 * created while the module is down: with a lease or an expiry too, as the gateway makes them.
 * Every other create is sent.
 */
export const COMMON_BOX_CREATES_CHECKED_HERE = {
  name: "cubepod-box-create-needs-module",
  expression:
    `!(request.operation == "CREATE" && request.resource.group == "${GROUP}" && ` +
    `request.resource.resource == "podboxes" && has(object.spec) && ` +
    `object.spec.all(f, f in ${JSON.stringify(SCHEMA_CHECKED_BOX_FIELDS)}) && ` +
    `has(object.spec.templateRef) != has(object.spec.warmPoolRef) && ` +
    `${SAFE_INT("rootfsGeneration")} && ${SAFE_INT("idleTimeoutSeconds")} && ${TIMES_SHAPED} && ` +
    `has(object.metadata.name) && size(object.metadata.name) <= 63 && ` +
    `object.metadata.name.matches(${JSON.stringify(DNS_LABEL.source)}))`,
};

/**
 * PodBox spec changes are not sent either: the CRD's transition rules (BOX_UPDATE_RULES, from the
 * zod source) check immutability and the growing rootfsGeneration, and the schema every field, so
 * pause, resume, reset and a new lease or expiry work while the module is down. Sent still:
 * integers beyond zod's range, and timestamps of another shape than zod's.
 */
export const BOX_UPDATES_CHECKED_BY_SCHEMA = {
  name: "cubepod-box-update-needs-module",
  expression:
    `!(request.operation == "UPDATE" && request.resource.group == "${GROUP}" && ` +
    `request.resource.resource == "podboxes" && has(object.spec) && has(oldObject.spec) && ` +
    `${TIMES_SHAPED} && ${SAFE_INT("rootfsGeneration")} && ${SAFE_INT("idleTimeoutSeconds")})`,
};

/** The validating webhook's match conditions, in order. */
export const MATCH_CONDITIONS = [
  SANDBOX_PODS_ONLY,
  SPEC_CHANGES_ONLY,
  COMMON_BOX_CREATES_CHECKED_HERE,
  BOX_UPDATES_CHECKED_BY_SCHEMA,
];

const LABELS = (o: string) => `${o}.metadata.labels`;
const SHARD_OF = (o: string) =>
  `has(${LABELS(o)}) && "${LABEL_SHARD}" in ${LABELS(o)} ? ${LABELS(o)}["${LABEL_SHARD}"] : ""`;

/**
 * The mutating webhook sees CubePod's kinds only to stamp their shard label, so only when the
 * watchers are sharded: then on every create, and on an update that removes or changes the label
 * (which it sets back). With one watcher, the API server never calls it for them.
 */
export function shardLabelCondition(sharded: boolean) {
  return {
    name: "cubepod-shard-label",
    expression: sharded
      ? `request.resource.group != "${GROUP}" || request.operation == "CREATE" || ` +
        `(${SHARD_OF("object")}) == "" || (${SHARD_OF("object")}) != (${SHARD_OF("oldObject")})`
      : `request.resource.group != "${GROUP}"`,
  };
}

/** The match conditions of a webhook configuration of this kind, in order. */
export function matchConditionsOf(kind: string | undefined, sharded: boolean) {
  return kind === "MutatingWebhookConfiguration"
    ? [SANDBOX_PODS_ONLY, shardLabelCondition(sharded)]
    : MATCH_CONDITIONS;
}
const OURS = [...MATCH_CONDITIONS.map(c => c.name), shardLabelCondition(false).name];

type Webhook = { name: string; matchConditions?: { name: string; expression: string }[] };
type WebhookConfiguration = { kind?: string; webhooks?: Webhook[] };

/** True for Mutating/ValidatingWebhookConfiguration objects. */
export function isWebhookConfiguration(obj: { kind?: string } | null | undefined): boolean {
  return (
    obj?.kind === "MutatingWebhookConfiguration" || obj?.kind === "ValidatingWebhookConfiguration"
  );
}

/** Returns the configuration with its kind's match conditions on every webhook (idempotent). */
export function hardenWebhookConfiguration<T extends WebhookConfiguration>(
  cfg: T,
  sharded = false,
): T {
  return {
    ...cfg,
    webhooks: (cfg.webhooks ?? []).map(w => ({
      ...w,
      matchConditions: [
        ...(w.matchConditions ?? []).filter(c => !OURS.includes(c.name)),
        ...matchConditionsOf(cfg.kind, sharded),
      ],
    })),
  };
}

/** A strategic-merge patch adding the match conditions to live webhooks with these names. */
export function hardeningPatch(webhookNames: string[], kind: string, sharded = false) {
  const matchConditions = matchConditionsOf(kind, sharded);
  return { webhooks: webhookNames.map(name => ({ name, matchConditions })) };
}
