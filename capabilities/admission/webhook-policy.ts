import { LABEL_TEMPLATE } from "../manifests/labels";

/**
 * Pepr 1.1.4 generates one webhook per configuration, with no objectSelector and, with
 * `onError: reject`, `failurePolicy: Fail`: every Pod create in the cluster would go through the
 * module and fail while it is down. This match condition, evaluated by the API server itself,
 * sends it only sandbox Pods (those labelled with a PodTemplate); every other request of the
 * webhook's rules (the CubePod kinds) still goes through. Unlabelled Pods never reach CubePod.
 *
 * Only CREATE and UPDATE are sent: Pepr's Finalize registers its mutation for every operation,
 * which would make a PodBox impossible to delete while the module is down, although the
 * finalizer exists precisely so that such a deletion is cleaned up later.
 */
export const SANDBOX_PODS_ONLY = {
  name: "cubepod-sandbox-pods-only",
  expression:
    `request.operation in ["CREATE", "UPDATE"] && ` +
    `(request.resource.group != "" || request.resource.resource != "pods" || ` +
    `(object != null && has(object.metadata.labels) && "${LABEL_TEMPLATE}" in object.metadata.labels))`,
};

type Webhook = { name: string; matchConditions?: { name: string; expression: string }[] };
type WebhookConfiguration = { kind?: string; webhooks?: Webhook[] };

/** True for Mutating/ValidatingWebhookConfiguration objects. */
export function isWebhookConfiguration(obj: { kind?: string } | null | undefined): boolean {
  return (
    obj?.kind === "MutatingWebhookConfiguration" || obj?.kind === "ValidatingWebhookConfiguration"
  );
}

/** Returns the configuration with {@link SANDBOX_PODS_ONLY} on every webhook (idempotent). */
export function hardenWebhookConfiguration<T extends WebhookConfiguration>(cfg: T): T {
  return {
    ...cfg,
    webhooks: (cfg.webhooks ?? []).map(w => ({
      ...w,
      matchConditions: [
        ...(w.matchConditions ?? []).filter(c => c.name !== SANDBOX_PODS_ONLY.name),
        SANDBOX_PODS_ONLY,
      ],
    })),
  };
}

/** A strategic-merge patch adding the match condition to live webhooks with these names. */
export function hardeningPatch(webhookNames: string[]) {
  return { webhooks: webhookNames.map(name => ({ name, matchConditions: [SANDBOX_PODS_ONLY] })) };
}
