import { execFileSync } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { BIN_DIR, CLUSTER_DIR, cluster, Kube, paths } from "../../testkit/kube";

/** Processes still running a control-plane binary or `pepr dev` of this checkout. */
function leftovers(): string[] {
  const out = execFileSync("ps", ["-eo", "pid=,args="], { encoding: "utf8" });
  return out
    .split("\n")
    .filter(
      l => l.includes(`${BIN_DIR}/`) || /pepr(\.js)? dev/.test(l) || l.includes("pepr-cubepod.js"),
    )
    .filter(l => !l.includes("ps -eo"));
}

describe("npm run up / down / up", () => {
  afterAll(() => {
    // Leave the cluster as the other tests expect it.
    cluster("up");
  });

  it("down stops every process, and removes the module's webhooks", async () => {
    cluster("down");
    expect(leftovers()).toEqual([]);
    expect(readdirSync(join(CLUSTER_DIR, "pids"))).toEqual([]);
    // Bring back only the API server to look: no webhook configuration may be left.
    cluster("up", "--no-module");
    const kube = new Kube();
    const r = await kube.get(
      "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/pepr-cubepod",
    );
    expect(r.status).toBe(404);
    const v = await kube.get(
      "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/pepr-cubepod",
    );
    expect(v.status).toBe(404);
    kube.close();
    cluster("down");
    expect(leftovers()).toEqual([]);
  });

  it("up after down works again, and up twice is harmless", async () => {
    cluster("up");
    const again = cluster("up");
    expect(again).toContain("already running");
    expect(existsSync(join(CLUSTER_DIR, "kubeconfig"))).toBe(true);
    const kube = new Kube();
    const ns = await kube.namespace("it-updown");
    await kube.mustCreate(paths.podtemplates(ns), {
      apiVersion: "pod.cubeplex.ai/v1alpha1",
      kind: "PodTemplate",
      metadata: { name: "python" },
      spec: { image: "py:3" },
    });
    const created = await kube.mustCreate(paths.pods(ns), {
      metadata: { name: "sandbox", labels: { "pod.cubeplex.ai/template": "python" } },
      spec: { containers: [{ name: "sandbox", image: "py:3" }] },
    });
    expect(created.spec.initContainers[0].name).toBe("podd-installer");
    await kube.delete(`/api/v1/namespaces/${ns}`);
    kube.close();
  });
});
