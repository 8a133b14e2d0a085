import { stampShard, type MutateRequest } from "../../../capabilities/admission/shard-label";
import { namespaceShard } from "../../../capabilities/shard/shard-of";

const LABEL = "pod.cubeplex.ai/shard";

/** A request as Pepr's mutate request presents it: the object, its namespace, SetLabel. */
const request = (labels?: Record<string, string>): MutateRequest => {
  const Raw = { metadata: { name: "b", namespace: "tenant-a", labels } };
  return {
    Raw,
    Request: { namespace: "tenant-a" },
    SetLabel(key, value) {
      Raw.metadata.labels = { ...Raw.metadata.labels, [key]: value };
    },
  };
};

describe("stampShard", () => {
  it("stamps the namespace's shard, and sets back a changed one", () => {
    const fresh = request();
    stampShard(fresh, 3);
    expect(fresh.Raw.metadata?.labels?.[LABEL]).toBe(namespaceShard("tenant-a", 3));
    const forged = request({ [LABEL]: "9-of-9", app: "x" });
    stampShard(forged, 3);
    expect(forged.Raw.metadata?.labels).toEqual({
      [LABEL]: namespaceShard("tenant-a", 3),
      app: "x",
    });
  });

  it("leaves objects alone with one watcher", () => {
    const req = request({ app: "x" });
    stampShard(req, 1);
    expect(req.Raw.metadata?.labels).toEqual({ app: "x" });
  });
});
