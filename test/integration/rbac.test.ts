import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { auditEvents } from "../../testkit/audit-log";
import { BIN_DIR, Kube, Obj, ROOT } from "../../testkit/kube";
import { applyGatewayAccess } from "./deployed-gateway";
import { GATEWAY_NAME, GATEWAY_RULES } from "../../build/gateway-deployment";

/*
 * The module's ClusterRole, as `npm run build` writes it, against what the module did while the
 * other integration files ran (this file runs after them: sequencer.js), as the API server's audit
 * log recorded it: every request the module sent is granted, and every grant was used. Only a run
 * of the whole suite uses every grant.
 */

const manifest = join(ROOT, "dist", "pepr-module-cubepod.yaml");
const chart = join(ROOT, "dist", "cubepod-chart");
const helm = join(BIN_DIR, "helm");

/**
 * The user agents of the module's two clients: its ApiClient, and Pepr's watches and store; a
 * sharded watcher's ApiClient names its replica (`cubepod/<replica>`).
 */
const MODULE_AGENTS = ["cubepod", "kubernetes-fluent-client"];
const isModuleAgent = (agent: string) =>
  MODULE_AGENTS.includes(agent) || agent?.startsWith("cubepod/");
/** The module deployed from its chart (real-sandboxes.test.ts) runs as this: no install step. */
const MODULE_ACCOUNT = "system:serviceaccount:pepr-system:pepr-cubepod";
/**
 * What `pepr dev` does as the installer before it starts the module (in a cluster: `pepr deploy`,
 * Helm or kubectl, with the installer's rights), and on its way out.
 */
const INSTALL_STEP = [
  "* admissionregistration.k8s.io/mutatingwebhookconfigurations",
  "* admissionregistration.k8s.io/validatingwebhookconfigurations",
  "* apiextensions.k8s.io/customresourcedefinitions",
  "* /namespaces",
  "delete pepr.dev/peprstores",
];
/** Granted for paths no test takes, each with its reason. */
const RARELY_USED: Record<string, string> = {
  "create pepr.dev/peprstores": "Pepr creates its store at the module's first start in a cluster",
  "create apiextensions.k8s.io/customresourcedefinitions":
    "Pepr's controller creates its store's CRD when no installer applied it before",
  "create /secrets":
    "the module makes the gateway's token key at its first start in a cluster; the local cluster makes it from its key file",
};

type Rule = { apiGroups: string[]; resources: string[]; verbs: string[] };

const clusterRole = (docs: Obj[]) =>
  docs.find(d => d?.kind === "ClusterRole" && d.metadata.name === "pepr-cubepod") as {
    rules: Rule[];
  };

/** "verb group/resource[/subresource]" for every grant of the rules. */
const grants = (rules: Rule[]) =>
  new Set(
    rules.flatMap(r =>
      r.apiGroups.flatMap(g => r.resources.flatMap(res => r.verbs.map(v => `${v} ${g}/${res}`))),
    ),
  );

const installStep = (use: string) =>
  INSTALL_STEP.some(i => i === use || (i.startsWith("* ") && use.endsWith(` ${i.slice(2)}`)));

beforeAll(() => {
  if (!existsSync(manifest))
    execFileSync("bash", [join(ROOT, "build", "build-module.sh")], { stdio: "ignore" });
});

/** The Role the chart adds for sharded watchers' Leases (`watcher.replicas` above one). */
const shardRole = () =>
  parseAllDocuments(
    execFileSync(helm, ["template", "cubepod", chart, "--set", "watcher.replicas=3"], {
      encoding: "utf8",
    }),
  )
    .map(d => d.toJS() as Obj)
    .find(d => d?.kind === "Role" && d.metadata.name === "pepr-cubepod-shards") as {
    rules: Rule[];
  };

/** The module's Role in the gateway's namespace, for the gateway's token key. */
const tokenKeyRole = (docs: Obj[]) =>
  docs.find(d => d?.kind === "Role" && d.metadata.name === `${GATEWAY_NAME}-token-key`) as {
    rules: (Rule & { resourceNames?: string[] })[];
  };

describe("the module's ClusterRole and its shards' Role, against the audit log", () => {
  const docs = parseAllDocuments(readFileSync(manifest, "utf8")).map(d => d.toJS());
  const role = clusterRole(docs);
  // The sharding file runs the watchers sharded: their Leases are the Role's.
  const granted = new Set([
    ...grants(role.rules),
    ...grants(shardRole().rules),
    ...grants(tokenKeyRole(docs).rules),
  ]);

  /** What the module's clients asked of the API server, as "verb group/resource[/sub]". */
  const used = () => {
    const out = new Set<string>();
    const since = process.env.CUBEPOD_TEST_RUN_STARTED ?? "";
    for (const e of auditEvents('"userAgent":"')) {
      if (!isModuleAgent(e.userAgent) || !e.objectRef?.resource) continue;
      if (e.stageTimestamp < since) continue;
      const { apiGroup = "", resource, subresource } = e.objectRef;
      const target = `${apiGroup}/${resource}${subresource ? `/${subresource}` : ""}`;
      // A server-side apply that creates its object is a patch the API server also authorizes
      // as a create.
      const uses = [`${e.verb} ${target}`];
      if (e.verb === "patch" && e.responseStatus?.code === 201) uses.push(`create ${target}`);
      for (const use of uses) {
        if (e.user?.username === MODULE_ACCOUNT || !installStep(use)) out.add(use);
      }
    }
    return out;
  };

  it("grants every request the module sent", () => {
    const missing = [...used()].filter(u => !granted.has(u));
    expect(missing).toEqual([]);
  });

  it("grants nothing the module did not use", () => {
    const seen = used();
    const unused = [...granted].filter(g => !seen.has(g) && !(g in RARELY_USED));
    expect(unused).toEqual([]);
  });

  it("writes no CustomResourceDefinition but its store's, and the Helm chart grants the same", () => {
    const crds = role.rules.filter(r => r.apiGroups.includes("apiextensions.k8s.io"));
    expect(crds).toEqual([expect.objectContaining({ resourceNames: ["peprstores.pepr.dev"] })]);
    const rendered = parseAllDocuments(
      execFileSync(helm, ["template", "cubepod", chart], { encoding: "utf8" }),
    ).map(d => d.toJS() as Obj);
    expect(grants(clusterRole(rendered).rules)).toEqual(grants(role.rules));
  });

  it("reads no Secret but the gateway's token key, in the gateway's namespace only", () => {
    expect(role.rules.filter(r => r.resources.includes("secrets"))).toEqual([]);
    const key = tokenKeyRole(docs);
    expect(key.rules).toEqual([
      { apiGroups: [""], resources: ["secrets"], verbs: ["create"] },
      {
        apiGroups: [""],
        resources: ["secrets"],
        resourceNames: [`${GATEWAY_NAME}-token-key`],
        verbs: ["get"],
      },
    ]);
    expect((key as unknown as Obj).metadata.namespace).toBe("pepr-system");
  });
});

describe("the gateway's ClusterRole, against the audit log", () => {
  // Its requests are those of the replica gateway.test.ts runs as the manifest's ServiceAccount.
  const user = `system:serviceaccount:pepr-system:${GATEWAY_NAME}`;
  const granted = grants(GATEWAY_RULES);
  const rarelyUsed: Record<string, string> = {
    "get pod.cubeplex.ai/podtemplates": "a template its watch has not delivered yet is read once",
  };
  const used = () => {
    const out = new Set<string>();
    const since = process.env.CUBEPOD_TEST_RUN_STARTED ?? "";
    for (const e of auditEvents(user)) {
      if (e.user?.username !== user || !e.objectRef?.resource || e.stageTimestamp < since) continue;
      const { apiGroup = "", resource, subresource } = e.objectRef;
      out.add(`${e.verb} ${apiGroup}/${resource}${subresource ? `/${subresource}` : ""}`);
    }
    return out;
  };

  it("grants every request the gateway sent, and nothing it did not use", () => {
    const seen = used();
    expect([...seen].filter(u => !granted.has(u))).toEqual([]);
    expect([...granted].filter(g => !seen.has(g) && !(g in rarelyUsed))).toEqual([]);
  });
});

describe("the gateway's account, asked of the API server (SubjectAccessReviews)", () => {
  const user = `system:serviceaccount:pepr-system:${GATEWAY_NAME}`;
  const kube = new Kube();
  beforeAll(() => applyGatewayAccess());

  const may = async (verb: string, resource: string, namespace?: string, group = "") => {
    const review = await kube.request(
      "POST",
      "/apis/authorization.k8s.io/v1/subjectaccessreviews",
      {
        apiVersion: "authorization.k8s.io/v1",
        kind: "SubjectAccessReview",
        spec: { user, resourceAttributes: { verb, group, resource, namespace } },
      },
    );
    expect(review.status).toBe(201);
    return review.body.status.allowed === true;
  };

  it.each([
    ["a tenant's", "it-tenant"],
    ["kube-system's", "kube-system"],
    ["its own namespace's", "pepr-system"],
    ["any namespace's", undefined],
  ])("may read, list, watch or write none of %s Secrets", async (_, namespace) => {
    for (const verb of ["get", "list", "watch", "create", "update", "patch", "delete"]) {
      expect([verb, await may(verb, "secrets", namespace)]).toEqual([verb, false]);
    }
  });

  it("may do what it serves E2B's API with: API keys, boxes, templates, pools", async () => {
    expect(await may("list", "podapikeys", undefined, "pod.cubeplex.ai")).toBe(true);
    expect(await may("create", "podboxes", "it-tenant", "pod.cubeplex.ai")).toBe(true);
    expect(await may("create", "podapikeys", "it-tenant", "pod.cubeplex.ai")).toBe(false);
    expect(await may("create", "pods", "it-tenant")).toBe(false);
    expect(await may("get", "configmaps", "pepr-system")).toBe(false);
  });
});
