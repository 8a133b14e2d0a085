/**
 * The least a proxy in Node can do, for the `gateway` benchmark: every request streamed to one
 * fixed address over kept-alive connections by undici's dispatcher (Node's fastest HTTP client),
 * with nothing looked up, checked or counted. Run in a process of its own, as the gateway is, so
 * that the difference between the two is what the gateway does.
 * Usage: tsx bench/scenarios/floor-proxy.ts <listen port> <target host> <target port>; prints
 * "ready" once it listens.
 */
import { createServer, type IncomingHttpHeaders } from "node:http";
import { Agent, type Dispatcher } from "undici";

const [listen, host, port] = process.argv.slice(2);
const agent = new Agent({ connections: 256 });
const origin = `http://${host}:${port}`;
const framing = new Set(["connection", "keep-alive", "transfer-encoding", "expect"]);

createServer((req, res) => {
  const headers: string[] = [];
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    if (!framing.has(req.rawHeaders[i].toLowerCase())) {
      headers.push(req.rawHeaders[i], req.rawHeaders[i + 1]);
    }
  }
  const bodyless = req.headers["content-length"] === undefined && !req.headers["transfer-encoding"];
  // onRequestStart marks the handler as of undici's current interface.
  const handler: Dispatcher.DispatchHandler = {
    onRequestStart: () => undefined,
    onResponseStart(_c, status: number, out: IncomingHttpHeaders) {
      for (const h of framing) if (out[h] !== undefined) delete out[h];
      res.writeHead(status, out);
    },
    onResponseData(c, chunk: Buffer) {
      if (!res.write(chunk)) {
        c.pause();
        res.once("drain", () => c.resume());
      }
    },
    onResponseEnd: () => void res.end(),
    onResponseError: () => void res.destroy(),
  };
  agent.dispatch(
    {
      origin,
      path: req.url ?? "/",
      method: (req.method ?? "GET") as Dispatcher.HttpMethod,
      headers,
      body: bodyless ? null : req,
    },
    handler,
  );
}).listen(Number(listen), "127.0.0.1", () => console.log("ready"));
