/**
 * An agent as E2B's docs set one up: the JS SDK given only E2B_DOMAIN and E2B_API_KEY (and the
 * CA its HTTPS certificates come from). Prints what it saw as one JSON line.
 */
import { Sandbox } from "e2b";

async function main() {
  const sbx = await Sandbox.create("base");
  const seen: Record<string, unknown> = { id: sbx.sandboxId };
  seen.echo = (await sbx.commands.run("echo standard")).stdout;
  await sbx.files.write("/home/user/note.txt", "kept");
  seen.read = await sbx.files.read("/home/user/note.txt");
  await sbx.commands.run("cd /home/user && python3 -m http.server 8000 >/dev/null 2>&1", {
    background: true,
  });
  seen.host = sbx.getHost(8000);
  for (let i = 0; i < 50 && seen.served === undefined; i++) {
    const r = await fetch(`https://${seen.host}/note.txt`).catch(() => undefined);
    if (r?.ok) seen.served = await r.text();
    else await new Promise(done => setTimeout(done, 200));
  }
  seen.downloaded = await (await fetch(await sbx.downloadUrl("/home/user/note.txt"))).text();
  seen.killed = await sbx.kill();
  console.log(JSON.stringify(seen));
}

void main();
