/**
 * The least rate-limited control API, for the `flood` benchmark: each request's API key hashed
 * and looked up, its tenant's token bucket taken from (the gateway's own, gateway/rate-limit.ts,
 * at its default rate), and a small JSON answer: `[]`, or 429 with Retry-After. Nothing else the
 * gateway does (no API server, no routes, no sandboxes). The victim's latency against it, under
 * the same flood, is what any one-process gateway on this machine must let a flood add.
 * Usage: tsx bench/scenarios/floor-limits.ts <listen port> <API key>...; prints "ready".
 */
import { createHash } from "node:crypto";
import { createServer } from "node:http";
import { TokenBuckets } from "../../gateway/rate-limit";

const [listen, ...keys] = process.argv.slice(2);
const tenants = new Map(
  keys.map((k, i) => [createHash("sha256").update(k).digest("hex"), `t${i}`]),
);
const buckets = new TokenBuckets(50, 500);

createServer((req, res) => {
  const key = req.headers["x-api-key"];
  const tenant =
    typeof key === "string"
      ? tenants.get(createHash("sha256").update(key).digest("hex"))
      : undefined;
  if (!tenant) {
    res.writeHead(401, { "Content-Type": "application/json" }).end('{"code":401,"message":"no"}');
    return;
  }
  const wait = buckets.take(tenant);
  if (wait > 0) {
    res
      .writeHead(429, {
        "Content-Type": "application/json",
        "Retry-After": String(Math.ceil(wait)),
      })
      .end('{"code":429,"message":"rate limit"}');
    return;
  }
  res.writeHead(200, { "Content-Type": "application/json" }).end("[]");
}).listen(Number(listen), "127.0.0.1", () => console.log("ready"));
