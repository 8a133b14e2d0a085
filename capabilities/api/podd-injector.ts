import cfg from "../../package.json";

/**
 * The podd injector image of a template that names none: the module's CUBEPOD_PODD_INJECTOR_IMAGE,
 * which the chart sets from `images.registry` and `images.tag` (build/injector-image.ts). The CRD
 * gives the field no default, so that the image is the install's, not written into stored
 * templates; this default is what the chart's values name unless changed.
 */
export const DEFAULT_PODD_INJECTOR_IMAGE = `ghcr.io/cubeplex/podd-injector:${cfg.version}`;

let configured = DEFAULT_PODD_INJECTOR_IMAGE;

/** Set once at the module's start, from its configuration. */
export function usePoddInjectorImage(image: string): void {
  configured = image;
}

export const poddInjectorImage = (): string => configured;
