import { ConfigError } from "../capabilities/config";

/**
 * The gateway's settings, read from the environment once at start and validated: a bad value
 * stops the process with a message naming every bad variable.
 */
export type GatewayConfig = {
  host: string;
  port: number;
  /** The `domain` sandboxes are reported under; Host `<port>-<id>.<domain>` routes to them. */
  domain: string;
  /** How long a create or connect waits for the box to run and its daemon to answer. */
  startTimeoutMs: number;
  /** The key access tokens are derived from (HMAC): the same for every replica. */
  tokenKey: string;
  /** Where /metrics and /healthz are served (plain HTTP, on the same address). */
  metricsPort: number;
  /** The largest request body the control API reads. */
  maxBodyBytes: number;
};

type Env = Record<string, string | undefined>;

/** The settings, as docs/gateway.md lists them. */
export const GATEWAY_SETTINGS = [
  ["CUBEPOD_GATEWAY_HOST", "127.0.0.1", "address to listen on (0.0.0.0 in a cluster)"],
  ["CUBEPOD_GATEWAY_PORT", "8080", "port to listen on"],
  ["CUBEPOD_GATEWAY_DOMAIN", "cubepod.localhost", "the domain sandboxes are reported under"],
  ["CUBEPOD_GATEWAY_METRICS_PORT", "8082", "port of /metrics and /healthz"],
  ["CUBEPOD_GATEWAY_START_TIMEOUT_SECONDS", "30", "wait for a box to run and its daemon to answer"],
  [
    "CUBEPOD_GATEWAY_TOKEN_KEY",
    "(required)",
    "secret key access tokens are derived from, >= 32 characters",
  ],
] as const;

/** Reads and validates the gateway's configuration; throws a {@link ConfigError}. */
export function loadGatewayConfig(env: Env = process.env): GatewayConfig {
  const problems: string[] = [];
  const get = (v: string, def: string) => {
    const raw = env[v]?.trim();
    return raw === undefined || raw === "" ? def : raw;
  };
  const int = (v: string, def: number, min: number, max: number) => {
    const raw = get(v, String(def));
    const n = /^\d+$/.test(raw) ? Number(raw) : NaN;
    if (!(n >= min && n <= max)) {
      problems.push(`${v}: expected an integer from ${min} to ${max}, got ${JSON.stringify(raw)}`);
      return def;
    }
    return n;
  };
  const domain = get("CUBEPOD_GATEWAY_DOMAIN", "cubepod.localhost");
  if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/.test(domain)) {
    problems.push(`CUBEPOD_GATEWAY_DOMAIN: expected a DNS name, got ${JSON.stringify(domain)}`);
  }
  const tokenKey = env.CUBEPOD_GATEWAY_TOKEN_KEY?.trim() ?? "";
  if (tokenKey.length < 32) {
    problems.push("CUBEPOD_GATEWAY_TOKEN_KEY: expected a secret of at least 32 characters");
  }
  const config = {
    host: get("CUBEPOD_GATEWAY_HOST", "127.0.0.1"),
    port: int("CUBEPOD_GATEWAY_PORT", 8080, 1, 65535),
    domain,
    metricsPort: int("CUBEPOD_GATEWAY_METRICS_PORT", 8082, 1, 65535),
    startTimeoutMs: int("CUBEPOD_GATEWAY_START_TIMEOUT_SECONDS", 30, 1, 3600) * 1000,
    tokenKey,
    maxBodyBytes: 1024 * 1024,
  };
  if (problems.length > 0) throw new ConfigError(problems);
  return config;
}
