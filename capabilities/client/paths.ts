import { API_VERSION } from "../api/common";

const GROUP = `/apis/${API_VERSION}`;

/** Namespaced collection and object paths of the kinds the module reads and writes. */
const path = (base: string, plural: string) => (namespace: string, name?: string) =>
  `${base}/namespaces/${namespace}/${plural}${name ? `/${encodeURIComponent(name)}` : ""}`;

export const paths = {
  pods: path("/api/v1", "pods"),
  pvcs: path("/api/v1", "persistentvolumeclaims"),
  events: path("/api/v1", "events"),
  podBoxes: path(GROUP, "podboxes"),
  podWarmPools: path(GROUP, "podwarmpools"),
  podTemplates: path(GROUP, "podtemplates"),
};
