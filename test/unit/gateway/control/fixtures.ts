import type { ApiClient } from "../../../../capabilities/client/api-client";
import type { CubePodTemplate, PodBox, PodWarmPool } from "../../../../capabilities/api/kinds";
import { loadGatewayConfig } from "../../../../gateway/config";
import { ControlContext } from "../../../../gateway/control/context";
import { NamespacedCache, SandboxIndex } from "../../../../gateway/sandboxes";

/** A control API context whose watch has shown these boxes, with no API server behind it. */
export function controlContext(...boxes: PodBox[]): ControlContext {
  return controlContextWith({}, {} as ApiClient, ...boxes);
}

/** The same, with more settings and a client standing in for the API server's answers. */
export function controlContextWith(
  env: Record<string, string>,
  client: ApiClient,
  ...boxes: PodBox[]
): ControlContext {
  const index = new SandboxIndex();
  boxes.forEach(b => index.observe(b, false));
  return new ControlContext(
    client,
    index,
    new NamespacedCache<CubePodTemplate>(),
    new NamespacedCache<PodWarmPool>(),
    loadGatewayConfig({ CUBEPOD_GATEWAY_TOKEN_KEY: "k".repeat(32), ...env }),
  );
}

/** A PodBox as the gateway's index holds it, created at a fixed time. */
export const box = (name: string, extra: Partial<PodBox> = {}, ns = "a"): PodBox =>
  ({
    metadata: {
      name,
      namespace: ns,
      uid: `uid-${name}`,
      creationTimestamp: "2026-12-01T10:00:00Z",
    },
    spec: {},
    ...extra,
  }) as PodBox;
