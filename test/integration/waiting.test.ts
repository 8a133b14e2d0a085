import { auditLines } from "../../testkit/audit-log";
import { Kube, paths } from "../../testkit/kube";
import { podTemplate } from "../../testkit/objects";
import { inNamespace, useTestNamespace } from "./lifecycle-helpers";

const kube = new Kube();
let ns: string;
let h: ReturnType<typeof inNamespace>;

useTestNamespace(kube, "it-waiting", podTemplate("python"), (n, helpers) => {
  ns = n;
  h = helpers;
});

/** Requests the module's own client sent about objects in the test's namespace (audit log). */
const moduleRequestsInNamespace = () =>
  auditLines('"userAgent":"cubepod"', `"namespace":"${ns}"`).length;

const sleep = (ms: number) => new Promise(r => setTimeout(r, ms));

describe("boxes waiting for something that does not exist yet", () => {
  it("cost no request while they wait, in every waiting reason", async () => {
    await h.createBox("needs-template", { templateRef: "later" });
    await h.createBox("needs-pool", { warmPoolRef: "later-pool" });
    await h.createBox("needs-parent", { templateRef: "python", forkFrom: "later-parent" });
    await h.createBox("needs-volumes", { templateRef: "python", volumeKey: "later-key" });
    await h.waitPhase("needs-template", "Pending", "TemplateNotFound");
    await h.waitPhase("needs-pool", "Pending", "TemplateNotFound");
    await h.waitPhase("needs-parent", "Pending", "ForkParentNotFound");
    await h.waitPhase("needs-volumes", "Pending", "VolumesNotFound");
    // Past the Events' and claims' deferred writes, then two of the old polling periods.
    await sleep(6_000);
    const before = moduleRequestsInNamespace();
    await sleep(12_000);
    expect(moduleRequestsInNamespace()).toBe(before);
  });

  it("each wake on the watch event of what it waits for", async () => {
    await kube.mustCreate(paths.podtemplates(ns), podTemplate("later"));
    await h.waitPhase("needs-template", "Running");

    await kube.mustCreate(paths.podwarmpools(ns), {
      apiVersion: "pod.cubeplex.ai/v1alpha1",
      kind: "PodWarmPool",
      metadata: { name: "later-pool" },
      spec: { templateRef: "python", replicas: 1 },
    });
    await h.waitPhase("needs-pool", "Running");

    await h.createBox("later-parent", { templateRef: "python" });
    await h.waitPhase("later-parent", "Running");
    await h.waitPhase("needs-parent", "Running", "ForkCloned");
  });
});
