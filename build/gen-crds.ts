/**
 * Writes the CRD YAML of every CubePod kind into crds/ (one file per kind plus crds/all.yaml).
 * Usage: npm run gen:crds [-- --check]   (--check: exit 1 when the committed files are stale)
 */
import { readFileSync, writeFileSync, mkdirSync, existsSync } from "node:fs";
import { join } from "node:path";
import { renderCRDFiles } from "../capabilities/crd/render";

const dir = join(__dirname, "..", "crds");
const check = process.argv.includes("--check");
const stale: string[] = [];
mkdirSync(dir, { recursive: true });
for (const [file, text] of Object.entries(renderCRDFiles())) {
  const path = join(dir, file);
  if (check) {
    if (!existsSync(path) || readFileSync(path, "utf8") !== text) stale.push(path);
  } else {
    writeFileSync(path, text);
    console.log(`wrote ${path}`);
  }
}
if (stale.length > 0) {
  console.error(`stale CRD files (run npm run gen:crds): ${stale.join(", ")}`);
  process.exit(1);
}
