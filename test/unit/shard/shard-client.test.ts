import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { NotShardHolderError, ShardClient } from "../../../capabilities/shard/shard-client";
import { namespaceShard } from "../../../capabilities/shard/shard-of";

/** A loopback HTTP server that records each request and answers after `delayMs`. */
type Seen = { method: string; url: string; body: unknown };
let server: Server;
let seen: Seen[];
let delayMs = 0;
let answered = 0;
let base = "";

const readBody = (req: IncomingMessage) =>
  new Promise<string>(resolve => {
    let data = "";
    req.on("data", c => (data += c));
    req.on("end", () => resolve(data));
  });

beforeAll(async () => {
  server = createServer(async (req, res) => {
    const text = await readBody(req);
    seen.push({ method: req.method!, url: req.url!, body: text ? JSON.parse(text) : undefined });
    setTimeout(() => {
      res.writeHead(200, { "Content-Type": "application/json" });
      res.end(text || "{}", () => answered++);
    }, delayMs);
  });
  await new Promise<void>(resolve => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise(resolve => server.close(resolve)));
beforeEach(() => {
  seen = [];
  delayMs = 0;
  answered = 0;
});

const client = (holding: () => boolean) =>
  new ShardClient(5000, async () => ({ server: base }), "cubepod/test", 3, holding);

describe("ShardClient", () => {
  it("stamps what it creates with its namespace's shard, keeping the other labels", async () => {
    await client(() => true).create("/api/v1/namespaces/tenant-a/pods", {
      metadata: { name: "p", labels: { app: "x" } },
    });
    expect(seen[0].body).toEqual({
      metadata: {
        name: "p",
        labels: { app: "x", "pod.cubeplex.ai/shard": namespaceShard("tenant-a", 3) },
      },
    });
  });

  it("refuses every write, sending nothing, once the shard is not held; reads go on", async () => {
    const c = client(() => false);
    await expect(c.mergePatch("/api/v1/namespaces/tenant-a/pods/p", {})).rejects.toThrow(
      NotShardHolderError,
    );
    await expect(c.delete("/api/v1/namespaces/tenant-a/pods/p")).rejects.toThrow(
      NotShardHolderError,
    );
    expect(seen).toEqual([]);
    await c.get("/api/v1/namespaces/tenant-a/pods/p");
    expect(seen.map(s => s.method)).toEqual(["GET"]);
  });

  it("settles once its writes in flight are answered", async () => {
    const c = client(() => true);
    await c.settled();
    delayMs = 200;
    const write = c.mergePatch("/api/v1/namespaces/tenant-a/pods/p", {});
    await c.settled();
    expect(answered).toBe(1);
    await write;
  });
});
