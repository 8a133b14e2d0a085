import type { V1Pod } from "@kubernetes/client-node";
import { injectRuntime } from "../../../capabilities/manifests/injection";
import { buildBoxPod } from "../../../capabilities/manifests/pod";
import { template } from "../fixtures";

const EGRESS = { enabled: true, image: "proxy:1", allowHosts: ["pypi.org", "*.github.com"] };

const built = (t = template()) =>
  buildBoxPod({
    namespace: "ns",
    podName: "box",
    boxName: "box",
    template: t,
    rootfsPVCName: "r",
    workspacePVCName: "w",
  });

const handWritten = (): V1Pod => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "hand", labels: { "pod.cubeplex.ai/template": "python" } },
  spec: { containers: [{ name: "main", image: "img" }] },
});

describe("injectRuntime", () => {
  it("adds podd-installer and mounts its emptyDir at /opt/cubepod/bin", () => {
    const t = template();
    const pod = injectRuntime(built(t), t.spec);
    expect(pod.spec?.initContainers).toEqual([
      {
        name: "podd-installer",
        image: "ghcr.io/cubeplex/podd-injector:v0.1.0",
        command: ["cp", "/opt/cubepod/bin/podd-init", "/opt/cubepod/bin/podd", "/cubepod-bin/"],
        volumeMounts: [{ name: "cubepod-bin", mountPath: "/cubepod-bin" }],
      },
    ]);
    expect(pod.spec?.volumes).toContainEqual({ name: "cubepod-bin", emptyDir: {} });
    expect(pod.spec?.containers[0].volumeMounts).toContainEqual({
      name: "cubepod-bin",
      mountPath: "/opt/cubepod/bin",
      readOnly: true,
    });
    expect(pod.spec?.containers).toHaveLength(1);
    expect(pod.metadata?.annotations?.["pod.cubeplex.ai/injected"]).toBe("true");
  });

  it("adds the egress sidecar and points the sandbox's proxy at it", () => {
    const t = template({ egress: { ...EGRESS, secretName: "egress-creds" } });
    const pod = injectRuntime(built(t), t.spec);
    const sidecar = pod.spec?.containers.find(c => c.name === "egress");
    expect(sidecar).toMatchObject({ image: "proxy:1", ports: [{ containerPort: 15001 }] });
    expect(sidecar?.env).toContainEqual({
      name: "CUBEPOD_EGRESS_ALLOW_HOSTS",
      value: "pypi.org,*.github.com",
    });
    expect(sidecar?.volumeMounts).toEqual([
      { name: "cubepod-egress", mountPath: "/etc/cubepod/egress", readOnly: true },
    ]);
    expect(pod.spec?.volumes).toContainEqual({
      name: "cubepod-egress",
      secret: { secretName: "egress-creds", defaultMode: 0o400 },
    });
    expect(pod.spec?.containers[0].env).toContainEqual({
      name: "HTTPS_PROXY",
      value: "http://127.0.0.1:15001",
    });
  });

  it("leaves the sidecar out when egress is disabled", () => {
    const t = template({ egress: { ...EGRESS, enabled: false } });
    const pod = injectRuntime(built(t), t.spec);
    expect(pod.spec?.containers.map(c => c.name)).toEqual(["sandbox"]);
    expect(pod.spec?.containers[0].env?.map(e => e.name)).not.toContain("HTTPS_PROXY");
  });

  it("mounts the per-pod mTLS secret", () => {
    const t = template({ mtls: { enabled: true } });
    const pod = injectRuntime(built(t), t.spec);
    expect(pod.spec?.volumes).toContainEqual({
      name: "cubepod-mtls",
      secret: { secretName: "cubepod-mtls-box", defaultMode: 0o400 },
    });
    expect(pod.spec?.containers[0].volumeMounts).toContainEqual({
      name: "cubepod-mtls",
      mountPath: "/etc/cubepod/mtls",
      readOnly: true,
    });
  });

  it("refuses mTLS for a Pod whose name is not known yet (generateName)", () => {
    const t = template({ mtls: { enabled: true } });
    const unnamed = { ...built(t), metadata: { generateName: "web-", labels: {} } };
    expect(() => injectRuntime(unnamed, t.spec)).toThrow(
      'the PodTemplate has mTLS enabled, which mounts the Secret "cubepod-mtls-<Pod name>", and this Pod has no name yet (generateName)',
    );
    // Without mTLS such a Pod is fine.
    expect(() => injectRuntime(unnamed, template().spec)).not.toThrow();
  });

  it.each([
    ["plain", template()],
    ["egress + mTLS", template({ egress: EGRESS, mtls: { enabled: true } })],
  ])("is idempotent (%s)", (_, t) => {
    const once = injectRuntime(built(t), t.spec);
    expect(injectRuntime(once, t.spec)).toEqual(once);
  });

  it("does not change its input", () => {
    const t = template({ egress: EGRESS });
    const pod = built(t);
    const copy = structuredClone(pod);
    injectRuntime(pod, t.spec);
    expect(pod).toEqual(copy);
  });

  it("makes a hand-written Pod match an operator-built one in its runtime parts", () => {
    const t = template({ egress: EGRESS, mtls: { enabled: true } });
    const hand = injectRuntime(handWritten(), t.spec);
    const ours = injectRuntime(built(t), t.spec);
    expect(hand.spec?.initContainers).toEqual(ours.spec?.initContainers);
    expect(hand.spec?.containers.find(c => c.name === "egress")).toEqual(
      ours.spec?.containers.find(c => c.name === "egress"),
    );
    // The first container is the sandbox when none is called "sandbox".
    expect(hand.spec?.containers[0].volumeMounts?.[0].mountPath).toBe("/opt/cubepod/bin");
    // The mTLS secret follows the Pod's name when it has no box label.
    expect(hand.spec?.volumes).toContainEqual({
      name: "cubepod-mtls",
      secret: { secretName: "cubepod-mtls-hand", defaultMode: 0o400 },
    });
  });

  it("replaces a stale installer declared in Git instead of adding a second one", () => {
    const t = template();
    const pod = handWritten();
    pod.spec!.initContainers = [{ name: "podd-installer", image: "old:0" }];
    const out = injectRuntime(pod, t.spec);
    expect(out.spec?.initContainers).toHaveLength(1);
    expect(out.spec?.initContainers?.[0].image).toBe("ghcr.io/cubeplex/podd-injector:v0.1.0");
  });
});
