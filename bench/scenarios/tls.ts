import { readFileSync } from "node:fs";
import { Agent as HttpAgent, request as httpRequest, type RequestOptions } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import { join } from "node:path";
import { CLUSTER_DIR, Kube, paths, ROOT } from "../../testkit/kube";
import { localTokenKey } from "../../testkit/podd-client";
import { realTenant } from "../../testkit/tenant";
import { CONTROL_HEADER, PoddControl } from "../../gateway/podd-control";
import type { PodBox } from "../../capabilities/api/kinds";
import { killGroup, ownProcess } from "../lib/own-process";
import { results } from "../lib/results";
import { writeMiB } from "../lib/upload";
import { GATEWAY } from "../lib/sdk";
import { hundredths, now, ratios, sleep, type Stats, stats } from "../lib/stats";

/** The local gateway's HTTPS port (local-cluster/gateway.sh): the cluster CA's certificate. */
const GATEWAY_TLS_PORT = Number(process.env.CUBEPOD_GATEWAY_TLS_PORT ?? 8443);
const GATEWAY_PORT = Number(new URL(GATEWAY).port);
const DOMAIN = "cubepod.localhost";
const ENVD_PORT = 49983;
/** Calls each way on kept connections, and on a new connection each (a full handshake). */
const KEPT_CALLS = 1000;
const NEW_CONNECTION_CALLS = 300;
const UPLOAD_MIB = 256;
const UPLOADS = 3;
/**
 * Control API calls pair by pair no faster than this, under a tenant's rate limit (docs/gateway.md,
 * Limits): a 429 is no measure of TLS.
 */
const CONTROL_PAIR_MS = 50;
const FLOOR_HTTP_PORT = 18187;
const FLOOR_HTTPS_PORT = 18188;

/** Where a request goes: plain or TLS, its address, and the name it is for (Host and SNI). */
type Way = { tls: boolean; port: number; host?: string; headers?: Record<string, string> };

const PKI = join(CLUSTER_DIR, "pki");
const ca = () => readFileSync(join(PKI, "ca.crt"));

/**
 * What HTTPS costs at the gateway, E2B's standard setup: the same calls to the local gateway's
 * plain port and to its HTTPS port, in turn, so that both meet the same machine: a control API
 * call (`GET /sandboxes/{id}`) and a GET proxied to a real sandbox's daemon (runc, the real
 * node), each on kept connections and on a new connection per call (its TCP and TLS handshakes,
 * no session resumed: an SDK process's first call); a 256 MiB upload through the proxy to the
 * daemon, and straight to the Pod. Against the floor: Node's own HTTP and HTTPS servers with the
 * same certificate answering a small JSON (floor-tls.ts), what TLS adds to any Node server here.
 */
export async function benchTls(kube: Kube) {
  const { ns, key } = await realTenant(kube, {
    prefix: "bench-tls",
    template: "real",
    replicas: 1,
  });
  const box = await createSandbox(key);
  const running = await kube.waitFor(paths.podboxes(ns, box.id), o => !!o?.status?.podIP, 60_000);
  const podIP = running!.status.podIP;
  // Straight to the Pod, a request carries what the gateway adds: its credential for the box.
  const control = {
    [CONTROL_HEADER]: new PoddControl(localTokenKey()).credential(running as PodBox)!,
  };
  const sandboxHost = `${ENVD_PORT}-${box.id}.${DOMAIN}`;
  const api = (tls: boolean): Way => ({
    tls,
    port: tls ? GATEWAY_TLS_PORT : GATEWAY_PORT,
    headers: { "X-API-Key": key },
  });
  const proxied = (tls: boolean): Way => ({
    tls,
    port: tls ? GATEWAY_TLS_PORT : GATEWAY_PORT,
    host: sandboxHost,
  });
  const floorWay = (tls: boolean): Way => ({ tls, port: tls ? FLOOR_HTTPS_PORT : FLOOR_HTTP_PORT });

  const floor = await ownProcess(
    [
      join(ROOT, "bench", "scenarios", "floor-tls.ts"),
      String(FLOOR_HTTP_PORT),
      String(FLOOR_HTTPS_PORT),
      join(PKI, "gateway.crt"),
      join(PKI, "gateway.key"),
    ],
    "ready",
  );
  try {
    const controlPath = `/sandboxes/${box.id}`;
    const upload = `/files?path=${encodeURIComponent("/tmp/tls-bench")}&username=user`;
    const uploadHeaders = {
      "X-Access-Token": box.token,
      "Content-Type": "application/octet-stream",
    };
    results.tls = {
      what: `the same calls to the local gateway over HTTP and over HTTPS (its port ${GATEWAY_TLS_PORT}, the cluster CA's RSA certificate), in turn: a control API call (GET /sandboxes/{id}) and a GET proxied to a real sandbox's daemon (runc), ${KEPT_CALLS} on kept connections and ${NEW_CONNECTION_CALLS} on a new connection each (full handshakes) (ms); the least Node HTTP and HTTPS servers with the same certificate (floor-tls.ts) the same way; the HTTPS figures over the HTTP ones; a ${UPLOAD_MIB} MiB upload to the daemon through the gateway each way and straight to the Pod, and to the floor's servers (MiB/s, best of ${UPLOADS})`,
      control: {
        kept: await inTurn(api, "GET", controlPath, KEPT_CALLS, true, CONTROL_PAIR_MS),
        newConnection: await inTurn(
          api,
          "GET",
          controlPath,
          NEW_CONNECTION_CALLS,
          false,
          CONTROL_PAIR_MS,
        ),
      },
      proxied: {
        kept: await inTurn(proxied, "GET", "/health", KEPT_CALLS, true),
        newConnection: await inTurn(proxied, "GET", "/health", NEW_CONNECTION_CALLS, false),
      },
      floor: {
        kept: await inTurn(floorWay, "GET", "/", KEPT_CALLS, true),
        newConnection: await inTurn(floorWay, "GET", "/", NEW_CONNECTION_CALLS, false),
      },
      uploadMiBPerS: {
        gatewayHttp: await uploadMiBps({ ...proxied(false), headers: uploadHeaders }, upload),
        gatewayHttps: await uploadMiBps({ ...proxied(true), headers: uploadHeaders }, upload),
        direct: await uploadMiBps(
          { tls: false, port: ENVD_PORT, headers: { ...uploadHeaders, ...control } },
          upload,
          podIP,
        ),
        floorHttp: await uploadMiBps(floorWay(false), "/"),
        floorHttps: await uploadMiBps(floorWay(true), "/"),
      },
    };
  } finally {
    killGroup(floor);
    await kube.delete(`/api/v1/namespaces/${ns}`);
  }
}

/**
 * `calls` of the same request over HTTP and HTTPS in turn (each way first in every other pair),
 * a pair starting at most every `pairMs`: each way's latency, and HTTPS over HTTP.
 */
async function inTurn(
  way: (tls: boolean) => Way,
  method: string,
  path: string,
  calls: number,
  kept: boolean,
  pairMs = 0,
): Promise<{ http: Stats; https: Stats; httpsOverHttp: ReturnType<typeof ratios> }> {
  const plain: number[] = [];
  const secure: number[] = [];
  const agents = {
    http: new HttpAgent({ keepAlive: true }),
    https: new HttpsAgent({ keepAlive: true, ca: ca() }),
  };
  try {
    for (let i = 0; i < calls; i++) {
      const next = now() + pairMs;
      for (const tls of i % 2 === 0 ? [false, true] : [true, false]) {
        const agent = kept ? (tls ? agents.https : agents.http) : false;
        (tls ? secure : plain).push(await timed(way(tls), method, path, agent));
      }
      if (now() < next) await sleep(next - now());
    }
  } finally {
    agents.http.destroy();
    agents.https.destroy();
  }
  const http = stats(plain);
  const https = stats(secure);
  return { http, https, httpsOverHttp: ratios(https, http) };
}

/** The options of one request the way `way` sends it. */
function options(way: Way, method: string, path: string, address = "127.0.0.1"): RequestOptions {
  return {
    host: address,
    port: way.port,
    method,
    path,
    headers: { ...(way.host ? { Host: way.host } : {}), ...way.headers },
    ...(way.tls ? { ca: ca(), servername: way.host ?? "", rejectUnauthorized: true } : {}),
  };
}

/** One request, timed from its start to the end of its answer, which must be a success. */
function timed(
  way: Way,
  method: string,
  path: string,
  agent: HttpAgent | HttpsAgent | false,
): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = now();
    const send = way.tls ? httpsRequest : httpRequest;
    const req = send({ ...options(way, method, path), agent }, res => {
      res.resume();
      res.on("end", () =>
        (res.statusCode ?? 0) < 300
          ? resolve(now() - t0)
          : reject(new Error(`${method} ${path}: ${res.statusCode}`)),
      );
    });
    req.on("error", reject);
    req.end();
  });
}

/** The best of {@link UPLOADS} uploads of {@link UPLOAD_MIB} MiB, MiB/s to the answer's end. */
async function uploadMiBps(way: Way, path: string, address?: string): Promise<number> {
  let best = 0;
  for (let i = 0; i < UPLOADS; i++) {
    const ms = await new Promise<number>((resolve, reject) => {
      const t0 = now();
      const send = way.tls ? httpsRequest : httpRequest;
      const req = send({ ...options(way, "POST", path, address), agent: false }, res => {
        let answer = "";
        res.on("data", (c: Buffer) => (answer += c.toString()));
        res.on("end", () =>
          (res.statusCode ?? 0) < 300
            ? resolve(now() - t0)
            : reject(new Error(`upload ${path}: ${res.statusCode} ${answer}`)),
        );
      });
      req.on("error", reject);
      writeMiB(req, UPLOAD_MIB);
    });
    best = Math.max(best, hundredths(UPLOAD_MIB / (ms / 1000)));
  }
  return best;
}

/** A sandbox of the tenant's `real` template through the control API: its ID and access token. */
async function createSandbox(key: string): Promise<{ id: string; token: string }> {
  const end = Date.now() + 120_000;
  for (;;) {
    const r = await fetch(`${GATEWAY}/sandboxes`, {
      method: "POST",
      headers: { "X-API-Key": key, "Content-Type": "application/json" },
      body: JSON.stringify({ templateID: "real", timeout: 600 }),
    });
    const body = (await r.json()) as { sandboxID?: string; envdAccessToken?: string };
    if (r.status === 201) return { id: body.sandboxID!, token: body.envdAccessToken! };
    if (Date.now() > end) throw new Error(`tls: no sandbox: ${r.status} ${JSON.stringify(body)}`);
    await sleep(1000);
  }
}
