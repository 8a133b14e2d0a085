/**
 * The least pair of servers for the `tls` benchmark: Node's own HTTP and HTTPS servers in one
 * process, the HTTPS one with the local gateway's certificate and key, each answering every GET
 * with the same small JSON and reading every POST to its end. What HTTPS adds between them is
 * what it costs any Node server on this machine, whatever it does with the request.
 * Usage: tsx bench/scenarios/floor-tls.ts <http port> <https port> <cert file> <key file>;
 * prints "ready".
 */
import { readFileSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { createServer as createTlsServer } from "node:https";

const [httpPort, httpsPort, cert, key] = process.argv.slice(2);
const ANSWER = JSON.stringify({
  sandboxID: "x".repeat(20),
  state: "running",
  pad: "y".repeat(400),
});

const handle = (req: IncomingMessage, res: ServerResponse) => {
  req.resume();
  req.on("end", () =>
    res
      .writeHead(200, { "Content-Type": "application/json" })
      .end(req.method === "GET" ? ANSWER : ""),
  );
};
let listening = 0;
const up = () => ++listening === 2 && console.log("ready");
createServer(handle).listen(Number(httpPort), "127.0.0.1", up);
createTlsServer({ cert: readFileSync(cert), key: readFileSync(key) }, handle).listen(
  Number(httpsPort),
  "127.0.0.1",
  up,
);
