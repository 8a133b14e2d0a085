/**
 * The hosts of the local cluster's own internet (real-node.sh, `public_network`), run in its
 * network namespace: on each address given, HTTP on 80 and HTTPS on 443 with a certificate for
 * `*.<domain>` from the internet's own CA (certs.sh), answering every request with JSON of what
 * arrived: the address it reached, its Host header, the TLS server name, the method, the path and
 * the headers, so that a test reads what a sandbox's request looked like on the way out (a header
 * added, a Host masked). `GET /bytes/<n>` answers n bytes instead, for downloads.
 * Usage: tsx internet-hosts.ts <cert file> <key file> <address>...
 */
import { readFileSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { createServer as createTlsServer } from "node:https";
import type { TLSSocket } from "node:tls";

const [certFile, keyFile, ...addresses] = process.argv.slice(2);
if (!certFile || !keyFile || addresses.length === 0) {
  console.error("usage: internet-hosts.ts <cert file> <key file> <address>...");
  process.exit(2);
}
const tls = { cert: readFileSync(certFile), key: readFileSync(keyFile) };
/** The largest download a request may ask for: more than any benchmark takes. */
const MAX_BYTES = 1 << 30;
const CHUNK = Buffer.alloc(1 << 16, 0x61);

function answer(req: IncomingMessage, res: ServerResponse): void {
  const bytes = /^\/bytes\/(\d+)$/.exec(req.url ?? "");
  if (req.method === "GET" && bytes && Number(bytes[1]) <= MAX_BYTES) {
    let left = Number(bytes[1]);
    res.writeHead(200, { "Content-Type": "application/octet-stream", "Content-Length": left });
    const more = () => {
      while (left > 0) {
        const chunk = left >= CHUNK.length ? CHUNK : CHUNK.subarray(0, left);
        left -= chunk.length;
        if (!res.write(chunk)) return void res.once("drain", more);
      }
      res.end();
    };
    return more();
  }
  const socket = req.socket as TLSSocket;
  const seen = {
    address: socket.localAddress,
    tls: socket.encrypted === true,
    serverName: socket.encrypted ? ((socket as { servername?: string }).servername ?? null) : null,
    host: req.headers.host ?? null,
    method: req.method,
    path: req.url,
    headers: req.headers,
  };
  req.resume();
  req.on("end", () =>
    res.writeHead(200, { "Content-Type": "application/json" }).end(JSON.stringify(seen)),
  );
}

let listening = 0;
const up = () => ++listening === addresses.length * 2 && console.log("ready");
for (const address of addresses) {
  createServer(answer).listen(80, address, up);
  createTlsServer(tls, answer).listen(443, address, up);
}
