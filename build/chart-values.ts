import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { stringify } from "yaml";

/**
 * Adds a top-level key to the chart's values and its schema, which Pepr writes closed to unknown
 * keys; `extra` may change the schema further.
 */
export function addChartValues(
  chart: string,
  key: string,
  values: unknown,
  schemaOfValues: object,
  extra: (schema: { definitions: Record<string, { properties: object }> }) => void = () => {},
): void {
  const file = join(chart, "values.yaml");
  writeFileSync(file, `${readFileSync(file, "utf8")}${stringify({ [key]: values })}`);
  const schemaFile = join(chart, "values.schema.json");
  if (!existsSync(schemaFile)) return;
  const schema = JSON.parse(readFileSync(schemaFile, "utf8"));
  schema.definitions.Values.properties[key] = schemaOfValues;
  extra(schema);
  writeFileSync(schemaFile, `${JSON.stringify(schema, null, 2)}\n`);
}
