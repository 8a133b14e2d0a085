/**
 * The least an E2B API server can do, for the `gateway` benchmark: every request answered at once
 * with a created sandbox (the gateway's own answer for a box that never existed), nothing read,
 * checked or created. The E2B SDK's `Sandbox.create` against it is what the SDK itself costs its
 * caller, with no server work at all. Run in a process of its own, as the gateway is.
 * Usage: tsx bench/scenarios/floor-e2b.ts <listen port>; prints "ready" once it listens.
 */
import { createServer } from "node:http";
import type { PodBox } from "../../capabilities/api/kinds";
import { ANNOTATION_TEMPLATE, sandbox } from "../../gateway/e2b";

const [listen] = process.argv.slice(2);
const box = { metadata: { name: "floor", annotations: { [ANNOTATION_TEMPLATE]: "python" } } };
const body = JSON.stringify(
  sandbox(box as PodBox, { access: "0".repeat(64), traffic: null }, "cubepod.localhost"),
);

const server = createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    res.writeHead(201, { "Content-Type": "application/json", "Content-Length": body.length });
    res.end(body);
  });
});
// As the gateway's: a client's kept-alive connections stay open between its calls.
server.keepAliveTimeout = 620_000;
server.listen(Number(listen), "127.0.0.1", () => console.log("ready"));
