import { podTemplateSpecSchema } from "../../../capabilities/api/podtemplate";
import { accessNeeded, describeAccess } from "../../../capabilities/admission/template-access";

const spec = (extra: object) => podTemplateSpecSchema.parse({ image: "py:3", ...extra });

describe("accessNeeded: the rights a template lends", () => {
  it("always the right to create Pods (the operator runs the template's image)", () => {
    expect(accessNeeded(spec({}))).toEqual([{ verb: "create", resource: "pods" }]);
  });

  it("get on the egress Secret, only when the sidecar is on", () => {
    const egress = { enabled: true, image: "proxy:1", secretName: "creds" };
    expect(accessNeeded(spec({ egress }))).toContainEqual({
      verb: "get",
      resource: "secrets",
      name: "creds",
    });
    expect(accessNeeded(spec({ egress: { ...egress, enabled: false } }))).toHaveLength(1);
  });

  it("never get on Secrets in general: the only Secret a template mounts is one it names", () => {
    const egress = { enabled: true, image: "proxy:1", secretName: "creds" };
    const network = { egress: "None", egressCIDRs: ["203.0.113.0/24"] };
    const secrets = accessNeeded(spec({ egress, network })).filter(a => a.resource === "secrets");
    expect(secrets).toEqual([{ verb: "get", resource: "secrets", name: "creds" }]);
  });

  it("create on NetworkPolicies for egress to named CIDRs, which the operator writes as one", () => {
    const network = { egress: "None", egressCIDRs: ["203.0.113.0/24"] };
    expect(accessNeeded(spec({ network }))).toContainEqual({
      verb: "create",
      resource: "networkpolicies",
    });
    expect(accessNeeded(spec({ network: { egress: "None" } }))).toHaveLength(1);
  });

  it("names each right as a denial shows it", () => {
    expect(describeAccess({ verb: "get", resource: "secrets", name: "creds" }, "ns")).toBe(
      'get secrets "creds" in namespace "ns"',
    );
    expect(describeAccess({ verb: "create", resource: "pods" }, "ns")).toBe(
      'create pods in namespace "ns"',
    );
  });
});
