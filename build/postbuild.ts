/**
 * Post-processes `pepr build` output:
 *  - every webhook in dist/pepr-module-<uuid>.yaml gets the sandbox-Pods-only match condition;
 *  - the watcher exposes the operator's /metrics and /healthz on :8081 (port, probe, Service),
 *    in the module YAML and in the Helm chart;
 *  - Pepr's own rules in the module's ClusterRole match what the module does (module-rbac.ts);
 *  - the provenance admission policy (provenance-policy.ts), for the module's ServiceAccount, is
 *    added to both;
 *  - the gateway (gateway-deployment.ts), bundled by build-module.sh, is added to both, with the
 *    module's rights to make the gateway's token key at its first start (no key is built in);
 *  - the Helm chart's `images.registry` and `images.tag` name the podd injector every template
 *    without one gets (injector-image.ts);
 *  - the Helm chart installs the node egress agent when `egressAgent.enabled`, and tells the
 *    module and the gateway (egress-agent.ts);
 *  - the Helm chart's watcher count is a value, `watcher.replicas`, which also sets its shards
 *    (watcher-shards.ts);
 *  - the Helm chart's description is quoted (Pepr writes it bare, and ours has a colon);
 *  - the Helm chart's webhook templates are written again from those objects, because Pepr's own
 *    templating replaces "10", "Fail" and the module name anywhere in the YAML, caBundle included,
 *    which corrupts the CA whenever its base64 contains one of them;
 *  - no key is left in either: the webhooks' TLS key pair and API path, which `pepr build` makes,
 *    are made by the chart at install instead, and the module YAML carries none
 *    (admission-keys.ts).
 * Fails when the build left no module YAML.
 */
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments, stringify } from "yaml";
import cfg from "../package.json";
import {
  hardenWebhookConfiguration,
  isWebhookConfiguration,
  shardLabelCondition,
} from "../capabilities/admission/webhook-policy";
import { provenancePolicy } from "../capabilities/admission/provenance-policy";
import { addChartValues } from "./chart-values";
import {
  admissionKeysTemplate,
  REPLACED_TEMPLATES,
  withoutKeys,
  withoutKeyValues,
} from "./admission-keys";
import { addEgressAgentInChart } from "./egress-agent";
import { addImagesInChart } from "./injector-image";
import { exposeMetrics, exposeMetricsInChart } from "./metrics-exposure";
import { scopeChartRbac, scopeModuleRbac } from "./module-rbac";
import { shardWatcherInChart } from "./watcher-shards";
import {
  GATEWAY_VALUES,
  GATEWAY_VALUES_SCHEMA,
  gatewayChartTemplate,
  gatewayDeployment,
  tokenKeyRole,
} from "./gateway-deployment";

const dist = join(__dirname, "..", "dist");
/** Where the chart's shard-label condition is templated (withShardLabelValue, helmTemplate). */
const SHARD_LABEL_PLACEHOLDER = "CUBEPOD_SHARD_LABEL_CONDITION";
const uuid = cfg.pepr.uuid;
const name = `pepr-${uuid}`;
const moduleYaml = join(dist, `pepr-module-${uuid}.yaml`);
if (!existsSync(moduleYaml)) {
  console.error(`postbuild: ${moduleYaml} is missing: pepr build failed (see its output above)`);
  process.exit(1);
}

const docs = parseAllDocuments(readFileSync(moduleYaml, "utf8")).map(d => d.toJS());
const hardened = docs.map(d => (isWebhookConfiguration(d) ? hardenWebhookConfiguration(d) : d));
const out = exposeMetrics(scopeModuleRbac(hardened), `${name}-watcher`);
const policy = provenancePolicy(`system:serviceaccount:pepr-system:${name}`);
const toYaml = (ds: unknown[]) => ds.map(d => stringify(d, { lineWidth: 0 })).join("---\n");
const gatewayCode = join(dist, "cubepod-gateway.js");
if (!existsSync(gatewayCode)) {
  console.error(`postbuild: ${gatewayCode} is missing: the gateway's bundle failed`);
  process.exit(1);
}
// No key is made here: the module makes the gateway's at its first start in a cluster.
const gatewayInput = { code: readFileSync(gatewayCode), image: controllerImage(out) };
const gateway = [
  ...gatewayDeployment({
    ...gatewayInput,
    replicas: GATEWAY_VALUES.replicas,
    domain: GATEWAY_VALUES.domain,
  }),
  ...tokenKeyRole(name),
];
writeFileSync(moduleYaml, toYaml([...withoutKeys(out, name), ...policy, ...gateway]));

const chartTemplates = join(dist, `${uuid}-chart`, "templates");
writeFileSync(join(chartTemplates, "provenance-policy.yaml"), toYaml(policy));
writeFileSync(
  join(chartTemplates, "gateway.yaml"),
  `${gatewayChartTemplate(gatewayInput)}\n---\n${toYaml(tokenKeyRole(name))}`,
);
addGatewayValues(join(dist, `${uuid}-chart`));
if (!REPLACED_TEMPLATES.every(f => existsSync(join(chartTemplates, f)))) {
  console.error(`postbuild: the Helm chart lacks one of ${REPLACED_TEMPLATES.join(", ")}`);
  process.exit(1);
}
for (const f of REPLACED_TEMPLATES) rmSync(join(chartTemplates, f));
withoutKeyValues(join(dist, `${uuid}-chart`));
writeFileSync(
  join(chartTemplates, "admission-keys.yaml"),
  admissionKeysTemplate(
    out
      .filter(isWebhookConfiguration)
      .map(d => helmTemplate(stringify(withShardLabelValue(d), { lineWidth: 0 }))),
  ),
);
// Pepr writes the package description into Chart.yaml unquoted: ours has a ": " in it, which
// makes the chart unloadable ("mapping values are not allowed in this context").
const chartYaml = join(dist, `${uuid}-chart`, "Chart.yaml");
if (existsSync(chartYaml)) {
  writeFileSync(
    chartYaml,
    readFileSync(chartYaml, "utf8").replace(
      /^description: .*$/m,
      `description: ${JSON.stringify(cfg.description)}`,
    ),
  );
}

if (!scopeChartRbac(join(dist, `${uuid}-chart`))) {
  console.error("postbuild: the Helm chart has no values.yaml to scope its ClusterRole in");
  process.exit(1);
}
if (!exposeMetricsInChart(join(dist, `${uuid}-chart`))) {
  console.error("postbuild: the Helm chart has no watcher template to expose :8081 in");
  process.exit(1);
}
if (!addImagesInChart(join(dist, `${uuid}-chart`))) {
  console.error(
    "postbuild: the Helm chart's Deployments are not as Pepr writes them: no images values",
  );
  process.exit(1);
}
if (!addEgressAgentInChart(join(dist, `${uuid}-chart`))) {
  console.error(
    "postbuild: the Helm chart's Deployments are not as Pepr writes them: no egress agent values",
  );
  process.exit(1);
}
if (!shardWatcherInChart(join(dist, `${uuid}-chart`), name)) {
  console.error("postbuild: the Helm chart's watcher is not as Pepr writes it: cannot shard it");
  process.exit(1);
}
console.log(
  `postbuild: hardened webhooks, added the provenance policy and the gateway, exposed :8081 in ${moduleYaml} and the Helm chart`,
);

/** The image the module's watcher runs: the gateway runs on it too. */
function controllerImage(docs: Record<string, unknown>[]): string {
  const watcher = docs.find(
    d => d.kind === "Deployment" && (d.metadata as { name?: string })?.name === `${name}-watcher`,
  ) as { spec: { template: { spec: { containers: { image: string }[] } } } } | undefined;
  const image = watcher?.spec.template.spec.containers[0]?.image;
  if (!image) {
    console.error("postbuild: the module YAML has no watcher Deployment to take the image from");
    process.exit(1);
  }
  return image;
}

/**
 * The chart's `gateway` values, and their schema, which Pepr writes closed to unknown keys; its
 * RBAC rules may name resources (the store's CRD: module-rbac.ts).
 */
function addGatewayValues(chart: string): void {
  addChartValues(chart, "gateway", GATEWAY_VALUES, GATEWAY_VALUES_SCHEMA, schema => {
    schema.definitions.Rbac.properties = {
      ...schema.definitions.Rbac.properties,
      resourceNames: { type: "array", items: { type: "string" } },
    };
  });
}

/** The chart's shard-label condition follows `watcher.replicas` (webhook-policy.ts). */
function withShardLabelValue(cfg: Record<string, unknown>): Record<string, unknown> {
  type Hook = { matchConditions?: { name: string; expression: string }[] };
  const name = shardLabelCondition(false).name;
  return {
    ...cfg,
    webhooks: ((cfg.webhooks ?? []) as Hook[]).map(w => ({
      ...w,
      matchConditions: w.matchConditions?.map(c =>
        c.name === name ? { name, expression: SHARD_LABEL_PLACEHOLDER } : c,
      ),
    })),
  };
}

/** Templating by whole lines only, so that no value (the caBundle) can be hit by accident. */
function helmTemplate(yaml: string): string {
  return yaml
    .split("\n")
    .map(line =>
      line
        .replace(new RegExp(`^(\\s*name: )${name}$`), "$1{{ .Values.uuid }}")
        .replace(
          new RegExp(`^(\\s*(?:- )?name: )${name}\\.pepr\\.dev$`),
          "$1{{ .Values.uuid }}.pepr.dev",
        )
        .replace(
          new RegExp(`^(\\s*expression: )${SHARD_LABEL_PLACEHOLDER}$`),
          `$1{{ if gt (int .Values.watcher.replicas) 1 }}${JSON.stringify(shardLabelCondition(true).expression)}{{ else }}${JSON.stringify(shardLabelCondition(false).expression)}{{ end }}`,
        )
        .replace(/^(\s*failurePolicy: )(Fail|Ignore)$/, "$1{{ .Values.admission.failurePolicy }}")
        .replace(/^(\s*timeoutSeconds: )\d+$/, "$1{{ .Values.admission.webhookTimeout }}")
        .replace(
          /^(\s*)- pepr-system$/,
          "$1- pepr-system\n$1{{- range .Values.additionalIgnoredNamespaces }}\n$1- {{ . }}\n$1{{- end }}",
        ),
    )
    .join("\n");
}
