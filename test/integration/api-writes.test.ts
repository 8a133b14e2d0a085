import { subscribe, unsubscribe } from "node:diagnostics_channel";
import type { V1Pod } from "@kubernetes/client-node";
import { claimStandby } from "../../capabilities/claim/apply";
import { StandbyIndex } from "../../capabilities/claim/standby-index";
import { ApiClient, type Credentials } from "../../capabilities/client/api-client";
import { paths as apiPaths } from "../../capabilities/client/paths";
import type { PodBox } from "../../capabilities/api/kinds";
import { Failpoints } from "../../capabilities/kit/failpoint";
import { applyAction } from "../../capabilities/kit/object-actions";
import { writeStatusAt } from "../../capabilities/kit/status-patch";
import { WriteEchoes } from "../../capabilities/kit/write-echoes";
import { credentialsOf, Kube, paths } from "../../testkit/kube";

/*
 * The thin shell's error handling, against the real API server: what the module's client does
 * with each answer the decisions rely on. The objects here carry no CubePod label the module
 * acts on, so only these calls touch them.
 */

const kube = new Kube();
let client: ApiClient;
let ns: string;
const ctx = () => ({ client, failpoints: new Failpoints() });

/**
 * A Pod no node will run (its node does not exist), so nothing but the test changes it. No kubelet
 * confirms its deletion either: the test deletes it with no grace period.
 */
const parkedPod = (name: string, labels: Record<string, string> = {}) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, labels },
  spec: { nodeName: "no-such-node", containers: [{ name: "c", image: "busybox" }] },
});

const pvc = (name: string) => ({
  apiVersion: "v1",
  kind: "PersistentVolumeClaim",
  metadata: { name },
  spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } },
});

beforeAll(async () => {
  const credentials = credentialsOf();
  client = new ApiClient(30_000, async () => credentials, "cubepod-tests");
  ns = await kube.namespace("it-api-writes");
});
afterAll(async () => {
  for (const name of await kube.names(paths.pods(ns), "")) {
    await kube.delete(`${paths.pods(ns, name)}?gracePeriodSeconds=0`);
  }
  await kube.delete(`/api/v1/namespaces/${ns}`);
  kube.close();
});

describe("applyAction", () => {
  it("takes a create answered 409 as done (false: the read was outdated), and 404 on delete too", async () => {
    await kube.mustCreate(paths.pvcs(ns), pvc("exists"));
    await kube.mustCreate(paths.pods(ns), parkedPod("exists"));
    const pvcCreate = { type: "createPVC" as const, pvc: pvc("exists") };
    const podCreate = { type: "createPod" as const, pod: parkedPod("exists") };
    await expect(applyAction(ctx(), ns, "box", pvcCreate)).resolves.toBe(false);
    await expect(applyAction(ctx(), ns, "box", podCreate)).resolves.toBe(false);
    await expect(applyAction(ctx(), ns, "box", { type: "deletePVC", name: "gone" })).resolves.toBe(
      false,
    );
    await expect(applyAction(ctx(), ns, "box", { type: "deletePod", name: "gone" })).resolves.toBe(
      false,
    );
    await expect(
      applyAction(ctx(), ns, "box", { type: "createPVC", pvc: pvc("new") }),
    ).resolves.toBe(true);
  });

  it("throws a delete whose precondition failed (409) for a retry, deleting nothing", async () => {
    await kube.mustCreate(paths.pods(ns), parkedPod("guarded"));
    const stale = { type: "deletePod" as const, name: "guarded", resourceVersion: "1" };
    await expect(applyAction(ctx(), ns, "box", stale)).rejects.toMatchObject({ status: 409 });
    expect((await kube.get(paths.pods(ns, "guarded"))).status).toBe(200);
  });

  it("turns an error a retry cannot fix into a PermanentError naming the action", async () => {
    const invalid = { type: "createPVC" as const, pvc: { metadata: { name: "Bad_Name" } } };
    await expect(applyAction(ctx(), ns, "box", invalid)).rejects.toThrow(
      /^createPVC failed: HTTP 422: /,
    );
  });
});

describe("writeStatusAt", () => {
  it("clears the fields the new status no longer has, and writes nothing when it is the same", async () => {
    await kube.mustCreate(paths.pods(ns), parkedPod("status"));
    const at = apiPaths.pods(ns, "status");
    const full = { phase: "Pending", message: "waiting", reason: "Parked" };
    await writeStatusAt(client, at, {}, full);
    expect((await kube.get(paths.pods(ns, "status"))).body.status).toMatchObject(full);

    const rv = await writeStatusAt(client, at, full, { phase: "Pending" });
    expect(rv).toBeDefined();
    const status = (await kube.get(paths.pods(ns, "status"))).body.status;
    expect(status.phase).toBe("Pending");
    expect(status).not.toHaveProperty("message");
    expect(status).not.toHaveProperty("reason");

    await expect(
      writeStatusAt(client, at, { phase: "Pending" }, { phase: "Pending" }),
    ).resolves.toBe(undefined);
  });
});

describe("ApiClient", () => {
  it("keeps its connections when credentials read again are the same, and opens new ones for new TLS material", async () => {
    // Every connection undici opens in this process, as its diagnostics channel reports it.
    let opened = 0;
    const count = () => opened++;
    subscribe("undici:client:connected", count);
    try {
      let credentials: Credentials = credentialsOf();
      let reads = 0;
      // Credentials read again before every request, each time as new objects, as a kubeconfig
      // or a service account's files are.
      const refreshing = new ApiClient(
        30_000,
        async () => (reads++, { ...credentials, ca: Buffer.from(credentials.ca as Buffer) }),
        "cubepod-tests",
        0,
      );
      const namespace = `/api/v1/namespaces/${ns}`;
      const send = async (n: number) => {
        for (let i = 0; i < n; i++) expect(await refreshing.get(namespace)).toBeDefined();
      };
      // The pool may open a second connection for a request sent the moment the first ends.
      await send(2);
      const warm = opened;
      await send(3);
      expect({ reads, opened }).toEqual({ reads: 5, opened: warm });

      // The same CA twice: other TLS material, as valid as before.
      credentials = {
        ...credentials,
        ca: Buffer.concat([credentials.ca as Buffer, Buffer.from("\n"), credentials.ca as Buffer]),
      };
      await send(2);
      expect(reads).toBe(7);
      expect(opened).toBeGreaterThan(warm);
    } finally {
      unsubscribe("undici:client:connected", count);
    }
  });

  it("reads the API server's clock on the scale of the creation timestamps it sets", async () => {
    const before = await client.serverTime();
    const created = await kube.mustCreate(paths.pvcs(ns), pvc("stamped"));
    const after = await client.serverTime();
    const stamped = Date.parse(created.metadata.creationTimestamp);
    expect(before % 1000).toBe(0);
    expect(before).toBeLessThanOrEqual(stamped);
    expect(stamped).toBeLessThanOrEqual(after);
  });
});

describe("claimStandby", () => {
  const POOL = "pod.cubeplex.ai/pool";
  const box = (name: string) =>
    ({
      metadata: { name, namespace: ns, uid: `uid-${name}` },
      spec: { warmPoolRef: "fake-pool" },
    }) as PodBox;
  /** The index's view of a real Pod: Ready, at the given resourceVersion. */
  const asReady = (pod: V1Pod, resourceVersion: string): V1Pod => ({
    ...pod,
    metadata: {
      ...pod.metadata,
      namespace: ns,
      resourceVersion,
      ownerReferences: [
        {
          apiVersion: "pod.cubeplex.ai/v1alpha1",
          kind: "PodWarmPool",
          name: "fake-pool",
          uid: "u",
          controller: true,
        },
      ],
    },
    status: {
      phase: "Running",
      podIP: "127.64.9.1",
      conditions: [{ type: "Ready", status: "True" }],
    },
  });

  it("tries the next standby when one changed (422) or is gone (404)", async () => {
    const changed = await kube.mustCreate(
      paths.pods(ns),
      parkedPod("changed", { [POOL]: "fake-pool" }),
    );
    const good = await kube.mustCreate(paths.pods(ns), parkedPod("good", { [POOL]: "fake-pool" }));
    const index = new StandbyIndex();
    // Seen at a version it is no longer at (someone changed it since), one that is gone, and one as it is.
    index.observe(asReady(changed as V1Pod, "1"));
    index.observe(asReady(parkedPod("vanished", { [POOL]: "fake-pool" }) as V1Pod, "1"));
    index.observe(asReady(good as V1Pod, good.metadata.resourceVersion));

    const s = await claimStandby(client, box("claimer"), index, undefined, new WriteEchoes());
    expect(s?.name).toBe("good");
    const claimed = (await kube.get(paths.pods(ns, "good"))).body;
    // The box is its controller now; its labels stay the pool's until the claim's finish.
    expect(claimed.metadata.ownerReferences).toEqual([
      expect.objectContaining({ kind: "PodBox", name: "claimer", uid: "uid-claimer" }),
    ]);
    expect(claimed.metadata.labels).toEqual({ [POOL]: "fake-pool" });
    // The standby that had changed is untouched.
    expect((await kube.get(paths.pods(ns, "changed"))).body.metadata.labels).toEqual({
      [POOL]: "fake-pool",
    });
  });

  it("finds none when every standby it tries was taken, and says so (undefined)", async () => {
    const taken = await kube.mustCreate(
      paths.pods(ns),
      parkedPod("taken", { [POOL]: "fake-pool" }),
    );
    const index = new StandbyIndex();
    const seen = asReady(taken as V1Pod, taken.metadata.resourceVersion);
    index.observe(seen);
    expect(
      (await claimStandby(client, box("first"), index, undefined, new WriteEchoes()))?.name,
    ).toBe("taken");
    // A second process's index still shows it at the version the first claim changed.
    const other = new StandbyIndex();
    other.observe(seen);
    await expect(
      claimStandby(client, box("second"), other, undefined, new WriteEchoes()),
    ).resolves.toBeUndefined();
    expect((await kube.get(paths.pods(ns, "taken"))).body.metadata.ownerReferences).toEqual([
      expect.objectContaining({ kind: "PodBox", name: "first" }),
    ]);
  });
});
