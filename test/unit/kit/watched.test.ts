import { keepMetadata, slim } from "../../../capabilities/kit/watched";

// watchEveryPhase needs Pepr's Capability, which jest cannot load (its client is an ES module):
// the integration tier shows it, as every deletion a box waits for (a Pod's, a PVC's) comes
// through a watch it set up.

describe("slim and keepMetadata", () => {
  const watched = () => ({
    metadata: {
      name: "p",
      uid: "u",
      resourceVersion: "7",
      labels: { a: "b" },
      annotations: { keep: "me", "kubectl.kubernetes.io/last-applied-configuration": "{}" },
      managedFields: [{ manager: "kubectl" }],
    },
    spec: { containers: [] },
    status: { phase: "Running" },
  });

  /** What both keep of the metadata: all but managedFields and kubectl's copy. */
  const slimmedMetadata = {
    name: "p",
    uid: "u",
    resourceVersion: "7",
    labels: { a: "b" },
    annotations: { keep: "me" },
  };

  it("slim drops managedFields and kubectl's last applied copy, in place, and keeps the rest", () => {
    const o = watched();
    expect(slim(o)).toBe(o);
    expect(o).toEqual({
      metadata: slimmedMetadata,
      spec: { containers: [] },
      status: { phase: "Running" },
    });
    expect(slim({})).toEqual({});
  });

  it("keepMetadata keeps what a relist compares and a deletion needs: the metadata", () => {
    const o: Record<string, unknown> = watched();
    keepMetadata(o);
    expect(o).toEqual({ metadata: slimmedMetadata });
  });
});
