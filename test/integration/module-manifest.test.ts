import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseAllDocuments, stringify } from "yaml";
import { KUBECONFIG, ROOT } from "./kube";

const manifest = join(ROOT, "dist", "pepr-module-cubepod.yaml");
const kubectl = join(
  process.env.CUBEPOD_CACHE ?? join(process.env.HOME ?? "/root", ".cache", "cubepod"),
  "bin",
  "kubectl",
);

beforeAll(() => {
  if (!existsSync(manifest))
    execFileSync("bash", [join(ROOT, "hack", "build-module.sh")], { stdio: "ignore" });
});

describe("the deployable module manifest (npm run build)", () => {
  it("is accepted by the API server, match conditions included (server-side dry run)", () => {
    // Renamed copies, so that the dry run creates rather than merges into what pepr dev registered.
    const docs = parseAllDocuments(readFileSync(manifest, "utf8"))
      .map(d => d.toJS())
      .filter(d => d.kind !== "Namespace")
      .map(d => ({ ...d, metadata: { ...d.metadata, name: `${d.metadata.name}-dryrun` } }));
    const file = join(mkdtempSync(join(tmpdir(), "cubepod-")), "module.yaml");
    writeFileSync(file, docs.map(d => stringify(d)).join("---\n"));
    const out = execFileSync(kubectl, ["create", "--dry-run=server", "-f", file], {
      encoding: "utf8",
      env: { ...process.env, KUBECONFIG },
    });
    expect(out).toContain(
      "mutatingwebhookconfiguration.admissionregistration.k8s.io/pepr-cubepod-dryrun created (server dry run)",
    );
    expect(out).toContain(
      "validatingwebhookconfiguration.admissionregistration.k8s.io/pepr-cubepod-dryrun created (server dry run)",
    );
    expect(out).toContain("deployment.apps/pepr-cubepod-dryrun created (server dry run)");
  });

  it("sends the module only sandbox Pods, and fails closed for them", () => {
    const docs = parseAllDocuments(readFileSync(manifest, "utf8")).map(d => d.toJS());
    const webhooks = docs
      .filter(
        d =>
          d.kind === "MutatingWebhookConfiguration" || d.kind === "ValidatingWebhookConfiguration",
      )
      .flatMap(d => d.webhooks);
    expect(webhooks).toHaveLength(2);
    for (const w of webhooks) {
      expect(w.failurePolicy).toBe("Fail");
      expect(w.matchConditions.map((c: { name: string }) => c.name)).toEqual([
        "cubepod-sandbox-pods-only",
      ]);
    }
  });
});
