import { z } from "zod";

type Schema = Record<string, unknown>;

/**
 * Converts a zod schema into a Kubernetes structural `openAPIV3Schema`. Defaults stay (the API
 * server applies them), the constructs Kubernetes rejects or that only add noise are removed.
 */
export function toStructuralSchema(schema: z.ZodType): Schema {
  const json = z.toJSONSchema(schema, {
    io: "input",
    target: "openapi-3.0",
    unrepresentable: "throw",
  });
  return clean(json as Schema);
}

function clean(node: Schema): Schema {
  const out: Schema = {};
  for (const [key, value] of Object.entries(node)) {
    if (key === "$schema" || key === "propertyNames" || key === "id") continue;
    // Structural schemas forbid `additionalProperties: false`; unknown fields are pruned instead.
    if (key === "additionalProperties" && value === false) continue;
    // A field kept as written: its schema is the marker alone (structural schemas allow no other).
    if (key === "additionalProperties" && node["x-kubernetes-preserve-unknown-fields"]) continue;
    // zod bounds every integer to the JS safe range; Kubernetes integers are int64 already.
    if (
      (key === "maximum" || key === "minimum") &&
      Math.abs(value as number) === Number.MAX_SAFE_INTEGER
    )
      continue;
    // `format: date-time` is validated by the API server; zod's equivalent regex is noise there.
    if (key === "pattern" && node.format === "date-time") continue;
    out[key] = deepClean(value);
  }
  return out;
}

function deepClean(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(deepClean);
  if (value && typeof value === "object") return clean(value as Schema);
  return value;
}
