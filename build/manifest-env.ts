import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseDocument } from "yaml";

type EnvVar = { name: string; value: string };
type Doc = {
  kind?: string;
  metadata?: { name?: string };
  spec?: { template?: { spec?: { containers?: { env?: EnvVar[] }[] } } };
};

/**
 * Settings the build makes for the module (the gateway's public key, whose private half the
 * gateway derives from its token key): set on both of the module's Deployments (admission and
 * watcher) in the module manifest, replacing any of the same name.
 */
export function addModuleEnv<T extends object>(docs: T[], moduleName: string, env: EnvVar[]): T[] {
  const names = new Set([moduleName, `${moduleName}-watcher`]);
  for (const d of docs as Doc[]) {
    if (d.kind !== "Deployment" || !names.has(d.metadata?.name ?? "")) continue;
    for (const c of d.spec?.template?.spec?.containers ?? []) c.env = merged(c.env ?? [], env);
  }
  return docs;
}

/** The same in the Helm chart, whose Deployments take `admission.env` and `watcher.env`. */
export function addModuleEnvInChart(chartDir: string, env: EnvVar[]): void {
  const file = join(chartDir, "values.yaml");
  const values = parseDocument(readFileSync(file, "utf8"));
  for (const part of ["admission", "watcher"]) {
    const current = (values.getIn([part, "env"]) as { toJSON(): EnvVar[] } | undefined)?.toJSON();
    values.setIn([part, "env"], merged(current ?? [], env));
  }
  writeFileSync(file, values.toString({ lineWidth: 0 }));
}

const merged = (list: EnvVar[], env: EnvVar[]) => [
  ...list.filter(e => !env.some(x => x.name === e.name)),
  ...env,
];
