import type { kind } from "pepr";
import type { CubePodTemplate } from "../api/kinds";
import { validatePodTemplate } from "../admission/rules";
import type { ApiClient } from "../client/api-client";
import { paths } from "../client/paths";
import { LABEL_SEED, LABEL_SEED_FILLED, LABEL_SEED_OF } from "../manifests/labels";
import { isControlledBy } from "../manifests/owner";
import type { SeedObservation } from "./decide";

/**
 * Reads a template and its seed PVCs and fill Pods (by the seed label, controlled by this very
 * template: a template deleted and made again under the same name leaves the old one's to the
 * garbage collector).
 */
export async function observeSeed(
  client: ApiClient,
  namespace: string,
  name: string,
): Promise<SeedObservation> {
  const selector = `${LABEL_SEED_OF}=${name}`;
  const [tpl, pvcs, pods] = await Promise.all([
    client.get<CubePodTemplate>(paths.podTemplates(namespace, name)),
    client.list<kind.PersistentVolumeClaim>(paths.pvcs(namespace), selector),
    client.list<kind.Pod>(paths.pods(namespace), selector),
  ]);
  const uid = tpl?.metadata?.uid;
  const verdict =
    tpl && !tpl.metadata?.deletionTimestamp ? validatePodTemplate(tpl.spec) : undefined;
  const mine = <T extends kind.Pod | kind.PersistentVolumeClaim>(list: T[]) =>
    uid ? list.filter(o => isControlledBy(o.metadata, uid)) : [];
  const common = (o: kind.Pod | kind.PersistentVolumeClaim) => ({
    name: o.metadata!.name!,
    key: o.metadata?.labels?.[LABEL_SEED],
    deleting: Boolean(o.metadata?.deletionTimestamp),
  });
  return {
    namespace,
    ...(verdict?.ok ? { template: { name, uid: uid!, spec: verdict.spec } } : {}),
    pvcs: mine(pvcs).map(p => ({
      ...common(p),
      filled: p.metadata?.labels?.[LABEL_SEED_FILLED] === "true",
    })),
    pods: mine(pods).map(p => ({ ...common(p), phase: p.status?.phase })),
  };
}
