import { readFileSync } from "node:fs";
import { join } from "node:path";
import { accessToken } from "../gateway/e2b";
import { CONTROL_HEADER, PoddControl } from "../gateway/podd-control";
import type { PodBox } from "../capabilities/api/kinds";
import { CLUSTER_DIR, Obj } from "./kube";

/** The local gateway's token key (local-cluster/env.sh), which the local module's key follows. */
export const localTokenKey = () =>
  readFileSync(join(CLUSTER_DIR, "gateway-token-key"), "utf8").trim();

/** One message of a Connect streaming request, as JSON: a flag byte, its length, the message. */
export function connectFrame(message: unknown): Buffer {
  const json = Buffer.from(JSON.stringify(message));
  const head = Buffer.alloc(5);
  head.writeUInt32BE(json.length, 1);
  return Buffer.concat([head, json]);
}

/**
 * A running box's daemon, called as the gateway calls it (directly on the Pod IP, with the
 * gateway's credential for the box and its Pod, and the box's access token), after the `/init`
 * that binds the daemon to the box. For the tests and benchmarks that read and write a
 * sandbox's data without going through the gateway.
 */
export class PoddClient {
  private constructor(
    readonly url: string,
    readonly headers: Record<string, string>,
  ) {}

  /** Initialises the daemon of a running box (its status names the Pod IP and UID). */
  static async open(box: Obj, tokenKey = localTokenKey()): Promise<PoddClient> {
    const credential = new PoddControl(tokenKey).credential(box as PodBox);
    if (!credential || !box.status?.podIP) {
      throw new Error(
        `box ${box.metadata?.name} names no running Pod: ${JSON.stringify(box.status)}`,
      );
    }
    const token = accessToken(tokenKey, box as PodBox);
    const client = new PoddClient(`http://${box.status.podIP}:49983`, {
      [CONTROL_HEADER]: credential,
      "X-Access-Token": token,
    });
    const r = await client.fetch("/init", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ envVars: {}, accessToken: token }),
    });
    if (r.status !== 204) throw new Error(`/init: ${r.status} ${await r.text()}`);
    return client;
  }

  /** Fetches from the daemon; a failure names the request and undici's cause (reset, refused). */
  async fetch(path: string, init: RequestInit = {}): Promise<Response> {
    try {
      return await fetch(`${this.url}${path}`, {
        ...init,
        headers: { ...this.headers, ...(init.headers as Record<string, string>) },
      });
    } catch (e) {
      const cause = (e as { cause?: { code?: string; message?: string } }).cause;
      const why = cause ? `${cause.code ?? ""} ${cause.message ?? ""}`.trim() : "";
      throw new Error(`${init.method ?? "GET"} ${this.url}${path}: ${String(e)} (${why})`, {
        cause: e,
      });
    }
  }

  async write(path: string, text: string): Promise<void> {
    const form = new FormData();
    form.append("file", new Blob([text]), path);
    const r = await this.fetch(`/files?path=${encodeURIComponent(path)}`, {
      method: "POST",
      body: form,
    });
    if (r.status !== 200) throw new Error(`write ${path}: ${r.status} ${await r.text()}`);
  }

  /** The file's text, or undefined when the daemon says there is none. */
  async read(path: string): Promise<string | undefined> {
    const r = await this.fetch(`/files?path=${encodeURIComponent(path)}`);
    if (r.status === 404) return undefined;
    if (r.status !== 200) throw new Error(`read ${path}: ${r.status} ${await r.text()}`);
    return r.text();
  }

  /** Runs a shell command (Connect, JSON), as `user` when named; its stdout, stderr and exit code. */
  async run(
    command: string,
    user?: string,
  ): Promise<{ stdout: string; stderr: string; exit?: number }> {
    const request = connectFrame({ process: { cmd: "/bin/sh", args: ["-c", command] } });
    const r = await this.fetch("/process.Process/Start", {
      method: "POST",
      headers: {
        "Content-Type": "application/connect+json",
        ...(user ? { Authorization: `Basic ${Buffer.from(`${user}:`).toString("base64")}` } : {}),
      },
      body: request,
    });
    const body = Buffer.from(await r.arrayBuffer());
    const out = { stdout: "", stderr: "", exit: undefined as number | undefined };
    for (let i = 0; i + 5 <= body.length; i += 5 + body.readUInt32BE(i + 1)) {
      const msg = JSON.parse(body.subarray(i + 5, i + 5 + body.readUInt32BE(i + 1)).toString());
      const data = msg.event?.data;
      if (data?.stdout) out.stdout += Buffer.from(data.stdout, "base64").toString();
      if (data?.stderr) out.stderr += Buffer.from(data.stderr, "base64").toString();
      // protojson leaves out a zero exit code, as envd does.
      if (msg.event?.end) out.exit = msg.event.end.exitCode ?? 0;
      if (msg.error) throw new Error(`${command}: ${msg.error.code}: ${msg.error.message}`);
    }
    return out;
  }

  /** Runs a shell command as `user`, or the default user; its stdout, or an error when it fails. */
  async sh(command: string, user?: string): Promise<string> {
    const r = await this.run(command, user);
    if (r.exit !== 0) throw new Error(`${command}: exit ${r.exit}: ${r.stdout}${r.stderr}`);
    return r.stdout;
  }
}
