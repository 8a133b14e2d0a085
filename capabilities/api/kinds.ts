import { a, RegisterKind } from "pepr";
import { GROUP, VERSION } from "./common";
import type { PodBoxSpec, PodBoxStatus } from "./podbox";
import type { PodTemplateSpec, PodTemplateStatus } from "./podtemplate";
import type { PodWarmPoolSpec, PodWarmPoolStatus } from "./podwarmpool";

/**
 * The fluent-client classes of the three kinds. The class of PodTemplate is not called
 * `PodTemplate`: the client keys registrations by class name and core/v1 PodTemplate has it.
 */
export class CubePodTemplate extends a.GenericKind {
  declare spec?: PodTemplateSpec;
  declare status?: PodTemplateStatus;
}

export class PodWarmPool extends a.GenericKind {
  declare spec?: PodWarmPoolSpec;
  declare status?: PodWarmPoolStatus;
}

export class PodBox extends a.GenericKind {
  declare spec?: PodBoxSpec;
  declare status?: PodBoxStatus;
}

RegisterKind(CubePodTemplate, {
  group: GROUP,
  version: VERSION,
  kind: "PodTemplate",
  plural: "podtemplates",
});
RegisterKind(PodWarmPool, {
  group: GROUP,
  version: VERSION,
  kind: "PodWarmPool",
  plural: "podwarmpools",
});
RegisterKind(PodBox, { group: GROUP, version: VERSION, kind: "PodBox", plural: "podboxes" });
