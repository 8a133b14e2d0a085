import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";

/**
 * E2B's standard setup on this machine: the SDKs given only E2B_DOMAIN (and E2B_API_KEY) call
 * `https://api.<domain>` and `https://<port>-<id>.<domain>` on port 443, as they would a
 * deployment's gateway behind its wildcard DNS name. The names are served by a resolver the
 * tests start (Debian's dnsmasq), which the SDKs' processes use through their own
 * /etc/resolv.conf (a private mount namespace: the machine's is untouched), and point at a
 * loopback address of the gateway's own, so that it may listen on 443; its certificate comes
 * from a CA the tests make, which the SDKs' processes trust.
 */
/** Not under `.localhost`, which some clients resolve to 127.0.0.1 themselves (the Python SDK's). */
export const STANDARD_DOMAIN = "cubepod.test";
export const STANDARD_GATEWAY_IP = "127.0.0.44";
const RESOLVER_IP = "127.0.0.45";

/** Starts the resolver and writes, into `dir`, its resolv.conf and the CA and gateway certificate. */
export function startStandardSetup(dir: string): ChildProcess {
  execFileSync("bash", ["-c", "command -v dnsmasq || apt-get install -y -q dnsmasq-base"], {
    stdio: "ignore",
  });
  writeFileSync(join(dir, "resolv.conf"), `nameserver ${RESOLVER_IP}\n`);
  makeCertificates(dir);
  return spawn(
    "dnsmasq",
    [
      "--keep-in-foreground",
      "--no-resolv",
      "--no-hosts",
      "--bind-interfaces",
      `--listen-address=${RESOLVER_IP}`,
      `--address=/${STANDARD_DOMAIN}/${STANDARD_GATEWAY_IP}`,
      `--pid-file=${join(dir, "dnsmasq.pid")}`,
      "--user=root",
    ],
    { stdio: ["ignore", "ignore", "inherit"] },
  );
}

/** The gateway's settings for the setup: its address, 80 and 443, the domain and certificate. */
export function standardGatewaySettings(dir: string, metricsPort: number): Record<string, string> {
  return {
    CUBEPOD_GATEWAY_HOST: STANDARD_GATEWAY_IP,
    CUBEPOD_GATEWAY_PORT: "80",
    CUBEPOD_GATEWAY_METRICS_PORT: String(metricsPort),
    CUBEPOD_GATEWAY_DOMAIN: STANDARD_DOMAIN,
    CUBEPOD_GATEWAY_TLS_PORT: "443",
    CUBEPOD_GATEWAY_TLS_CERT_FILE: join(dir, "gateway.crt"),
    CUBEPOD_GATEWAY_TLS_KEY_FILE: join(dir, "gateway.key"),
  };
}

/**
 * A command as the SDKs' processes run it in the setup: in a private mount namespace whose
 * /etc/resolv.conf names the resolver. Returns what to spawn, and its arguments.
 */
export function underResolver(dir: string, command: string[]): [string, string[]] {
  const script = `mount --bind ${join(dir, "resolv.conf")} /etc/resolv.conf && exec "$@"`;
  return ["unshare", ["-m", "--propagation", "private", "sh", "-c", script, "sh", ...command]];
}

/** A CA of the setup's, and the gateway's certificate from it for <domain> and *.<domain>. */
function makeCertificates(at: string): void {
  const openssl = (...args: string[]) =>
    execFileSync("openssl", args, { cwd: at, stdio: "ignore" });
  openssl(
    ...["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2"],
    ...["-subj", "/CN=e2b-standard-ca", "-keyout", "ca.key", "-out", "ca.crt"],
  );
  openssl(
    ...["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=cubepod-gateway"],
    ...["-keyout", "gateway.key", "-out", "gateway.csr"],
  );
  writeFileSync(
    join(at, "gateway.ext"),
    `subjectAltName=DNS:${STANDARD_DOMAIN},DNS:*.${STANDARD_DOMAIN}\nextendedKeyUsage=serverAuth\n`,
  );
  openssl(
    ...["x509", "-req", "-in", "gateway.csr", "-CA", "ca.crt", "-CAkey", "ca.key"],
    ...["-CAcreateserial", "-days", "2", "-extfile", "gateway.ext", "-out", "gateway.crt"],
  );
}
