import { API_VERSION } from "../api/common";

/** The CubePod API group's root: its cluster-wide collections are `${GROUP_PATH}/<plural>`. */
export const GROUP_PATH = `/apis/${API_VERSION}`;
const GROUP = GROUP_PATH;

/** Namespaced collection and object paths of the kinds the module and the gateway write. */
const path = (base: string, plural: string) => (namespace: string, name?: string) =>
  `${base}/namespaces/${namespace}/${plural}${name ? `/${encodeURIComponent(name)}` : ""}`;

export const paths = {
  pods: path("/api/v1", "pods"),
  pvcs: path("/api/v1", "persistentvolumeclaims"),
  events: path("/api/v1", "events"),
  secrets: path("/api/v1", "secrets"),
  podBoxes: path(GROUP, "podboxes"),
  podWarmPools: path(GROUP, "podwarmpools"),
  podTemplates: path(GROUP, "podtemplates"),
  networkPolicies: path("/apis/networking.k8s.io/v1", "networkpolicies"),
  volumeSnapshots: path("/apis/snapshot.storage.k8s.io/v1", "volumesnapshots"),
};
