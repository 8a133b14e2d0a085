import { GROUP, VERSION } from "../api/common";
import { KindDescriptor } from "../api/descriptor";
import { toStructuralSchema } from "./openapi";

/** A CustomResourceDefinition as a plain object, ready to be written as YAML or applied. */
export type CustomResourceDefinition = {
  apiVersion: "apiextensions.k8s.io/v1";
  kind: "CustomResourceDefinition";
  metadata: { name: string; labels: Record<string, string> };
  spec: Record<string, unknown>;
};

/**
 * Builds the namespaced CRD of one CubePod kind from its descriptor: the zod spec and status
 * schemas become the structural `openAPIV3Schema`, with the status subresource, printer columns
 * and short names.
 */
export function buildCRD(d: KindDescriptor): CustomResourceDefinition {
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: {
      name: `${d.plural}.${GROUP}`,
      labels: { "app.kubernetes.io/part-of": "cubepod" },
    },
    spec: {
      group: GROUP,
      scope: "Namespaced",
      names: {
        kind: d.kind,
        listKind: `${d.kind}List`,
        plural: d.plural,
        singular: d.singular,
        shortNames: d.shortNames,
        categories: ["cubepod"],
      },
      versions: [
        {
          name: VERSION,
          served: true,
          storage: true,
          subresources: { status: {}, ...(d.scale ? { scale: d.scale } : {}) },
          additionalPrinterColumns: d.printerColumns,
          schema: {
            openAPIV3Schema: {
              type: "object",
              description: d.description,
              required: ["spec"],
              properties: {
                apiVersion: { type: "string" },
                kind: { type: "string" },
                metadata: { type: "object" },
                spec: toStructuralSchema(d.spec),
                status: toStructuralSchema(d.status),
              },
            },
          },
        },
      ],
    },
  };
}
