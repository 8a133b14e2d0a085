import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseDocument } from "yaml";

type Rule = {
  apiGroups?: string[];
  resources?: string[];
  resourceNames?: string[];
  verbs?: string[];
};

/** The one CustomResourceDefinition the module writes: Pepr's store's. */
export const STORE_CRD = "peprstores.pepr.dev";

/**
 * Pepr 1.1.4's own rules in a scoped ClusterRole, made to match what the module does (checked
 * against the audit log by test/integration/rbac.test.ts):
 *  - its store watch lists the store first (`list` peprstores), which it does not grant;
 *  - it grants `create` and `patch` on every CustomResourceDefinition, for its store's CRD, which
 *    its controller applies (server-side) at every start and stops when it cannot: narrowed to
 *    that one CRD by name.
 */
export function scopePeprRules(rules: Rule[]): Rule[] {
  return rules.map(r =>
    r.apiGroups?.includes("apiextensions.k8s.io")
      ? { ...r, resourceNames: [STORE_CRD] }
      : r.apiGroups?.includes("pepr.dev") && r.resources?.includes("peprstores")
        ? { ...r, verbs: [...new Set([...(r.verbs ?? []), "list"])] }
        : r,
  );
}

/** {@link scopePeprRules} on the module's ClusterRole among the module YAML's documents. */
export function scopeModuleRbac<T extends { kind?: string; rules?: Rule[] }>(docs: T[]): T[] {
  return docs.map(d =>
    d?.kind === "ClusterRole" ? { ...d, rules: scopePeprRules(d.rules ?? []) } : d,
  );
}

/** The same in the Helm chart, whose ClusterRole is `.Values.rbac`; false without values.yaml. */
export function scopeChartRbac(chartDir: string): boolean {
  const file = join(chartDir, "values.yaml");
  if (!existsSync(file)) return false;
  const values = parseDocument(readFileSync(file, "utf8"));
  const rules = (values.get("rbac") as { toJSON(): Rule[] } | undefined)?.toJSON() ?? [];
  values.set("rbac", scopePeprRules(rules));
  writeFileSync(file, values.toString({ lineWidth: 0 }));
  return true;
}
