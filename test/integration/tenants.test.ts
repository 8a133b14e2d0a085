import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { Kube, Obj, paths, ROOT } from "../../testkit/kube";
import { podAPIKey, podBox, podTemplate, TEMPLATE } from "../../testkit/objects";

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
  await bind("key-admin", "cubepod-api-key-admin");
});
afterAll(async () => {
  await admin.delete(`/api/v1/namespaces/${ns}`);
  admin.close();
});

const withSecret = (name: string) =>
  podTemplate(name, {
    ...TEMPLATE,
    egress: { enabled: true, image: "proxy:1", secretName: "db-credentials" },
  });

describe("a PodTemplate lends no right its author lacks", () => {
  it("refuses a template naming a Secret from an author who may not read it or create Pods", async () => {
    const author = as("author");
    // RBAC itself: the author may not read the Secret.
    expect((await author.get(`/api/v1/namespaces/${ns}/secrets/db-credentials`)).status).toBe(403);
    const r = await author.create(paths.podtemplates(ns), withSecret("exfiltrate"));
    expect(r.status).toBe(422);
    expect(r.body.message).toContain("author needs those rights; author may not:");
    expect(r.body.message).toContain(`create pods in namespace "${ns}"`);
    expect(r.body.message).toContain(`get secrets "db-credentials" in namespace "${ns}"`);
    // Only the Secret it names: nothing a template does reads Secrets in general.
    expect(r.body.message).not.toContain(`get secrets in namespace "${ns}"`);
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
    const r = await author.create(paths.podtemplates(ns), withSecret("trusted"));
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
    expect((await user.create(paths.podapikeys(ns), podAPIKey("mine", "e2b_x"))).status).toBe(403);
    user.close();
  });

  it("the key admin's role: API keys, by their hash; a key not in that form is refused", async () => {
    const keys = as("key-admin");
    expect((await keys.create(paths.podapikeys(ns), podAPIKey("agents", "e2b_1"))).status).toBe(
      201,
    );
    const bad = await keys.create(paths.podapikeys(ns), {
      ...podAPIKey("plain", "e2b_2"),
      spec: { sha256: "e2b_2" },
    });
    expect(bad.status).toBe(422);
    expect(bad.body.message).toContain("spec.sha256");
    expect((await keys.create(paths.podtemplates(ns), podTemplate("mine"))).status).toBe(403);
    expect((await keys.get(paths.secrets(ns))).status).toBe(403);
    keys.close();
  });
});

describe("only the operator's own Pods and volumes count (provenance)", () => {
  // The namespace editor (built-in `edit`): creates, labels and changes Pods and PVCs.
  const editor = () => as("editor");
  const pool = {
    apiVersion: "pod.cubeplex.ai/v1alpha1",
    kind: "PodWarmPool",
    metadata: { name: "pool" },
    spec: { templateRef: "plain", replicas: 1 },
  };
  const refused = (r: { status: number; body: Obj }, mark: string) => {
    expect(r.status).toBe(403);
    expect(r.body.message).toContain(mark);
  };
  let victimPod: Obj;
  let claimedPod: Obj;

  beforeAll(async () => {
    await bind("editor", "edit");
    await bind("editor", "cubepod-sandbox-user");
    await admin.mustCreate(paths.podtemplates(ns), podTemplate("plain"));
    await admin.mustCreate(paths.podwarmpools(ns), pool);
    await admin.mustCreate(paths.podboxes(ns), podBox("victim", { templateRef: "plain" }));
    await admin.mustCreate(paths.podboxes(ns), podBox("claimer", { warmPoolRef: "pool" }));
    for (const name of ["victim", "claimer"])
      await admin.waitFor(paths.podboxes(ns, name), o => o?.status?.phase === "Running");
    victimPod = (await admin.get(paths.pods(ns, "victim"))).body;
    const claimer = (await admin.get(paths.podboxes(ns, "claimer"))).body;
    // Once the claim's finish has given it the box's label.
    claimedPod = (await admin.waitFor(
      paths.pods(ns, claimer.status.podName),
      o => o?.metadata.labels?.["pod.cubeplex.ai/box"] === "claimer",
    ))!;
  });

  const lure = (name: string, labels: Record<string, string>, extra: Obj = {}) => ({
    metadata: { name, labels, ...extra },
    spec: {
      nodeName: "nowhere",
      containers: [{ name: "c", image: "evil:1" }],
      volumes: [{ name: "workspace", persistentVolumeClaim: { claimName: "victim-workspace" } }],
    },
  });

  it("lets a template author size a pool through its scale subresource, a sandbox user not", async () => {
    const scale = `${paths.podwarmpools(ns, "pool")}/scale`;
    expect((await as("user").mergePatch(scale, { spec: { replicas: 2 } })).status).toBe(403);
    expect((await as("author").mergePatch(scale, { spec: { replicas: 1 } })).status).toBe(200);
    expect((await admin.get(paths.podwarmpools(ns, "pool"))).body.spec.replicas).toBe(1);
  });

  it("refuses a PVC that claims to be a template's filled seed", async () => {
    const seed = {
      metadata: {
        name: "fake-seed",
        labels: {
          "pod.cubeplex.ai/seed-of": "plain",
          "pod.cubeplex.ai/seed": "0123456789",
          "pod.cubeplex.ai/seed-filled": "true",
        },
      },
      spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } },
    };
    refused(await editor().create(paths.pvcs(ns), seed), "label pod.cubeplex.ai/seed");
  });

  it("refuses a Pod that claims to be a box's, and the box keeps its own Pod", async () => {
    const r = await editor().create(
      paths.pods(ns),
      lure("lure", { "pod.cubeplex.ai/box": "victim" }),
    );
    refused(r, "label pod.cubeplex.ai/box=victim");
    const owned = lure(
      "owned",
      {},
      {
        ownerReferences: [{ ...victimPod.metadata.ownerReferences[0] }],
      },
    );
    refused(await editor().create(paths.pods(ns), owned), "ownerReference to PodBox victim");
    const box = (await admin.get(paths.podboxes(ns, "victim"))).body;
    expect(box.status).toMatchObject({ phase: "Running", podName: "victim" });
    expect((await admin.get(paths.pods(ns, "victim"))).body.metadata.uid).toBe(
      victimPod.metadata.uid,
    );
  });

  it("refuses a fake standby copied from a real one", async () => {
    const standby = await admin.waitForItems(
      `${paths.pods(ns)}?labelSelector=${encodeURIComponent("pod.cubeplex.ai/pool=pool")}`,
      items => items.length > 0,
    );
    const { labels, ownerReferences } = standby[0].metadata;
    const r = await editor().create(
      paths.pods(ns),
      lure("fake-standby", labels, { ownerReferences }),
    );
    refused(r, "pod.cubeplex.ai/");
  });

  it("refuses re-labelling a claimed box's Pod as a standby, or unlabelling a box's Pod", async () => {
    const relabel = {
      metadata: { labels: { "pod.cubeplex.ai/pool": "pool", "pod.cubeplex.ai/box": null } },
    };
    refused(
      await editor().mergePatch(paths.pods(ns, claimedPod.metadata.name), relabel),
      "pod.cubeplex.ai/",
    );
    refused(
      await editor().mergePatch(paths.pods(ns, "victim"), {
        metadata: { labels: { "pod.cubeplex.ai/box": null } },
      }),
      "label pod.cubeplex.ai/box=victim",
    );
  });

  it("refuses a change of a sandbox Pod's spec, and takes other labels", async () => {
    const image = { spec: { containers: [{ name: "sandbox", image: "evil:1" }] } };
    const r = await editor().request(
      "PATCH",
      paths.pods(ns, "victim"),
      image,
      "application/strategic-merge-patch+json",
    );
    expect(r.status).toBe(403);
    expect(r.body.message).toContain("the spec of a CubePod sandbox Pod is changed only by");
    const note = { metadata: { labels: { team: "a" } } };
    expect((await editor().mergePatch(paths.pods(ns, "victim"), note)).status).toBe(200);
  });

  it("refuses a PVC that claims a volume key", async () => {
    const pvc = {
      metadata: { name: "fake-workspace", labels: { "pod.cubeplex.ai/volume-key": "victim" } },
      spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } },
    };
    refused(await editor().create(paths.pvcs(ns), pvc), "label pod.cubeplex.ai/volume-key=victim");
  });

  it("re-attaches no standby's volumes through volumeKey", async () => {
    const standby = (
      await admin.waitForItems(
        `${paths.pods(ns)}?labelSelector=${encodeURIComponent("pod.cubeplex.ai/pool=pool")}`,
        items => items.some(p => p.status?.phase === "Running"),
      )
    ).find(p => p.status?.phase === "Running")!;
    const key = standby.metadata.labels["pod.cubeplex.ai/volume-key"];
    const r = await editor().create(
      paths.podboxes(ns),
      podBox("thief", { volumeKey: key, templateRef: "plain" }),
    );
    expect(r.status).toBe(201);
    const thief = await admin.waitFor(
      paths.podboxes(ns, "thief"),
      o => o?.status?.phase === "Failed",
    );
    expect(thief!.status.reason).toBe("VolumesInUse");
    for (const pvc of await admin.names(paths.pvcs(ns), `pod.cubeplex.ai/volume-key=${key}`)) {
      const owners = (await admin.get(paths.pvcs(ns, pvc))).body.metadata.ownerReferences as Obj[];
      expect(owners.filter(o => o.controller)).toEqual([
        expect.objectContaining({ kind: "PodWarmPool", name: "pool" }),
      ]);
    }
  });

  it("still injects a hand-declared Pod that names only its template", async () => {
    const pod = {
      metadata: { name: "hand", labels: { "pod.cubeplex.ai/template": "plain" } },
      spec: { nodeName: "nowhere", containers: [{ name: "c", image: "py:3" }] },
    };
    const r = await editor().create(paths.pods(ns), pod);
    expect(r.status).toBe(201);
    expect(r.body.metadata.annotations["pod.cubeplex.ai/injected"]).toBeDefined();
    await admin.request("DELETE", `${paths.pods(ns, "hand")}?gracePeriodSeconds=0`);
  });
});
