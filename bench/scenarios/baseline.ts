import { createServer, Agent as HttpAgent, get as httpGet } from "node:http";
import type { AddressInfo } from "node:net";
import { Kube } from "../../testkit/kube";
import { results } from "../lib/results";
import { now, sleep, stats } from "../lib/stats";

/**
 * The API server alone at the time of the run: sequential GETs and merge patches of one small
 * ConfigMap. This shared machine's speed drifts over a day (these figures moved by a third), and
 * every other figure moves with it; this one says how fast the machine was for the rest.
 *
 * Then the cost of waking the machine up: an HTTP round trip to a server in this very process,
 * back to back and after 1.5 s of idling (the gap before each one-at-a-time claim), and the same
 * patch after 1.5 s of idling. This machine is a microVM whose idle vCPUs halt at once
 * (`cpuidle_haltpoll`, `guest_halt_poll_ns=0`), and waking them is dear: a claim after idling
 * pays it at every hop between processes.
 */
export async function benchBaseline(kube: Kube, ns: string) {
  const path = `/api/v1/namespaces/${ns}/configmaps`;
  await kube.mustCreate(path, { metadata: { name: "baseline" }, data: { n: "0" } });
  // `n` calls, each after `gapMs` of idling; the first `warmup` warm the connection up.
  const time = async (
    f: (i: number) => Promise<unknown>,
    { n = 100, gapMs = 0, warmup = 20 } = {},
  ) => {
    const ms: number[] = [];
    for (let i = 0; i < n; i++) {
      if (gapMs) await sleep(gapMs);
      const t0 = now();
      await f(i);
      ms.push(now() - t0);
    }
    return stats(ms.slice(warmup));
  };
  const patch = (i: number) => kube.mergePatch(`${path}/baseline`, { data: { n: String(i) } });
  const AFTER_IDLE = { n: 12, gapMs: 1500, warmup: 2 };
  const echo = await loopbackEcho();
  try {
    results.apiServerBaseline = {
      what: "the API server alone: GET and merge patch of a small ConfigMap, sequential (ms)",
      get: await time(() => kube.get(`${path}/baseline`)),
      patch: await time(patch),
    };
    results.wakeUp = {
      what: "waking the machine: back to back vs after 1.5 s idle (ms)",
      loopbackEcho: await time(echo.call),
      loopbackEchoAfterIdle: await time(echo.call, AFTER_IDLE),
      patchAfterIdle: await time(patch, AFTER_IDLE),
    };
  } finally {
    echo.close();
  }
}

/** An HTTP server on 127.0.0.1 in this process, and a keep-alive client of it. */
export async function loopbackEcho() {
  const server = createServer((_req, res) => res.end("ok"));
  await new Promise<void>(resolve => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const agent = new HttpAgent({ keepAlive: true });
  return {
    call: () =>
      new Promise<void>((resolve, reject) => {
        httpGet({ host: "127.0.0.1", port, agent }, res => res.resume().on("end", resolve)).on(
          "error",
          reject,
        );
      }),
    close: () => {
      agent.destroy();
      server.close();
    },
  };
}
