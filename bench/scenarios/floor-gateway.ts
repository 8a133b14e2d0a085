/**
 * The least gateway, for the `gateway` benchmark: every POST makes a PodBox that claims from the
 * given pool, waits on one watch for the box's daemon URL, sends the daemon's `/init` once and
 * answers as the gateway does. No API key, template, timeout, retry or cleanup: the steps E2B's
 * create needs (the daemon's control credential included) and nothing else, with the benchmark's own client of the API server. The E2B SDK's create
 * against it, against the same pool and daemons, is the least a gateway can add to a claim on
 * this machine. Run in a process of its own, as the gateway is.
 * Usage: tsx bench/scenarios/floor-gateway.ts <listen port> <namespace> <pool>; prints "ready".
 */
import { createServer, request, type ServerResponse } from "node:http";
import type { PodBox } from "../../capabilities/api/kinds";
import { Kube, Obj, paths } from "../../testkit/kube";
import { podBox } from "../../testkit/objects";
import { newSandboxId, sandbox } from "../../gateway/e2b";
import { CONTROL_HEADER, PoddControl } from "../../gateway/podd-control";

const [listen, ns, pool] = process.argv.slice(2);
const TOKEN = "0".repeat(64);
const control = new PoddControl(TOKEN);
const kube = new Kube();
const running = new Map<string, Obj>();
const waiting = new Map<string, (box: Obj) => void>();
const see = (type: string, box: Obj) => {
  const name = box.metadata.name as string;
  if (type === "DELETED" || !box.status?.poddURL || running.has(name)) return;
  running.set(name, box);
  waiting.get(name)?.(box);
  waiting.delete(name);
};
const runs = (name: string) =>
  new Promise<Obj>(resolve =>
    running.has(name) ? resolve(running.get(name)!) : waiting.set(name, resolve),
  );

function init(url: string, credential: string): Promise<void> {
  return new Promise((resolve, reject) => {
    // A connection of its own: a kept one could be the daemon's closing one of an IP used again.
    const req = request(`${url}/init`, { method: "POST", agent: false }, res => {
      res.resume();
      res.on("end", resolve);
    });
    req.on("error", reject);
    req.setHeader("Content-Type", "application/json");
    req.setHeader(CONTROL_HEADER, credential);
    req.end(
      JSON.stringify({ envVars: {}, accessToken: TOKEN, timestamp: new Date().toISOString() }),
    );
  });
}

async function create(): Promise<string> {
  const name = newSandboxId();
  await kube.mustCreate(paths.podboxes(ns), podBox(name, { warmPoolRef: pool }));
  const box = await runs(name);
  await init(box.status.poddURL, control.credential(box as PodBox)!);
  return JSON.stringify(
    sandbox(box as PodBox, { access: TOKEN, traffic: null }, "cubepod.localhost"),
  );
}

function answer(res: ServerResponse, status: number, body: string) {
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": body.length });
  res.end(body);
}

const server = createServer((req, res) => {
  req.resume();
  req.on(
    "end",
    () =>
      void create().then(
        body => answer(res, 201, body),
        (e: Error) => answer(res, 500, JSON.stringify({ code: 500, message: e.message })),
      ),
  );
});
// As the gateway's: a client's kept-alive connections stay open between its calls.
server.keepAliveTimeout = 620_000;
void kube.get(paths.podboxes(ns)).then(list => {
  kube.watchCollection(paths.podboxes(ns), see, list.body.metadata.resourceVersion);
  server.listen(Number(listen), "127.0.0.1", () => console.log("ready"));
});
