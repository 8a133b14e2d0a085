import { KindDescriptor } from "./descriptor";
import { podAPIKeyDescriptor } from "./podapikey";
import { podBoxDescriptor } from "./podbox";
import { podTemplateDescriptor } from "./podtemplate";
import { podWarmPoolDescriptor } from "./podwarmpool";

export * from "./common";
export * from "./podapikey";
export * from "./podbox";
export * from "./podtemplate";
export * from "./podwarmpool";
export type { KindDescriptor, PrinterColumn } from "./descriptor";

/** The CubePod kinds, in the order their CRDs are written. */
export const DESCRIPTORS: KindDescriptor[] = [
  podTemplateDescriptor,
  podWarmPoolDescriptor,
  podBoxDescriptor,
  podAPIKeyDescriptor,
];
