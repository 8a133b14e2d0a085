import { Kube, paths } from "../../testkit/kube";

/*
 * The real node `npm run up` starts beside kwok's (local-cluster/real-node.sh): a kubelet on
 * containerd and runc, Pods on a CNI bridge in 198.18.0.0/24, reachable from this machine only.
 */

const NODE = "cubepod-real-0";
const kube = new Kube();
let ns: string;

/** A Pod that serves its own name over HTTP, from the busybox image the node pulls from the local registry. */
function webPod(name: string, onRealNode: boolean) {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name },
    spec: {
      containers: [
        {
          name: "web",
          image: "cubepod.local/busybox:1",
          imagePullPolicy: "IfNotPresent",
          command: ["/bin/sh", "-c"],
          args: [
            'mkdir -p /www && echo "hello from $(hostname)" > /www/index.html && exec httpd -f -p 8080 -h /www',
          ],
        },
      ],
      terminationGracePeriodSeconds: 0,
      ...(onRealNode
        ? {
            nodeSelector: { "cubepod.dev/node": "real" },
            tolerations: [
              { key: "cubepod.dev/real-node", operator: "Exists", effect: "NoSchedule" },
            ],
          }
        : {}),
    },
  };
}

beforeAll(async () => {
  ns = await kube.namespace("it-real-node");
});
afterAll(async () => {
  await kube.delete(`/api/v1/namespaces/${ns}`);
  kube.close();
});

describe("the real node", () => {
  it("is Ready, and tainted so that only Pods that ask for it land there", async () => {
    const node = (await kube.get(`/api/v1/nodes/${NODE}`)).body;
    const ready = node.status.conditions.find((c: { type: string }) => c.type === "Ready");
    expect(ready.status).toBe("True");
    expect(node.spec.taints).toContainEqual({ key: "cubepod.dev/real-node", effect: "NoSchedule" });
    expect(node.status.nodeInfo.containerRuntimeVersion).toMatch(/^containerd:\/\//);
  });

  it("runs a Pod for real: its own address on the bridge, answering from this machine", async () => {
    await kube.mustCreate(paths.pods(ns), webPod("web", true));
    const pod = await kube.waitFor(
      paths.pods(ns, "web"),
      o =>
        o?.status?.conditions?.some(
          (c: { type: string; status: string }) => c.type === "Ready" && c.status === "True",
        ),
      120_000,
    );
    expect(pod!.spec.nodeName).toBe(NODE);
    expect(pod!.status.podIP).toMatch(/^198\.18\.0\.\d+$/);
    const answer = await fetch(`http://${pod!.status.podIP}:8080/`);
    expect(await answer.text()).toBe("hello from web\n");
  });

  it("leaves a Pod that does not ask for it to kwok", async () => {
    await kube.mustCreate(paths.pods(ns), webPod("elsewhere", false));
    const pod = await kube.waitFor(paths.pods(ns, "elsewhere"), o => Boolean(o?.spec?.nodeName));
    expect(pod!.spec.nodeName).toBe("kwok-node-0");
  });
});
