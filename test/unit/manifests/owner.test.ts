import { boxOfPod, isControlledBy } from "../../../capabilities/manifests/owner";

describe("isControlledBy", () => {
  const ref = (uid: string, controller?: boolean) => ({
    apiVersion: "v1",
    kind: "X",
    name: "x",
    uid,
    controller,
  });

  it("is true only for the controller reference with that uid", () => {
    expect(isControlledBy({ ownerReferences: [ref("u1", true)] }, "u1")).toBe(true);
    expect(isControlledBy({ ownerReferences: [ref("u1")] }, "u1")).toBe(false);
    expect(isControlledBy({ ownerReferences: [ref("u2", true)] }, "u1")).toBe(false);
    expect(isControlledBy({}, "u1")).toBe(false);
    expect(isControlledBy(undefined, "u1")).toBe(false);
  });
});

describe("boxOfPod", () => {
  const ref = (kind: string, name: string, controller?: boolean) => ({
    kind,
    name,
    controller,
  });

  it("names the controlling PodBox, else the box label; none for another controller", () => {
    // A claimed standby before its finish: the pool's labels, the box as controller.
    const claimed = {
      labels: { "pod.cubeplex.ai/pool": "p" },
      ownerReferences: [ref("PodBox", "b", true)],
    };
    expect(boxOfPod(claimed)).toBe("b");
    expect(boxOfPod({ labels: { "pod.cubeplex.ai/box": "b" } })).toBe("b");
    // A standby: its pool controls it.
    expect(boxOfPod({ ownerReferences: [ref("PodWarmPool", "p", true)] })).toBeUndefined();
    expect(
      boxOfPod({
        labels: { "pod.cubeplex.ai/box": "b" },
        ownerReferences: [ref("ReplicaSet", "r", true)],
      }),
    ).toBeUndefined();
    expect(boxOfPod({ ownerReferences: [ref("PodBox", "b")] })).toBeUndefined();
    expect(boxOfPod({})).toBeUndefined();
  });
});
