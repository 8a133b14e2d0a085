import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import cfg from "../package.json";
import { addChartValues } from "./chart-values";

/**
 * Where the chart's images come from: `images.registry` and `images.tag`, which
 * `npm run images:push` pushed to (build/push-images.sh). The module's
 * CUBEPOD_PODD_INJECTOR_IMAGE, the injector of every template that names none, follows them.
 */
export const IMAGES_VALUES = { registry: "ghcr.io/cubeplex", tag: cfg.version };
export const IMAGES_VALUES_SCHEMA = {
  type: "object",
  additionalProperties: false,
  properties: { registry: { type: "string", minLength: 1 }, tag: { type: "string", minLength: 1 } },
};

/**
 * Adds the `images` values and sets CUBEPOD_PODD_INJECTOR_IMAGE from them in both of the module's
 * Deployments; false when the chart is not as Pepr writes it.
 */
export function addImagesInChart(chart: string): boolean {
  const templates = ["admission-deployment.yaml", "watcher-deployment.yaml"].map(f =>
    join(chart, "templates", f),
  );
  const env = /^(\s*)- name: PEPR_WATCH_MODE\n\s*value: "(?:true|false)"\n/m;
  const injector = (m: string, indent: string) =>
    `${m}${indent}- name: CUBEPOD_PODD_INJECTOR_IMAGE\n${indent}  value: "{{ .Values.images.registry }}/podd-injector:{{ .Values.images.tag }}"\n`;
  for (const file of templates) {
    if (!existsSync(file)) return false;
    const text = readFileSync(file, "utf8");
    if (!env.test(text)) return false;
    writeFileSync(file, text.replace(env, injector));
  }
  addChartValues(chart, "images", IMAGES_VALUES, IMAGES_VALUES_SCHEMA);
  return true;
}
