import { explainMutateDenial } from "../../../capabilities/admission/explain-denial";
import { podBoxSpecSchema } from "../../../capabilities/api/podbox";
import {
  BOX_UPDATES_CHECKED_BY_SCHEMA,
  COMMON_BOX_CREATES_CHECKED_HERE,
  hardenWebhookConfiguration,
  hardeningPatch,
  isWebhookConfiguration,
  MATCH_CONDITIONS,
  SANDBOX_PODS_ONLY,
  SCHEMA_CHECKED_BOX_FIELDS,
  SPEC_CHANGES_ONLY,
} from "../../../capabilities/admission/webhook-policy";

describe("hardenWebhookConfiguration", () => {
  const cfg = {
    kind: "MutatingWebhookConfiguration",
    webhooks: [{ name: "pepr-cubepod.pepr.dev", failurePolicy: "Fail" }],
  };

  it("adds the CubePod match conditions to every webhook, once", () => {
    const once = hardenWebhookConfiguration(cfg);
    expect(once.webhooks[0]).toEqual({
      ...cfg.webhooks[0],
      matchConditions: [
        SANDBOX_PODS_ONLY,
        SPEC_CHANGES_ONLY,
        COMMON_BOX_CREATES_CHECKED_HERE,
        BOX_UPDATES_CHECKED_BY_SCHEMA,
      ],
    });
    expect(hardenWebhookConfiguration(once)).toEqual(once);
    expect(cfg.webhooks[0]).not.toHaveProperty("matchConditions");
  });

  it("leaves PodBox spec changes to the CRD's transition rules, but for the lease", () => {
    const e = BOX_UPDATES_CHECKED_BY_SCHEMA.expression;
    expect(e).toContain('request.operation == "UPDATE"');
    expect(e).toContain("object.spec.leaseExpiresAt == oldObject.spec.leaseExpiresAt");
    // Every immutable field and the growing generation have a rule in the CRD.
    const rules = podBoxSpecSchema.meta()?.["x-kubernetes-validations"] as { fieldPath: string }[];
    expect(rules.map(r => r.fieldPath)).toEqual([
      ".templateRef",
      ".warmPoolRef",
      ".forkFrom",
      ".volumeKey",
      ".rootfsGeneration",
    ]);
  });

  it("names the template label in its CEL expression and passes non-Pod kinds", () => {
    expect(SANDBOX_PODS_ONLY.expression).toContain(
      '"pod.cubeplex.ai/template" in object.metadata.labels',
    );
    expect(SANDBOX_PODS_ONLY.expression).toMatch(
      /^request\.operation in \["CREATE", "UPDATE"\] && /,
    );
  });

  it("leaves every PodBox spec field it does not list to the module", () => {
    // A new spec field fails here until someone decides whether the CRD schema checks it fully.
    const others = Object.keys(podBoxSpecSchema.shape).filter(
      f => !(SCHEMA_CHECKED_BOX_FIELDS as readonly string[]).includes(f),
    );
    expect(others).toEqual(["forkFrom", "volumeKey", "leaseExpiresAt", "expiresAt"]);
    for (const f of SCHEMA_CHECKED_BOX_FIELDS) expect(podBoxSpecSchema.shape).toHaveProperty(f);
    expect(COMMON_BOX_CREATES_CHECKED_HERE.expression).toContain(
      'object.metadata.name.matches("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")',
    );
  });

  it("builds the live patch and recognises webhook configurations", () => {
    expect(hardeningPatch(["a"])).toEqual({
      webhooks: [{ name: "a", matchConditions: MATCH_CONDITIONS }],
    });
    expect(isWebhookConfiguration({ kind: "ValidatingWebhookConfiguration" })).toBe(true);
    expect(isWebhookConfiguration({ kind: "Deployment" })).toBe(false);
  });
});

describe("explainMutateDenial", () => {
  it("turns Pepr's warning into the denial message", () => {
    const res = { allowed: false, warnings: ['Action failed: PodTemplate "x" not found'] };
    explainMutateDenial(res);
    expect(res).toMatchObject({ status: { code: 400, message: 'PodTemplate "x" not found' } });
  });

  it("leaves allowed responses and explained denials alone", () => {
    const ok = { allowed: true, warnings: ["w"] };
    explainMutateDenial(ok);
    expect(ok).not.toHaveProperty("status");
    const denied = { allowed: false, status: { code: 422, message: "m" }, warnings: ["w"] };
    explainMutateDenial(denied);
    expect(denied.status).toEqual({ code: 422, message: "m" });
  });
});
