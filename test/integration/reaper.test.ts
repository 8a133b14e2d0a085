import { Kube, Obj, paths } from "../../testkit/kube";
import { podTemplate } from "../../testkit/objects";
import { inNamespace, useTestNamespace } from "./lifecycle-helpers";

const kube = new Kube();
let ns: string;
let h: ReturnType<typeof inNamespace>;

useTestNamespace(kube, "it-reaper", podTemplate("python"), (n, helpers) => {
  ns = n;
  h = helpers;
});

const get = async (name: string) => (await kube.get(paths.podboxes(ns, name))).body as Obj;
const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d+Z$/, "Z");

describe("the reaper (a pass every 10 s, Pepr's shortest schedule)", () => {
  it("pauses a box idle past its timeout (IdlePaused) without touching its spec", async () => {
    await h.createBox("idle", { templateRef: "python", idleTimeoutSeconds: 2 });
    await h.waitPhase("idle", "Running");
    const box = await h.waitPhase("idle", "Paused", "IdlePaused", 30_000);
    expect(box.spec.desiredState).toBe("Running");
    expect(box.metadata.generation).toBe(1);
    expect(await h.podsOf("idle")).toEqual([]);
    expect(await h.pvcsOf("idle")).toEqual(["idle-rootfs-g1", "idle-workspace"]);
  });

  it("resumes it when a client records activity (annotation), and pauses it again when idle", async () => {
    await kube.mergePatch(paths.podboxes(ns, "idle"), {
      metadata: { annotations: { "pod.cubeplex.ai/last-activity": iso(Date.now()) } },
    });
    const box = await h.waitPhase("idle", "Running", "Resumed");
    expect(box.status.podName).toBe("idle");
    await h.waitPhase("idle", "Paused", "IdlePaused", 30_000);
  });

  it("reports an activity annotation that is not RFC 3339 and keeps managing the box", async () => {
    await h.createBox("odd-clock", { templateRef: "python" });
    await h.waitPhase("odd-clock", "Running");
    await kube.mergePatch(paths.podboxes(ns, "odd-clock"), {
      metadata: { annotations: { "pod.cubeplex.ai/last-activity": "2030" } },
    });
    const reported = await kube.waitFor(paths.podboxes(ns, "odd-clock"), o =>
      (o?.status?.conditions ?? []).some(
        (c: Obj) => c.type === "ActivityRecorded" && c.reason === "InvalidAnnotation",
      ),
    );
    expect(reported?.status.lastActivityAt).not.toBe("2030");
    // Its status still takes writes: a pause goes through.
    await h.patchBox("odd-clock", { desiredState: "Paused" });
    await h.waitPhase("odd-clock", "Paused", "Paused");
  });

  it("leaves a leased box running; once the lease expires it is paused, then terminated", async () => {
    const leaseEnd = Date.now() + 8_000;
    const phases: { phase: string; reason: string; at: number }[] = [];
    const stop = kube.watchCollection(paths.podboxes(ns), (_, o) => {
      if (o.metadata.name === "leased" && o.status?.phase) {
        phases.push({ phase: o.status.phase, reason: o.status.reason, at: Date.now() });
      }
    });
    await h.createBox("leased", {
      templateRef: "python",
      idleTimeoutSeconds: 1,
      leaseExpiresAt: iso(leaseEnd),
    });
    const done = await h.waitPhase("leased", "Terminated", "LeaseExpired", 60_000);
    stop();
    expect(done.status.message).toBe("lease expired: Pod deleted (volumes deleted)");
    expect(done.spec.desiredState).toBe("Running");
    const firstPause = phases.find(p => p.reason === "IdlePaused");
    expect(firstPause).toBeDefined();
    // Idle long before, but paused only once the lease had run out.
    expect(firstPause!.at).toBeGreaterThanOrEqual(leaseEnd - 1000);
    expect([...phases.map(p => p.reason), done.status.reason]).toEqual(
      expect.arrayContaining(["Started", "IdlePaused", "LeaseExpired"]),
    );
    await h.waitPVCs("leased", []);
    // Late activity does not bring it back.
    await kube.mergePatch(paths.podboxes(ns, "leased"), {
      metadata: { annotations: { "pod.cubeplex.ai/last-activity": iso(Date.now()) } },
    });
    await new Promise(r => setTimeout(r, 1000));
    expect((await get("leased")).status).toMatchObject({
      phase: "Terminated",
      reason: "LeaseExpired",
    });
  });
});
