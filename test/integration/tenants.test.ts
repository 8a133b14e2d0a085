import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { Kube, Obj, paths, ROOT } from "../../hack/lib/kube";
import { podTemplate, TEMPLATE } from "../../hack/lib/objects";

/*
 * Tenants as Kubernetes sees them: users with RoleBindings in one namespace, acted as through
 * impersonation. The ClusterRoles are the ones CubePod ships (deploy/tenant-roles.yaml).
 */

const admin = new Kube();
const as = (user: string) => new Kube(undefined, { user });
let ns: string;

async function bind(user: string, clusterRole: string) {
  await admin.mustCreate(`/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`, {
    metadata: { name: `${user}-${clusterRole}` },
    roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: clusterRole },
    subjects: [{ apiGroup: "rbac.authorization.k8s.io", kind: "User", name: user }],
  });
}

beforeAll(async () => {
  const file = join(ROOT, "deploy", "tenant-roles.yaml");
  for (const doc of parseAllDocuments(readFileSync(file, "utf8"))) {
    const role = doc.toJS() as Obj;
    const path = `/apis/rbac.authorization.k8s.io/v1/clusterroles/${role.metadata.name}`;
    const r = await admin.request(
      "PATCH",
      `${path}?fieldManager=it&force=true`,
      role,
      "application/apply-patch+yaml",
    );
    if (r.status >= 300) throw new Error(`apply ${role.metadata.name}: ${r.body.message}`);
  }
  ns = await admin.namespace("it-tenants");
  await bind("author", "cubepod-template-author");
  await bind("trusted-author", "cubepod-template-author");
  // The built-in namespace editor: may create Pods and read Secrets.
  await bind("trusted-author", "edit");
  await bind("user", "cubepod-sandbox-user");
});
afterAll(async () => {
  await admin.delete(`/api/v1/namespaces/${ns}`);
  admin.close();
});

const withSecrets = (name: string) =>
  podTemplate(name, {
    ...TEMPLATE,
    egress: { enabled: true, image: "proxy:1", secretName: "db-credentials" },
    mtls: { enabled: true },
  });

describe("a PodTemplate lends no right its author lacks", () => {
  it("refuses a template naming Secrets from an author who may not read them or create Pods", async () => {
    const author = as("author");
    // RBAC itself: the author may not read the Secret.
    expect((await author.get(`/api/v1/namespaces/${ns}/secrets/db-credentials`)).status).toBe(403);
    const r = await author.create(paths.podtemplates(ns), withSecrets("exfiltrate"));
    expect(r.status).toBe(422);
    expect(r.body.message).toContain("author needs those rights; author may not:");
    expect(r.body.message).toContain(`create pods in namespace "${ns}"`);
    expect(r.body.message).toContain(`get secrets "db-credentials" in namespace "${ns}"`);
    expect(r.body.message).toContain(`get secrets in namespace "${ns}"`);
    expect((await admin.get(paths.podtemplates(ns, "exfiltrate"))).status).toBe(404);
    author.close();
  });

  it("refuses even a template without Secrets from an author who may not create Pods", async () => {
    const author = as("author");
    const r = await author.create(paths.podtemplates(ns), podTemplate("plain"));
    expect(r.status).toBe(422);
    expect(r.body.message).toContain(`may not: create pods in namespace "${ns}"`);
    author.close();
  });

  it("admits the same template from an author who holds those rights", async () => {
    const author = as("trusted-author");
    const r = await author.create(paths.podtemplates(ns), withSecrets("trusted"));
    expect(r.status).toBe(201);
    author.close();
  });

  it("refuses a change that adds a Secret the author may not read", async () => {
    await admin.mustCreate(paths.podtemplates(ns), podTemplate("shared"));
    const author = as("author");
    const r = await author.mergePatch(paths.podtemplates(ns, "shared"), {
      spec: { egress: { enabled: true, image: "proxy:1", secretName: "db-credentials" } },
    });
    expect(r.status).toBe(422);
    expect(r.body.message).toContain(`get secrets "db-credentials"`);
    author.close();
  });

  it("the sandbox user's role: boxes, not templates", async () => {
    const user = as("user");
    expect((await user.create(paths.podtemplates(ns), podTemplate("mine"))).status).toBe(403);
    const box = await user.create(paths.podboxes(ns), {
      apiVersion: "pod.cubeplex.ai/v1alpha1",
      kind: "PodBox",
      metadata: { name: "allowed" },
      spec: { templateRef: "trusted", desiredState: "Paused" },
    });
    expect(box.status).toBe(201);
    user.close();
  });
});
