import { readFileSync } from "node:fs";
import { X509Certificate } from "node:crypto";
import { createSecureContext } from "node:tls";
import { ConfigError } from "../capabilities/config";
import { TokenKeys } from "./token-keys";

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
  /**
   * The namespace of the tenant default templates: a create naming a template its tenant lacks
   * takes the one of that name there (the module copies it into the tenant's namespace).
   */
  defaultTemplatesNamespace: string;
  /**
   * The keys sandboxes' access tokens, their daemons' credentials and their sealed envVars are
   * made with: the same for every replica.
   */
  tokenKeys: TokenKeys;
  /** Where /metrics and /healthz are served (plain HTTP, on the same address). */
  metricsPort: number;
  /** The largest request body the control API reads. */
  maxBodyBytes: number;
  /**
   * Each tenant's (API key namespace's) control API calls: a token bucket refilled at
   * `perSecond` and holding at most `burst`; undefined when not limited.
   */
  rateLimit?: { perSecond: number; burst: number };
  /** Connections each listening port holds at once; past it, a new one is closed at once. */
  maxConnections: number;
  /** Requests and WebSockets proxied to one sandbox at once; past it, 429. */
  maxSandboxConnections: number;
  /** How long a request's headers may take to arrive, on every route. */
  headersTimeoutMs: number;
  /** How long a control API call's body may take to arrive (never a proxied request's). */
  bodyTimeoutMs: number;
  /**
   * HTTPS on its own port, when a certificate is given: the SDKs reach each sandbox at
   * `https://<port>-<id>.<domain>` unless pointed at one URL, and only that form lets a signed
   * URL, which carries no header, name its sandbox.
   */
  tls?: { port: number; cert: string; key: string };
  /**
   * The cluster runs the node egress agent (the module's `CUBEPOD_EGRESS_AGENT_ADDRESSES` is
   * set): E2B's `allowOut` and `denyOut` are kept on the box for it, and `PUT /network` changes
   * them. Without it only no internet access can be had.
   */
  egressAgent: boolean;
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
    "CUBEPOD_GATEWAY_DEFAULT_TEMPLATES_NAMESPACE",
    "cubepod-defaults",
    "the namespace of the tenant default templates (the module's `CUBEPOD_DEFAULT_TEMPLATES_NAMESPACE`)",
  ],
  [
    "CUBEPOD_GATEWAY_TLS_CERT_FILE",
    "(none)",
    "PEM certificate (chain) naming `*.<domain>`; with the key, HTTPS is served too",
  ],
  ["CUBEPOD_GATEWAY_TLS_KEY_FILE", "(none)", "PEM private key of that certificate"],
  ["CUBEPOD_GATEWAY_TLS_PORT", "8443", "port of HTTPS"],
  [
    "CUBEPOD_GATEWAY_EGRESS_AGENT",
    "disabled",
    "`enabled` where the cluster runs the node egress agent (the module's `CUBEPOD_EGRESS_AGENT_ADDRESSES` set): E2B's `allowOut` and `denyOut` are then served",
  ],
  [
    "CUBEPOD_GATEWAY_RATE_PER_SECOND",
    "50",
    "control API calls a tenant may make per second, on average; 0: no limit",
  ],
  ["CUBEPOD_GATEWAY_RATE_BURST", "500", "control API calls a tenant may make at once"],
  ["CUBEPOD_GATEWAY_MAX_CONNECTIONS", "10000", "connections each listening port holds at once"],
  [
    "CUBEPOD_GATEWAY_MAX_SANDBOX_CONNECTIONS",
    "2000",
    "requests and WebSockets proxied to one sandbox at once",
  ],
  ["CUBEPOD_GATEWAY_HEADERS_TIMEOUT_SECONDS", "30", "time for a request's headers to arrive"],
  [
    "CUBEPOD_GATEWAY_BODY_TIMEOUT_SECONDS",
    "30",
    "time for a control API call's body to arrive (never a proxied request's)",
  ],
  [
    "CUBEPOD_GATEWAY_TOKEN_KEY",
    "(required)",
    "secret key access tokens are derived from, >= 32 characters (in a cluster: the Secret the module makes)",
  ],
  [
    "CUBEPOD_GATEWAY_PREVIOUS_TOKEN_KEY",
    "(none)",
    "the key a rotation replaced, kept while sandboxes started under it run",
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
  const defaultTemplates = get("CUBEPOD_GATEWAY_DEFAULT_TEMPLATES_NAMESPACE", "cubepod-defaults");
  if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(defaultTemplates)) {
    problems.push(
      `CUBEPOD_GATEWAY_DEFAULT_TEMPLATES_NAMESPACE: expected a namespace name, got ${JSON.stringify(defaultTemplates)}`,
    );
  }
  const tokenKey = env.CUBEPOD_GATEWAY_TOKEN_KEY?.trim() ?? "";
  if (tokenKey.length < 32) {
    problems.push("CUBEPOD_GATEWAY_TOKEN_KEY: expected a secret of at least 32 characters");
  }
  const previousKey = env.CUBEPOD_GATEWAY_PREVIOUS_TOKEN_KEY?.trim() || undefined;
  if (previousKey !== undefined && previousKey.length < 32) {
    problems.push(
      "CUBEPOD_GATEWAY_PREVIOUS_TOKEN_KEY: expected a secret of at least 32 characters",
    );
  }
  const perSecond = int("CUBEPOD_GATEWAY_RATE_PER_SECOND", 50, 0, 1_000_000);
  const burst = int("CUBEPOD_GATEWAY_RATE_BURST", 500, 1, 1_000_000);
  const tls = tlsOf(env, domain, int("CUBEPOD_GATEWAY_TLS_PORT", 8443, 1, 65535), problems);
  const egressAgent = get("CUBEPOD_GATEWAY_EGRESS_AGENT", "disabled");
  if (egressAgent !== "enabled" && egressAgent !== "disabled") {
    problems.push(
      `CUBEPOD_GATEWAY_EGRESS_AGENT: expected "enabled" or "disabled", got ${JSON.stringify(egressAgent)}`,
    );
  }
  const config = {
    host: get("CUBEPOD_GATEWAY_HOST", "127.0.0.1"),
    port: int("CUBEPOD_GATEWAY_PORT", 8080, 1, 65535),
    domain,
    metricsPort: int("CUBEPOD_GATEWAY_METRICS_PORT", 8082, 1, 65535),
    startTimeoutMs: int("CUBEPOD_GATEWAY_START_TIMEOUT_SECONDS", 30, 1, 3600) * 1000,
    defaultTemplatesNamespace: defaultTemplates,
    tokenKeys: new TokenKeys(tokenKey, previousKey),
    maxBodyBytes: 1024 * 1024,
    ...(perSecond > 0 ? { rateLimit: { perSecond, burst } } : {}),
    maxConnections: int("CUBEPOD_GATEWAY_MAX_CONNECTIONS", 10_000, 1, 1_000_000),
    maxSandboxConnections: int("CUBEPOD_GATEWAY_MAX_SANDBOX_CONNECTIONS", 2000, 1, 1_000_000),
    headersTimeoutMs: int("CUBEPOD_GATEWAY_HEADERS_TIMEOUT_SECONDS", 30, 1, 3600) * 1000,
    bodyTimeoutMs: int("CUBEPOD_GATEWAY_BODY_TIMEOUT_SECONDS", 30, 1, 3600) * 1000,
    ...(tls ? { tls } : {}),
    egressAgent: egressAgent === "enabled",
  };
  if (problems.length > 0) throw new ConfigError(problems);
  return config;
}

/**
 * The certificate and key, when both are given: readable, a pair, and valid for every sandbox's
 * host (`<port>-<id>.<domain>`), else a problem naming why.
 */
function tlsOf(
  env: Env,
  domain: string,
  port: number,
  problems: string[],
): GatewayConfig["tls"] | undefined {
  const certFile = env.CUBEPOD_GATEWAY_TLS_CERT_FILE?.trim() || undefined;
  const keyFile = env.CUBEPOD_GATEWAY_TLS_KEY_FILE?.trim() || undefined;
  if (!certFile && !keyFile) return undefined;
  if (!certFile || !keyFile) {
    problems.push(
      "CUBEPOD_GATEWAY_TLS_CERT_FILE and CUBEPOD_GATEWAY_TLS_KEY_FILE go together: one is missing",
    );
    return undefined;
  }
  const read = (variable: string, file: string) => {
    try {
      return readFileSync(file, "utf8");
    } catch (e) {
      problems.push(`${variable}: cannot read ${file}: ${(e as Error).message}`);
      return undefined;
    }
  };
  const cert = read("CUBEPOD_GATEWAY_TLS_CERT_FILE", certFile);
  const key = read("CUBEPOD_GATEWAY_TLS_KEY_FILE", keyFile);
  if (cert === undefined || key === undefined) return undefined;
  try {
    createSecureContext({ cert, key });
  } catch (e) {
    problems.push(`CUBEPOD_GATEWAY_TLS_*: ${certFile} and ${keyFile} are no PEM pair: ${e}`);
    return undefined;
  }
  const host = `49983-sandboxid.${domain}`;
  if (!new X509Certificate(cert).checkHost(host)) {
    problems.push(
      `CUBEPOD_GATEWAY_TLS_CERT_FILE: ${certFile} does not name sandboxes' hosts such as ${host} ` +
        `(expected a subjectAltName DNS:*.${domain})`,
    );
    return undefined;
  }
  return { port, cert, key };
}
