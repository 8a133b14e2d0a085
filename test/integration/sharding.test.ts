import { auditEvents } from "../../testkit/audit-log";
import { Kube, Obj, paths } from "../../testkit/kube";
import { podTemplate } from "../../testkit/objects";
import { namespaceShard, shardName, shardOf } from "../../capabilities/shard/shard-of";
import { deployModule, undeployModule } from "../../testkit/deployed-module";
import {
  heldBy,
  killModuleProcess,
  namespacesPerShard,
  podOfReplica,
  scaleWatcher,
  shardLease,
  waitLiveHolders,
  waitShardHolders,
  watcherPods,
} from "../../testkit/shards";
import { inNamespace } from "./lifecycle-helpers";

/*
 * Sharded watchers: the module installed from its chart with `watcher.replicas: 3` (three shards),
 * on the real node, its replicas holding the shards' Leases. One namespace per shard, with
 * sandboxes on kwok's node. Ownership is shown on start, when a replica goes and one comes, and
 * when one is killed (SIGKILL, from this host) during a stream of claims; then the audit log
 * shows that every write in each namespace came from the replica holding its shard at the time.
 */

const kube = new Kube();
const SHARDS = 3;
const LEASE_SECONDS = 6;
const SHARD_LABEL = "pod.cubeplex.ai/shard";
const started = new Date().toISOString();
/** namespaces[i] is in shard i. */
let namespaces: string[] = [];
const sleep = (ms: number) => new Promise(r => setTimeout(r, ms));
const waitHolders = (ok: (h: string[]) => boolean, timeoutMs: number) =>
  waitShardHolders(kube, SHARDS, ok, timeoutMs);

/** A namespace whose box ran before the watchers were sharded (one watcher, `pepr dev`). */
let earlier = "";

beforeAll(async () => {
  earlier = await kube.namespace("it-shard-earlier");
  await kube.mustCreate(paths.podtemplates(earlier), podTemplate("python"));
  await inNamespace(kube, earlier).createBox("early", { templateRef: "python" });
  await inNamespace(kube, earlier).readyPool("p", "python", 1);
  await inNamespace(kube, earlier).waitPhase("early", "Running");
  await deployModule(kube, {
    replicas: SHARDS,
    env: { CUBEPOD_SHARD_LEASE_SECONDS: String(LEASE_SECONDS) },
  });
  const suffix = Math.random().toString(36).slice(2, 6);
  namespaces = namespacesPerShard(`it-shard-${suffix}`, SHARDS, ns => shardOf(ns, SHARDS));
  for (const ns of namespaces) {
    await kube.mustCreate("/api/v1/namespaces", { metadata: { name: ns } });
    await kube.mustCreate(paths.podtemplates(ns), podTemplate("python"));
  }
});
afterAll(async () => {
  await Promise.all([...namespaces, earlier].map(ns => kube.delete(`/api/v1/namespaces/${ns}`)));
  await undeployModule(kube);
  kube.close();
});

describe("sharded watchers: three replicas, three shards", () => {
  it("each replica holds one shard on start, watches its share, and names its namespaces in /metrics", async () => {
    const held = await waitLiveHolders(kube, SHARDS, SHARDS, 120_000);
    const pods = await watcherPods(kube);
    expect(pods).toHaveLength(SHARDS);
    for (let i = 0; i < SHARDS; i++) {
      const tpl = (await kube.get(paths.podtemplates(namespaces[i], "python"))).body;
      expect(tpl.metadata.labels?.[SHARD_LABEL]).toBe(shardName(i, SHARDS));
      const pod = podOfReplica(pods, held[i])!;
      expect(pod).toBeDefined();
      const metrics = async () => (await fetch(`http://${pod.status.podIP}:8081/metrics`)).text();
      const shard = shardName(i, SHARDS);
      const deadline = Date.now() + 30_000;
      let text = await metrics();
      while (!text.includes(`namespace="${namespaces[i]}"`) && Date.now() < deadline) {
        await sleep(500);
        text = await metrics();
      }
      expect(text).toContain(`cubepod_shard_held{shard="${shard}",replica="${held[i]}"} 1`);
      expect(text).toContain(
        `cubepod_shard_namespace{shard="${shard}",namespace="${namespaces[i]}"} 1`,
      );
      // Only its own share.
      for (const other of namespaces.filter((_, j) => j !== i)) {
        expect(text).not.toContain(`namespace="${other}"`);
      }
    }
  });

  it("claims and the reaper work in every shard; what the operator creates carries the label", async () => {
    await Promise.all(
      namespaces.map(async (ns, i) => {
        const h = inNamespace(kube, ns);
        await h.readyPool("p", "python", 2, 120_000);
        await h.createBox("claimer", { warmPoolRef: "p" });
        const box = await h.waitPhase("claimer", "Running", "WarmPoolClaimed", 60_000);
        const pod = (await kube.get(paths.pods(ns, box.status.podName))).body;
        expect(pod.metadata.labels[SHARD_LABEL]).toBe(shardName(i, SHARDS));
        const pvc = (await kube.get(paths.pvcs(ns, box.status.workspacePVCName))).body;
        expect(pvc.metadata.labels[SHARD_LABEL]).toBe(shardName(i, SHARDS));
        await h.createBox("idle", { templateRef: "python", idleTimeoutSeconds: 2 });
        await h.waitPhase("idle", "Paused", "IdlePaused", 60_000);
      }),
    );
  });

  it("stamps what was made before the watchers were sharded, and serves it", async () => {
    const shard = namespaceShard(earlier, SHARDS);
    const stamped = (path: string) =>
      kube.waitFor(path, o => o?.metadata.labels?.[SHARD_LABEL] === shard, 60_000);
    await stamped(paths.podtemplates(earlier, "python"));
    await stamped(paths.podwarmpools(earlier, "p"));
    const box = await stamped(paths.podboxes(earlier, "early"));
    await stamped(paths.pods(earlier, box!.status.podName));
    await stamped(paths.pvcs(earlier, box!.status.workspacePVCName));
    const h = inNamespace(kube, earlier);
    await h.patchBox("early", { desiredState: "Paused" });
    await h.waitPhase("early", "Paused", undefined, 60_000);
  });

  it("sets back a shard label someone changed", async () => {
    const ns = namespaces[0];
    await kube.mergePatch(paths.podboxes(ns, "claimer"), {
      metadata: { labels: { [SHARD_LABEL]: "2-of-9" } },
    });
    const box = (await kube.get(paths.podboxes(ns, "claimer"))).body;
    expect(box.metadata.labels[SHARD_LABEL]).toBe(shardName(0, SHARDS));
  });

  it("a replica that goes gives its shard to one that stays; one that comes takes a shard back", async () => {
    const before = await waitLiveHolders(kube, SHARDS, SHARDS, 60_000);
    await scaleWatcher(kube, SHARDS - 1);
    const fewer = await waitHolders(
      h => heldBy(SHARDS - 1)(h) && h.filter(x => before.includes(x)).length === SHARDS,
      60_000,
    );
    const gone = before.find(x => !fewer.includes(x));
    expect(gone).toBeDefined();
    // It gave its shard up as it stopped (the preStop hook), rather than let its Lease expire:
    // its own last request removed its member Lease.
    await sleep(1000);
    const deletes = auditEvents('"verb":"delete"', `cubepod-member-${gone}`).filter(
      e => e.objectRef?.resource === "leases",
    );
    expect(deletes.map(e => e.userAgent)).toContain(`cubepod/${gone}`);
    await scaleWatcher(kube, SHARDS);
    const after = await waitHolders(heldBy(SHARDS), 90_000);
    expect(after.filter(x => !before.includes(x))).toHaveLength(1);
  });

  it("kill -9 of a replica during a stream of claims: no box lost, none claimed twice, its shard served again", async () => {
    const held = await waitLiveHolders(kube, SHARDS, SHARDS, 60_000);
    const shard = 1;
    const ns = namespaces[shard];
    const h = inNamespace(kube, ns);
    await h.readyPool("stream", "python", 4, 120_000);
    const victim = held[shard];
    const pod = podOfReplica(await watcherPods(kube), victim)!;
    const boxes: string[] = [];
    let killedAt = 0;
    for (let k = 0; k < 16; k++) {
      const name = `s-${k}`;
      await h.createBox(name, { warmPoolRef: "stream" });
      boxes.push(name);
      if (k === 3) {
        expect(killModuleProcess(pod)).toBeGreaterThan(0);
        killedAt = Date.now();
      }
      await sleep(500);
    }
    const moved = await waitHolders(h => h[shard] !== "" && h[shard] !== victim, 60_000);
    const lease = (await kube.get(shardLease(shard, SHARDS))).body;
    const servedAfterMs = Date.parse(lease.spec.acquireTime) - killedAt;
    console.log(
      `shard ${shardName(shard, SHARDS)}: held by ${moved[shard]} ${servedAfterMs} ms after ` +
        `${victim} was killed (Lease duration ${LEASE_SECONDS} s)`,
    );
    const running = await Promise.all(
      boxes.map(name => h.waitPhase(name, "Running", undefined, 120_000)),
    );
    const podNames = running.map(b => b.status.podName);
    expect(new Set(podNames).size).toBe(boxes.length);
    // Each claimed standby ends up its box's alone.
    for (const b of running) {
      await kube.waitFor(
        paths.pods(ns, b.status.podName),
        o => o?.metadata.labels?.["pod.cubeplex.ai/box"] === b.metadata.name,
        60_000,
      );
    }
  });

  it("the audit log shows every write in a namespace came from its shard's holder at the time", async () => {
    // Lets the last writes reach the log.
    await sleep(2000);
    const ours = (e: Obj) =>
      typeof e.userAgent === "string" &&
      e.userAgent.startsWith("cubepod/") &&
      e.stageTimestamp >= started;
    const isWrite = (e: Obj) => ["create", "update", "patch", "delete"].includes(e.verb);
    // One reading of the log: the replicas may still be moving shards, and a later reading could
    // hold a namespace write whose Lease write an earlier reading missed.
    const events = auditEvents('"userAgent":"cubepod/').filter(e => ours(e) && isWrite(e));
    // Each shard's Lease writes (acquisitions, renewals, releases), in order of completion.
    const leaseWrites = events
      .filter(e => e.objectRef?.resource === "leases" && e.responseStatus?.code < 300)
      .filter(e => e.objectRef?.name?.startsWith("cubepod-shard-"))
      .sort((a, b) => (a.stageTimestamp < b.stageTimestamp ? -1 : 1));
    const holderAt = (shard: number, at: string) => {
      const name = `cubepod-shard-${shardName(shard, SHARDS)}`;
      let holder = "";
      for (const e of leaseWrites) {
        if (e.objectRef.name !== name || e.stageTimestamp >= at) continue;
        holder = e.userAgent;
      }
      return holder;
    };
    const movedWriters = new Set<string>();
    let checked = 0;
    for (const [shard, ns] of namespaces.entries()) {
      const writes = events.filter(e => e.objectRef?.namespace === ns);
      const wrong = writes
        .map(e => ({
          at: e.requestReceivedTimestamp,
          by: e.userAgent,
          holder: holderAt(shard, e.requestReceivedTimestamp),
          what: `${e.verb} ${e.objectRef.resource}/${e.objectRef.name ?? ""}`,
        }))
        .filter(w => w.by !== w.holder);
      expect(wrong).toEqual([]);
      checked += writes.length;
      if (shard === 1) for (const w of writes) movedWriters.add(w.userAgent);
    }
    expect(checked).toBeGreaterThan(0);
    // The killed replica's namespace was written by it, then by the replica that took it over.
    expect(movedWriters.size).toBeGreaterThanOrEqual(2);
  }, 60_000);
});
