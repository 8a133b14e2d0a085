/**
 * The webhooks' key material, out of the build. `pepr build` makes a TLS key pair and an API path
 * per build and writes them into the module YAML and the chart, so that every install of one build
 * would share them. The chart instead makes them at install (Helm's certificate and random
 * functions), keeps them on upgrade (`lookup`), and writes the Secrets and the webhooks, which
 * must agree, from one template; the module YAML carries none of it.
 */

import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseDocument } from "yaml";

type Doc = Record<string, unknown>;
type Hook = { clientConfig?: { caBundle?: string; service?: { path?: string } } };

/** The Secrets `pepr build` fills with key material, by their name's suffix. */
const KEY_SECRETS = ["-tls", "-api-path"];
/** Stands where the build wrote the API path: the module YAML has none (see the chart). */
export const API_PATH_MADE_AT_INSTALL = "made-at-install";

const isKeySecret = (d: Doc, module: string) =>
  d?.kind === "Secret" &&
  KEY_SECRETS.some(s => (d.metadata as { name?: string })?.name === `${module}${s}`);

/** The module YAML's documents without key material: no key Secret, no CA, no API path. */
export function withoutKeys(docs: Doc[], module: string): Doc[] {
  return docs
    .filter(d => !isKeySecret(d, module))
    .map(d =>
      d?.kind === "MutatingWebhookConfiguration" || d?.kind === "ValidatingWebhookConfiguration"
        ? {
            ...d,
            webhooks: ((d.webhooks ?? []) as Hook[]).map(w => ({
              ...w,
              clientConfig: {
                ...w.clientConfig,
                caBundle: undefined,
                service: {
                  ...w.clientConfig?.service,
                  path: w.clientConfig?.service?.path?.replace(
                    /^\/(mutate|validate)\/.*$/,
                    `/$1/${API_PATH_MADE_AT_INSTALL}`,
                  ),
                },
              },
            })),
          }
        : d,
    );
}

/**
 * Helm's part: the key material made at install unless the release already has it (an upgrade
 * keeps the webhooks' CA, the admission server's key pair and its API path together).
 */
const MAKE_KEYS = `{{- /* Made at install and kept on upgrade: no key is in the chart (build/admission-keys.ts). */}}
{{- $ns := "pepr-system" }}
{{- $tls := lookup "v1" "Secret" $ns (printf "%s-tls" .Values.uuid) }}
{{- $path := lookup "v1" "Secret" $ns (printf "%s-api-path" .Values.uuid) }}
{{- $hook := lookup "admissionregistration.k8s.io/v1" "MutatingWebhookConfiguration" "" .Values.uuid }}
{{- $crt := "" }}{{- $key := "" }}{{- $caBundle := "" }}{{- $apiPath := "" }}
{{- if and $tls $path $hook }}
{{- $crt = index $tls.data "tls.crt" }}
{{- $key = index $tls.data "tls.key" }}
{{- $apiPath = index $path.data "value" | b64dec }}
{{- $caBundle = (index $hook.webhooks 0).clientConfig.caBundle }}
{{- else }}
{{- $ca := genCA (printf "%s-ca" .Values.uuid) 3650 }}
{{- $svc := printf "%s.%s.svc" .Values.uuid $ns }}
{{- $cert := genSignedCert $svc nil (list $svc (printf "%s-watcher.%s.svc" .Values.uuid $ns)) 3650 $ca }}
{{- $crt = $cert.Cert | b64enc }}
{{- $key = $cert.Key | b64enc }}
{{- $caBundle = $ca.Cert | b64enc }}
{{- $apiPath = randAlphaNum 64 | lower }}
{{- end }}
apiVersion: v1
kind: Secret
metadata:
  name: {{ .Values.uuid }}-tls
  namespace: pepr-system
type: kubernetes.io/tls
data:
  tls.crt: {{ $crt }}
  tls.key: {{ $key }}
---
apiVersion: v1
kind: Secret
metadata:
  name: {{ .Values.uuid }}-api-path
  namespace: pepr-system
type: Opaque
data:
  value: {{ $apiPath | b64enc }}
`;

/**
 * The chart template of the key Secrets and the webhooks (each already templated by lines), with
 * the CA and the API path they name taken from the keys made above.
 */
export function admissionKeysTemplate(webhookTemplates: string[]): string {
  const hooks = webhookTemplates.map(t =>
    t
      .split("\n")
      .map(line =>
        line
          .replace(/^(\s*caBundle: ).*$/, "$1{{ $caBundle }}")
          .replace(/^(\s*path: \/(?:mutate|validate)\/).*$/, "$1{{ $apiPath }}"),
      )
      .join("\n"),
  );
  return [MAKE_KEYS, ...hooks].join("---\n");
}

/** The chart's templates that `pepr build` wrote with key material, which this one replaces. */
export const REPLACED_TEMPLATES = [
  "tls-secret.yaml",
  "api-path-secret.yaml",
  "mutation-webhook.yaml",
  "validation-webhook.yaml",
];

/**
 * The chart's values without the API path `pepr build` puts there (`secrets.apiPath`), which the
 * template above no longer reads, and its schema without requiring it.
 */
export function withoutKeyValues(chart: string): void {
  const file = join(chart, "values.yaml");
  const values = parseDocument(readFileSync(file, "utf8"));
  values.delete("secrets");
  writeFileSync(file, values.toString({ lineWidth: 0 }));
  const schemaFile = join(chart, "values.schema.json");
  const schema = JSON.parse(readFileSync(schemaFile, "utf8"));
  delete schema.definitions.Values.properties.secrets;
  schema.definitions.Values.required = (schema.definitions.Values.required ?? []).filter(
    (k: string) => k !== "secrets",
  );
  delete schema.definitions.Secrets;
  writeFileSync(schemaFile, `${JSON.stringify(schema, null, 2)}\n`);
}
