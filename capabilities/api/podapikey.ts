import { z } from "zod";
import { KindDescriptor } from "./descriptor";

/**
 * An E2B API key of a tenant: only its SHA-256 is stored, so the object holds nothing secret and
 * need not be a Secret (whoever reads Secrets to find keys could read every other Secret too).
 * The gateway reads these, and only these, to know which namespace a key acts in.
 */
/** An API key's hash as PodAPIKeys hold it: lowercase hex SHA-256. */
export const SHA256_HEX = /^[0-9a-f]{64}$/;

export const podAPIKeySpecSchema = z.object({
  sha256: z
    .string()
    .regex(SHA256_HEX, { error: "must be the lowercase hex SHA-256 of the key (64 digits)" })
    .meta({
      description:
        'The lowercase hex SHA-256 of the key (`printf %s "$key" | sha256sum`). The key itself is stored nowhere.',
    }),
  description: z
    .string()
    .max(256, { error: "must be at most 256 characters" })
    .optional()
    .meta({ description: "Who or what holds the key, for the people who manage keys." }),
});
export type PodAPIKeySpec = z.infer<typeof podAPIKeySpecSchema>;

export const podAPIKeyStatusSchema = z.object({});
export type PodAPIKeyStatus = z.infer<typeof podAPIKeyStatusSchema>;

export const podAPIKeyDescriptor: KindDescriptor = {
  kind: "PodAPIKey",
  plural: "podapikeys",
  singular: "podapikey",
  shortNames: ["papikey"],
  description:
    "An E2B API key of the namespace's tenant, by its hash: requests with the key act in this namespace.",
  spec: podAPIKeySpecSchema,
  status: podAPIKeyStatusSchema,
  printerColumns: [
    { name: "Description", type: "string", jsonPath: ".spec.description" },
    { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
  ],
};
