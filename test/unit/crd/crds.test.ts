import { readFileSync } from "node:fs";
import { join } from "node:path";
import { DESCRIPTORS } from "../../../capabilities/api";
import { buildCRD } from "../../../capabilities/crd/build";
import { renderCRDFiles } from "../../../capabilities/crd/render";

type Node = Record<string, unknown>;
const schemaOf = (plural: string) => {
  const d = DESCRIPTORS.find(x => x.plural === plural)!;
  const v = (buildCRD(d).spec.versions as Node[])[0];
  return (v.schema as Node).openAPIV3Schema as Node;
};
const walk = (n: unknown, visit: (n: Node, path: string) => void, path = "") => {
  if (!n || typeof n !== "object") return;
  visit(n as Node, path);
  for (const [k, v] of Object.entries(n as Node)) walk(v, visit, `${path}/${k}`);
};
const prop = (schema: Node, path: string) =>
  path.split(".").reduce<Node>((n, k) => (n.properties as Record<string, Node>)[k], schema);

describe("generated CRDs", () => {
  it("match the committed files (run `npm run gen:crds` when this fails)", () => {
    for (const [file, text] of Object.entries(renderCRDFiles())) {
      expect(readFileSync(join(__dirname, "..", "..", "..", "crds", file), "utf8")).toBe(text);
    }
  });

  it.each(DESCRIPTORS.map(d => [d.kind, d] as const))(
    "%s is namespaced with status, short name and printer columns",
    (_, d) => {
      const crd = buildCRD(d);
      expect(crd.metadata.name).toBe(`${d.plural}.pod.cubeplex.ai`);
      expect(crd.spec.scope).toBe("Namespaced");
      expect(crd.spec.names).toMatchObject({
        kind: d.kind,
        plural: d.plural,
        shortNames: d.shortNames,
      });
      const v = (crd.spec.versions as Node[])[0];
      expect(v).toMatchObject({
        name: "v1alpha1",
        served: true,
        storage: true,
        subresources: { status: {} },
      });
      expect((v.additionalPrinterColumns as Node[]).map(c => c.name)).toContain("Age");
    },
  );

  it.each(["podtemplates", "podwarmpools", "podboxes", "podapikeys"])(
    "%s has a structural schema (no additionalProperties: false, no $schema, typed nodes)",
    plural => {
      walk(schemaOf(plural), (n, path) => {
        expect([path, n.additionalProperties]).not.toEqual([path, false]);
        expect(n).not.toHaveProperty("$schema");
        if (path.endsWith("/properties") || path.endsWith("/default")) return;
        if ("properties" in n || "items" in n || "enum" in n || "pattern" in n) {
          expect([path, typeof n.type]).toEqual([path, "string"]);
        }
      });
    },
  );

  it("types the contract fields with integers, enums and defaults", () => {
    const box = schemaOf("podboxes");
    expect(prop(box, "spec.rootfsGeneration")).toMatchObject({
      type: "integer",
      minimum: 1,
      default: 1,
    });
    expect(prop(box, "spec.desiredState")).toMatchObject({
      enum: ["Running", "Paused", "Terminated"],
      default: "Running",
    });
    expect(prop(box, "spec.leaseExpiresAt")).toEqual(
      expect.objectContaining({ type: "string", format: "date-time" }),
    );
    expect(prop(box, "spec.leaseExpiresAt")).not.toHaveProperty("pattern");
    expect(prop(box, "status.phase")).toMatchObject({
      enum: ["Pending", "Running", "Paused", "Terminated", "Failed"],
    });
    expect(prop(box, "spec.idleTimeoutSeconds")).not.toHaveProperty("maximum");

    const tpl = schemaOf("podtemplates");
    expect(prop(tpl, "spec")).toMatchObject({ required: ["image"] });
    expect(prop(tpl, "spec.runtimeClassName")).toMatchObject({ default: "kata-qemu" });
    expect(prop(tpl, "spec.volumeMode")).toMatchObject({
      enum: ["Block", "Filesystem"],
      default: "Block",
    });
    expect(prop(tpl, "spec.envdPort")).toMatchObject({ type: "integer", default: 49983 });

    const pool = schemaOf("podwarmpools");
    expect(prop(pool, "spec.replicas")).toMatchObject({ type: "integer", minimum: 0 });
    expect(prop(pool, "status.readyReplicas")).toMatchObject({ type: "integer" });
  });

  it("gives pools, and only pools, the scale subresource autoscalers size them by", () => {
    const subresources = (plural: string) =>
      (buildCRD(DESCRIPTORS.find(d => d.plural === plural)!).spec.versions as Node[])[0]
        .subresources;
    expect(subresources("podwarmpools")).toEqual({
      status: {},
      scale: {
        specReplicasPath: ".spec.replicas",
        statusReplicasPath: ".status.replicas",
        labelSelectorPath: ".status.selector",
      },
    });
    expect(subresources("podboxes")).toEqual({ status: {} });
    expect(subresources("podtemplates")).toEqual({ status: {} });
  });
});
