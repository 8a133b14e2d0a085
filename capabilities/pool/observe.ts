import { randomBytes } from "node:crypto";
import type { kind } from "pepr";
import type { CubePodTemplate, PodWarmPool } from "../api/kinds";
import { podWarmPoolSpecSchema } from "../api/podwarmpool";
import { validatePodTemplate } from "../admission/rules";
import type { ApiClient } from "../client/api-client";
import { paths } from "../client/paths";
import { kubeTime } from "../kit/conditions";
import { isPodReady } from "../kit/pod-ready";
import {
  LABEL_POOL,
  LABEL_TEMPLATE_HASH,
  LABEL_VOLUME,
  LABEL_VOLUME_KEY,
} from "../manifests/labels";
import { boxOfPod } from "../manifests/owner";
import { templateHash } from "../manifests/template-hash";
import type { SeedIndex } from "../seed/seed-index";
import { MAX_SURGE, ObservedStandby, PoolObservation, STANDBY_CREATE_BATCH } from "./decide";

/** Reads a pool, its template and its standbys (Pods and PVCs by the pool label). */
export async function observePool(
  client: ApiClient,
  pool: PodWarmPool,
  now = new Date(),
  seeds?: SeedIndex,
): Promise<PoolObservation> {
  const namespace = pool.metadata!.namespace!;
  const name = pool.metadata!.name!;
  const spec = podWarmPoolSpecSchema.parse(pool.spec);
  const [tpl, pods, pvcs] = await Promise.all([
    client.get<CubePodTemplate>(paths.podTemplates(namespace, spec.templateRef)),
    client.list<kind.Pod>(paths.pods(namespace), `${LABEL_POOL}=${name}`),
    client.list<kind.PersistentVolumeClaim>(paths.pvcs(namespace), `${LABEL_POOL}=${name}`),
  ]);
  const verdict = tpl ? validatePodTemplate(tpl.spec) : undefined;
  const found = verdict?.ok ? { name: spec.templateRef, spec: verdict.spec } : undefined;
  const template = found && seeds ? seeds.withSeed(namespace, found) : found;

  const standbys = new Map<string, ObservedStandby>();
  const entry = (key: string) => {
    const s = standbys.get(key) ?? { name: key, pvcs: [] };
    standbys.set(key, s);
    return s;
  };
  for (const p of pvcs) {
    const key = p.metadata?.labels?.[LABEL_VOLUME_KEY];
    const role = p.metadata?.labels?.[LABEL_VOLUME];
    if (!key || (role !== "rootfs" && role !== "workspace")) continue;
    const s = entry(key);
    s.templateHash ??= p.metadata?.labels?.[LABEL_TEMPLATE_HASH];
    s.pvcs.push({
      name: p.metadata!.name!,
      role,
      deleting: Boolean(p.metadata?.deletionTimestamp),
      owners: p.metadata?.ownerReferences ?? [],
    });
  }
  for (const p of pods) {
    // A standby a box has claimed, before its finish relabels it: the box's now, PVCs included.
    if (boxOfPod(p.metadata ?? {}) !== undefined) {
      standbys.delete(p.metadata?.labels?.[LABEL_VOLUME_KEY] ?? p.metadata!.name!);
      continue;
    }
    const s = entry(p.metadata!.name!);
    s.templateHash = p.metadata?.labels?.[LABEL_TEMPLATE_HASH] ?? s.templateHash;
    s.pod = {
      name: p.metadata!.name!,
      uid: p.metadata?.uid,
      phase: p.status?.phase,
      podIP: p.status?.podIP,
      ready: isPodReady(p),
      deleting: Boolean(p.metadata?.deletionTimestamp),
      resourceVersion: p.metadata?.resourceVersion,
    };
  }
  // PVCs whose Pod left the pool: a box claimed it and will take the PVCs over; not ours now.
  const podless = [...standbys.values()].filter(s => !s.pod).map(s => s.name);
  if (podless.length > 0) {
    const claimed = await client.list<kind.Pod>(
      paths.pods(namespace),
      `${LABEL_VOLUME_KEY} in (${podless.join(",")})`,
    );
    for (const p of claimed) standbys.delete(p.metadata?.labels?.[LABEL_VOLUME_KEY] ?? "");
  }

  const hash = template ? templateHash(template.spec) : undefined;
  return {
    pool: {
      name,
      namespace,
      uid: pool.metadata!.uid!,
      generation: pool.metadata?.generation ?? 0,
      spec,
      status: pool.status ?? {},
    },
    template,
    templateHash: hash,
    standbys: [...standbys.values()],
    freshNames: Array.from(
      {
        length: Math.min(
          Math.max(spec.replicas, spec.autoscale?.maxReplicas ?? 0) + MAX_SURGE,
          STANDBY_CREATE_BATCH,
        ),
      },
      () => `${name}-${randomBytes(3).toString("hex")}`,
    ),
    now: kubeTime(now),
  };
}
