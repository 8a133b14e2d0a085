import type { ClientRequest } from "node:http";

const MIB = Buffer.alloc(1 << 20, 7);

/** Writes `mib` MiB (`chunk`, one MiB, over and over) to a request body as fast as the connection takes them, then ends it. */
export function writeMiB(req: ClientRequest, mib: number, chunk = MIB): void {
  let sent = 0;
  const more = () => {
    while (sent < mib) {
      sent++;
      if (!req.write(chunk)) return void req.once("drain", more);
    }
    req.end();
  };
  more();
}
