import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { stringify } from "yaml";
import { PID_FILE } from "../capabilities/shard/pid-file";

/**
 * A stopping sharded replica's hook: SIGTERM to the module, which Pepr's controller (PID 1, which
 * ignores it) runs as a child that writes its process id to PID_FILE; it gives its shards up.
 */
const PRE_STOP = `try{process.kill(Number(require("fs").readFileSync(${JSON.stringify(PID_FILE)},"utf8")),"SIGTERM")}catch{}`;

function preStop(indent: string): string {
  return [
    `${indent}{{- if gt (int .Values.watcher.replicas) 1 }}`,
    `${indent}lifecycle:`,
    `${indent}  preStop:`,
    `${indent}    exec:`,
    `${indent}      command: ${JSON.stringify(["node", "-e", PRE_STOP])}`,
    `${indent}{{- end }}`,
    "",
  ].join("\n");
}

/** The most watcher replicas, as `CUBEPOD_SHARDS` allows (capabilities/config.ts). */
const MAX_REPLICAS = 64;

/**
 * Makes the chart's watcher count a value: `watcher.replicas` (1 by default) sets both the
 * Deployment's replicas and `CUBEPOD_SHARDS`, so the two never disagree. With more than one,
 * the replicas hold shard Leases in the module's namespace: a Role there grants exactly that.
 * Returns false when the chart is not as Pepr writes it.
 */
export function shardWatcherInChart(chart: string, moduleName: string): boolean {
  const deployment = join(chart, "templates", "watcher-deployment.yaml");
  const admission = join(chart, "templates", "admission-deployment.yaml");
  const values = join(chart, "values.yaml");
  const schemaFile = join(chart, "values.schema.json");
  if (![deployment, admission, values, schemaFile].every(existsSync)) return false;

  // Both Deployments read the count: the admission server stamps each object's shard label.
  const template = readFileSync(deployment, "utf8");
  const watchMode = /^(\s*)- name: PEPR_WATCH_MODE\n\s*value: "(?:true|false)"\n/m;
  const shards = (m: string, indent: string) =>
    `${m}${indent}- name: CUBEPOD_SHARDS\n${indent}  value: {{ .Values.watcher.replicas | quote }}\n`;
  const admissionTemplate = readFileSync(admission, "utf8");
  if (!watchMode.test(admissionTemplate)) return false;
  writeFileSync(admission, admissionTemplate.replace(watchMode, shards));
  const ports = /^( {10})ports:$/m;
  if (!/^ {2}replicas: 1$/m.test(template) || !watchMode.test(template) || !ports.test(template))
    return false;
  writeFileSync(
    deployment,
    template
      .replace(/^ {2}replicas: 1$/m, "  replicas: {{ .Values.watcher.replicas }}")
      .replace(watchMode, shards)
      .replace(ports, (m, indent: string) => `${preStop(indent)}${m}`),
  );

  const text = readFileSync(values, "utf8");
  if (!/^watcher:\n {2}enabled: true$/m.test(text)) return false;
  writeFileSync(
    values,
    text.replace(/^watcher:\n {2}enabled: true$/m, "watcher:\n  enabled: true\n  replicas: 1"),
  );

  const schema = JSON.parse(readFileSync(schemaFile, "utf8"));
  const shared = schema.definitions.Admission;
  schema.definitions.Watcher = {
    ...shared,
    properties: {
      ...shared.properties,
      replicas: { type: "integer", minimum: 1, maximum: MAX_REPLICAS },
    },
  };
  schema.definitions.Values.properties.watcher = { $ref: "#/definitions/Watcher" };
  writeFileSync(schemaFile, `${JSON.stringify(schema, null, 2)}\n`);

  const role = {
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "Role",
    metadata: { name: `${moduleName}-shards`, namespace: "pepr-system" },
    rules: [
      {
        apiGroups: ["coordination.k8s.io"],
        resources: ["leases"],
        verbs: ["list", "watch", "create", "patch", "delete"],
      },
    ],
  };
  const binding = {
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "RoleBinding",
    metadata: { name: `${moduleName}-shards`, namespace: "pepr-system" },
    roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: `${moduleName}-shards` },
    subjects: [{ kind: "ServiceAccount", name: moduleName, namespace: "pepr-system" }],
  };
  writeFileSync(
    join(chart, "templates", "shard-leases.yaml"),
    `{{- if gt (int .Values.watcher.replicas) 1 }}\n${stringify(role)}---\n${stringify(binding)}{{- end }}\n`,
  );
  return true;
}
