import { API_VERSION } from "../api/common";
import type { Owner } from "./types";

/** The controller ownerReference a CubePod object puts on what it owns (GC follows it). */
export function controllerRef(kind: "PodBox" | "PodWarmPool", name: string, uid: string): Owner {
  return { apiVersion: API_VERSION, kind, name, uid, controller: true, blockOwnerDeletion: true };
}
