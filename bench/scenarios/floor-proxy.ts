/**
 * The least a proxy in Node can do, for the `gateway` benchmark: every request piped to one fixed
 * address over kept-alive connections, with nothing looked up, checked or counted. Run in a process
 * of its own, as the gateway is, so that the difference between the two is what the gateway does.
 * Usage: tsx bench/scenarios/floor-proxy.ts <listen port> <target host> <target port>; prints
 * "ready" once it listens.
 */
import { Agent, createServer, request } from "node:http";

const [listen, host, port] = process.argv.slice(2);
const agent = new Agent({ keepAlive: true, maxSockets: 256 });
createServer((req, res) => {
  const upstream = request({
    host,
    port,
    method: req.method,
    path: req.url,
    headers: req.headers,
    agent,
  });
  req.pipe(upstream);
  upstream.on("response", r => {
    res.writeHead(r.statusCode ?? 502, r.headers);
    r.pipe(res);
  });
  upstream.on("error", () => res.destroy());
}).listen(Number(listen), "127.0.0.1", () => console.log("ready"));
