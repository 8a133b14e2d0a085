import { z } from "zod";

/** Renders one zod issue as the rule that was broken, in the words of a Kubernetes field error. */
const errorMap: z.core.$ZodErrorMap = iss => {
  switch (iss.code) {
    case "invalid_type":
      if (iss.input === undefined) return "is required";
      return `must be ${typeName(iss.expected)} (got ${describe(iss.input)})`;
    case "too_small":
      if (iss.origin === "string")
        return iss.minimum === 1
          ? "must not be empty"
          : `must be at least ${iss.minimum} characters`;
      if (iss.origin === "array") return `must have at least ${iss.minimum} items`;
      return `must be ${iss.inclusive ? ">=" : ">"} ${iss.minimum}`;
    case "too_big":
      if (iss.origin === "string") return `must be at most ${iss.maximum} characters`;
      if (iss.origin === "array") return `must have at most ${iss.maximum} items`;
      return `must be ${iss.inclusive ? "<=" : "<"} ${iss.maximum}`;
    case "invalid_key":
      // The key's own rule, e.g. the form of a resource name.
      return iss.issues[0]?.message ?? "is not a valid key";
    case "invalid_value":
      return `must be one of ${iss.values.map(v => JSON.stringify(v)).join(", ")} (got ${describe(iss.input)})`;
    default:
      return undefined;
  }
};

function typeName(t: string): string {
  if (t === "int") return "a whole number";
  if (t === "object" || t === "array" || t === "integer") return `an ${t}`;
  return `a ${t}`;
}

function describe(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "an array";
  if (typeof v === "string") return JSON.stringify(v);
  if (typeof v === "number" || typeof v === "boolean") return String(v);
  return `a ${typeof v}`;
}

/** Joins a zod path as a Kubernetes field path: `spec.env[0].name`. */
export function fieldPath(root: string, path: PropertyKey[]): string {
  const plain = /^[A-Za-z_][A-Za-z0-9_]*$/;
  return path.reduce<string>(
    (acc, k) =>
      typeof k === "number"
        ? `${acc}[${k}]`
        : plain.test(String(k))
          ? `${acc}.${String(k)}`
          : `${acc}[${JSON.stringify(String(k))}]`,
    root,
  );
}

/**
 * Parses `value` with `schema`. Returns the parsed (defaulted) value, or one message per broken rule,
 * each naming the field, e.g. `spec.replicas: must be >= 0`.
 */
export function parseWithMessages<S extends z.ZodType>(
  schema: S,
  value: unknown,
  root = "spec",
): { ok: true; value: z.output<S> } | { ok: false; errors: string[] } {
  const r = schema.safeParse(value, { error: errorMap });
  if (r.success) return { ok: true, value: r.data };
  return { ok: false, errors: r.error.issues.map(i => `${fieldPath(root, i.path)}: ${i.message}`) };
}
