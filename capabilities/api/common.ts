import { isIP } from "node:net";
import { z } from "zod";
import { QUANTITY_PATTERN, quantityValue } from "./quantity";

/** API group and version of every CubePod kind. */
export const GROUP = "pod.cubeplex.ai";
export const VERSION = "v1alpha1";
export const API_VERSION = `${GROUP}/${VERSION}`;

/** The port podd (the in-sandbox daemon, E2B's envd) listens on unless the template says otherwise. */
export const DEFAULT_ENVD_PORT = 49983;
/** The account a sandbox's commands run as unless a call names one, as in E2B's templates. */
export const DEFAULT_SANDBOX_USER = "user";

/** An RFC 1123 label: the form of label values and of names used inside other names. */
export const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/**
 * The name of another object in the same namespace. A bare name (never `ns/name`) is what makes
 * cross-namespace references impossible by construction.
 */
export const objectName = (what: string, scope: "namespaced" | "cluster" = "namespaced") =>
  z
    .string()
    .min(1, { error: `must name a ${what}` })
    .max(253, { error: "must be at most 253 characters" })
    .regex(DNS_SUBDOMAIN, {
      error: `must be the name of a ${what}${scope === "namespaced" ? " in the same namespace" : ""} (lowercase RFC 1123 subdomain)`,
    });

/** A DNS-1123 label, used where the value becomes part of object names. */
export const dnsLabel = (max = 63) =>
  z
    .string()
    .min(1, { error: "must not be empty" })
    .max(max, { error: `must be at most ${max} characters` })
    .regex(DNS_LABEL, { error: "must be a lowercase RFC 1123 label (a-z, 0-9, '-')" });

/** The longest quantity written out: far more digits than any real amount needs. */
export const MAX_QUANTITY_LENGTH = 64;
/** The largest resource amount a template may ask for (bytes or cores): a guard against typos. */
export const MAX_QUANTITY = "8Pi";
const MAX_QUANTITY_VALUE = quantityValue(MAX_QUANTITY)!;

/** A Kubernetes quantity, not negative, such as `500m` or `2Gi` (requests and limits). */
export const quantity = () =>
  z
    .string()
    .max(MAX_QUANTITY_LENGTH, {
      error: `must be at most ${MAX_QUANTITY_LENGTH} characters`,
      abort: true,
    })
    .regex(QUANTITY_PATTERN, {
      error: "must be a Kubernetes quantity such as 500m or 2Gi",
      abort: true,
    })
    .refine(q => (quantityValue(q) ?? 0) >= 0, { error: "must not be negative", abort: true })
    .refine(q => (quantityValue(q) ?? Infinity) <= MAX_QUANTITY_VALUE, {
      error: `must be at most ${MAX_QUANTITY}`,
    });

/** The largest volume a template may ask for: a guard against typos, far above any sandbox's. */
export const MAX_VOLUME_SIZE = "64Ti";

const MAX_VOLUME_BYTES = quantityValue(MAX_VOLUME_SIZE)!;

/** A volume size: a quantity above 0 and at most {@link MAX_VOLUME_SIZE}, such as `10Gi`. */
export const volumeSize = () =>
  z
    .string()
    .max(MAX_QUANTITY_LENGTH, {
      error: `must be at most ${MAX_QUANTITY_LENGTH} characters`,
      abort: true,
    })
    .regex(QUANTITY_PATTERN, { error: "must be a Kubernetes quantity such as 10Gi", abort: true })
    .refine(q => (quantityValue(q) ?? 0) > 0, { error: "must be above 0" })
    .refine(q => (quantityValue(q) ?? 0) <= MAX_VOLUME_BYTES, {
      error: `must be at most ${MAX_VOLUME_SIZE}`,
    });

/** A resource name in requests and limits: `cpu`, `memory`, or a qualified name. */
const RESOURCE_NAME =
  /^([a-z0-9]([-a-z0-9.]*[a-z0-9])?\/)?[a-zA-Z0-9]([-a-zA-Z0-9_.]*[a-zA-Z0-9])?$/;
const resourceName = () =>
  z.string().regex(RESOURCE_NAME, {
    error: "must be a resource name such as cpu, memory or example.com/gpu",
  });

/** The longest image reference: a registry host, a repository path of 255 and a digest fit. */
export const MAX_IMAGE_LENGTH = 1024;

/** A non-empty container image reference. */
export const image = () =>
  z
    .string()
    .max(MAX_IMAGE_LENGTH, { error: `must be at most ${MAX_IMAGE_LENGTH} characters`, abort: true })
    .regex(/^\S+$/, {
      error: "must be a container image reference (not empty, no whitespace)",
    });

/** An IPv4 or IPv6 CIDR, as NetworkPolicy's ipBlock takes it. */
export function isCIDR(text: string): boolean {
  const [address, bits, ...rest] = text.split("/");
  if (rest.length > 0 || bits === undefined || !/^\d{1,3}$/.test(bits)) return false;
  const family = isIP(address);
  return family !== 0 && Number(bits) <= (family === 4 ? 32 : 128);
}

/** A CIDR: its shape in the CRD, and {@link isCIDR} at admission. */
export const cidr = () =>
  z
    .string()
    .max(49)
    .regex(/^[0-9a-fA-F.:]+\/[0-9]{1,3}$/, {
      error: "must be a CIDR such as 203.0.113.0/24",
      abort: true,
    })
    .refine(isCIDR, { error: "must be a CIDR such as 203.0.113.0/24" });

/**
 * The shape of the timestamps {@link timestamp} accepts, field by field, in a form the API
 * server's CEL (RE2) can check. With the CRD's `format: date-time`, which rejects dates that do not
 * exist, it admits only what zod admits (test/unit/admission/plumbing.test.ts).
 */
export const TIMESTAMP_SHAPE =
  /^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$/;

/** An RFC 3339 timestamp with a time zone, as Kubernetes writes them. */
export const timestamp = () =>
  z.iso.datetime({
    offset: true,
    error: "must be an RFC 3339 timestamp such as 2026-12-01T10:00:00Z",
  });

/** A Kubernetes-style condition (metav1.Condition). */
export const conditionSchema = z.object({
  type: z.string().min(1),
  status: z.enum(["True", "False", "Unknown"]),
  observedGeneration: z.int().min(0).optional(),
  lastTransitionTime: timestamp(),
  reason: z.string().min(1),
  message: z.string().optional(),
});
export type Condition = z.infer<typeof conditionSchema>;

/** The least memory a container runtime starts a container with (runc's floor). */
export const MIN_MEMORY_LIMIT = "6Mi";
const MIN_MEMORY_LIMIT_BYTES = quantityValue(MIN_MEMORY_LIMIT)!;

/** Container resource requests and limits (a subset of core/v1 ResourceRequirements). */
export const resourcesSchema = z.object({
  requests: z.record(resourceName(), quantity()).optional(),
  limits: z
    .record(resourceName(), quantity())
    .superRefine((limits, ctx) => {
      const memory = limits.memory;
      if (memory === undefined) return;
      const bytes = quantityValue(memory);
      if (bytes !== undefined && bytes < MIN_MEMORY_LIMIT_BYTES) {
        ctx.addIssue({
          code: "custom",
          path: ["memory"],
          message: `must be at least ${MIN_MEMORY_LIMIT}: no container starts with less (got ${memory})`,
        });
      }
    })
    .optional(),
});

/** The longest environment variable name: longer ones are mistakes, not names. */
export const MAX_ENV_NAME_LENGTH = 1024;

/** An environment variable with a literal value (core/v1 EnvVar without valueFrom). */
export const envVarSchema = z.object({
  name: z
    .string()
    .min(1, { error: "must not be empty" })
    .max(MAX_ENV_NAME_LENGTH, {
      error: `must be at most ${MAX_ENV_NAME_LENGTH} characters`,
      abort: true,
    })
    .regex(/^[-._a-zA-Z][-._a-zA-Z0-9]*$/, { error: "must be a valid environment variable name" }),
  value: z.string().optional(),
});
