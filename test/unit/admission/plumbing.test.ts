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
  shardLabelCondition,
  SPEC_CHANGES_ONLY,
  TIME_FIELDS,
} from "../../../capabilities/admission/webhook-policy";
import { timestamp, TIMESTAMP_SHAPE } from "../../../capabilities/api/common";

describe("hardenWebhookConfiguration", () => {
  const cfg = {
    kind: "ValidatingWebhookConfiguration",
    webhooks: [{ name: "pepr-cubepod.pepr.dev", failurePolicy: "Fail" }],
  };

  it("gives the mutating webhook CubePod's kinds only to stamp shard labels when sharded", () => {
    const mutating = { ...cfg, kind: "MutatingWebhookConfiguration" };
    type Hooked = { webhooks: { matchConditions?: { name: string; expression: string }[] }[] };
    const conditions = (c: object) => (c as Hooked).webhooks[0].matchConditions!;
    expect(conditions(hardenWebhookConfiguration(mutating))).toEqual([
      SANDBOX_PODS_ONLY,
      { name: "cubepod-shard-label", expression: 'request.resource.group != "pod.cubeplex.ai"' },
    ]);
    const sharded = conditions(hardenWebhookConfiguration(mutating, true));
    expect(sharded).toEqual([SANDBOX_PODS_ONLY, shardLabelCondition(true)]);
    expect(sharded[1].expression).toContain('request.operation == "CREATE"');
    expect(hardenWebhookConfiguration(hardenWebhookConfiguration(mutating, true))).toEqual(
      hardenWebhookConfiguration(mutating),
    );
  });

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

  it("leaves PodBox spec changes to the CRD's transition rules and its own timestamp check", () => {
    const e = BOX_UPDATES_CHECKED_BY_SCHEMA.expression;
    expect(e).toContain('request.operation == "UPDATE"');
    for (const f of TIME_FIELDS) {
      expect(e).toContain(`object.spec.${f}.matches(${JSON.stringify(TIMESTAMP_SHAPE.source)})`);
      expect(COMMON_BOX_CREATES_CHECKED_HERE.expression).toContain(
        `object.spec.${f}.matches(${JSON.stringify(TIMESTAMP_SHAPE.source)})`,
      );
    }
    // Every immutable field and the growing generation have a rule in the CRD.
    const rules = podBoxSpecSchema.meta()?.["x-kubernetes-validations"] as { fieldPath: string }[];
    expect(rules.map(r => r.fieldPath)).toEqual([
      ".templateRef",
      ".warmPoolRef",
      ".forkFrom",
      ".volumeKey",
      ".egress",
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
    expect(others).toEqual(["forkFrom", "volumeKey"]);
    for (const f of SCHEMA_CHECKED_BOX_FIELDS) expect(podBoxSpecSchema.shape).toHaveProperty(f);
    expect(COMMON_BOX_CREATES_CHECKED_HERE.expression).toContain(
      'object.metadata.name.matches("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")',
    );
  });

  it("checks timestamps in CEL only as zod would: the shape, with a date that exists, is enough", () => {
    // The API server checks the shape (CEL) and that the date exists (`format: date-time`).
    const exists = (t: string) => {
      const [y, m, d] = t.slice(0, 10).split("-").map(Number);
      return new Date(Date.UTC(y, m - 1, d)).getUTCDate() === d;
    };
    const zodAccepts = (t: string) => timestamp().safeParse(t).success;
    const digits = (n: number, max: number) =>
      String(Math.floor(Math.random() * (max + 1))).padStart(n, "0");
    for (let i = 0; i < 5000; i++) {
      const fraction = ["", `.${digits(1, 9)}`, `.${digits(3, 999)}`, `.${digits(9, 1e9 - 1)}`][
        i % 4
      ];
      const zone = [
        "Z",
        `+${digits(2, 23)}:${digits(2, 59)}`,
        `-${digits(2, 23)}:${digits(2, 59)}`,
      ][i % 3];
      const t =
        `${digits(4, 9999)}-${digits(2, 12)}-${digits(2, 31)}` +
        `T${digits(2, 23)}:${digits(2, 59)}:${digits(2, 59)}${fraction}${zone}`;
      if (TIMESTAMP_SHAPE.test(t) && exists(t)) expect([t, zodAccepts(t)]).toEqual([t, true]);
    }
    for (const t of ["2026-12-01T10:00:00", "2026-12-01 10:00:00Z", "2026-12-01t10:00:00z"]) {
      expect(TIMESTAMP_SHAPE.test(t)).toBe(false);
    }
  });

  it("builds the live patch and recognises webhook configurations", () => {
    expect(hardeningPatch(["a"], "ValidatingWebhookConfiguration")).toEqual({
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
