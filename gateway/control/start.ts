import { request } from "undici";
import { API_VERSION, DEFAULT_SANDBOX_USER } from "../../capabilities/api/common";
import type { PodBox } from "../../capabilities/api/kinds";
import { paths } from "../../capabilities/client/paths";
import { kubeTime } from "../../capabilities/kit/conditions";
import { ANNOTATION_LAST_ACTIVITY } from "../../capabilities/reaper/activity";
import {
  ANNOTATION_TIMEOUT,
  ApiError,
  DEFAULT_TIMEOUT_SECONDS,
  egressEnforced,
  egressRefused,
  endpointOf,
  newSandboxId,
  sandbox,
} from "../e2b";
import { AnswerTooLarge, MAX_DAEMON_ANSWER_BYTES, readBoundedText } from "../bounded-read";
import { sandboxStart } from "../metrics";
import { CONTROL_HEADER } from "../podd-control";
import { ANNOTATION_TOKEN_KEY } from "../token-keys";
import { endAt, startedNow, type ControlContext } from "./context";

/** The `Sandbox` a create, connect or resume answers. */
export type StartedSandbox = ReturnType<typeof sandbox>;

/** How late a start may leave a sandbox's end before it is set again from the start. */
const START_SLACK_MS = 1000;

/**
 * A sandbox's start, as a create, a fork and a resume make it: the box's write, the wait until it
 * runs, and its daemon's `/init`; the steps `cubepod_gateway_sandbox_start_seconds` times.
 */
export class SandboxStarter {
  readonly #resuming = new Map<string, Promise<StartedSandbox>>();

  constructor(private readonly context: ControlContext) {}

  /**
   * Creates a sandbox's box and waits until it serves ({@link #start}); one that does not start
   * leaves nothing behind: its box, Pod and volumes go. The timeout is the box's own
   * (`spec.expiresAt`): the operator ends or pauses it with no gateway running.
   */
  async make(
    ns: string,
    spec: Record<string, unknown>,
    annotations: Record<string, string>,
    lifetime: { timeout?: number; autoPause?: boolean },
    envVars: Record<string, string>,
  ) {
    const { client, config } = this.context;
    const id = newSandboxId();
    const timeout = lifetime.timeout ?? DEFAULT_TIMEOUT_SECONDS;
    // A sandbox's timeout counts from its start, as E2B's does: a box waiting for a standby or
    // starting cold must not expire first. A short timeout is set again once it runs, as is any
    // after a start that took long.
    const whileStarting = Math.max(timeout, Math.ceil(config.startTimeoutMs / 1000));
    const box = {
      apiVersion: API_VERSION,
      kind: "PodBox",
      metadata: {
        name: id,
        annotations: {
          ...annotations,
          ...startedNow(),
          ...this.context.keyAnnotations(ns, id, envVars),
        },
      },
      spec: {
        ...spec,
        expiresAt: endAt(whileStarting),
        ...(lifetime.autoPause ? { onExpiry: "Pause" } : {}),
      },
    };
    const since = Date.now();
    const written = sandboxStart.startTimer({ step: "write" });
    await client.create<PodBox>(paths.podBoxes(ns), box as unknown as PodBox);
    written();
    try {
      const started = await this.#start(ns, id, envVars);
      if (whileStarting !== timeout || Date.now() - since > START_SLACK_MS) {
        await this.context.setEnd(ns, id, timeout);
      }
      return started;
    } catch (e) {
      await client.delete(paths.podBoxes(ns, id)).catch(() => undefined);
      throw e;
    }
  }

  /**
   * Resumes a paused sandbox and waits until it serves: the spec says run, with a new expiry
   * (`timeout`, else the one it was created with), and (for a box the reaper paused) new activity
   * says so too. Concurrent resumes of one box (a burst of traffic) share one.
   */
  resume(ns: string, id: string, timeout?: number): Promise<StartedSandbox> {
    const { client, boxes, config } = this.context;
    const key = `${ns}/${id}`;
    const pending = this.#resuming.get(key);
    if (pending) return pending;
    const seconds =
      timeout ??
      Number(
        boxes.get(ns, id)?.metadata?.annotations?.[ANNOTATION_TIMEOUT] ?? DEFAULT_TIMEOUT_SECONDS,
      );
    // Its timeout counts from when it serves again, as a create's does (make).
    const whileStarting = Math.max(seconds, Math.ceil(config.startTimeoutMs / 1000));
    const run = (async () => {
      const since = Date.now();
      const written = sandboxStart.startTimer({ step: "write" });
      const patched = await client.mergePatch<PodBox>(paths.podBoxes(ns, id), {
        metadata: {
          annotations: {
            [ANNOTATION_LAST_ACTIVITY]: kubeTime(new Date()),
            // Its daemon starts anew: the /init below hands it a token of the current key.
            [ANNOTATION_TOKEN_KEY]: config.tokenKeys.current.id,
          },
        },
        spec: { desiredState: "Running", expiresAt: endAt(whileStarting) },
      });
      written();
      // The operator may be pausing it still (its expiry came): only a status that answers
      // this write says where it runs.
      const generation = patched.metadata?.generation ?? 0;
      const started = await this.#start(ns, id, this.context.keptEnvVars(ns, id), generation);
      if (whileStarting !== seconds || Date.now() - since > START_SLACK_MS) {
        await this.context.setEnd(ns, id, seconds);
      }
      return started;
    })().finally(() => this.#resuming.delete(key));
    this.#resuming.set(key, run);
    return run;
  }

  /**
   * Waits (on the box's watch events) until the box runs, then hands its daemon its environment
   * and access token (`POST /init`, after `GET /health` answers when it does not yet), as E2B's
   * orchestrator does; answers the `Sandbox` the SDK gets.
   */
  async #start(
    ns: string,
    id: string,
    envVars: Record<string, string>,
    generation = 0,
  ): Promise<StartedSandbox> {
    const { boxes, config } = this.context;
    const deadline = Date.now() + config.startTimeoutMs;
    const running = sandboxStart.startTimer({ step: "run" });
    let box: PodBox | undefined;
    try {
      box = await boxes.waitFor(
        ns,
        id,
        b =>
          b !== undefined &&
          (b.status?.observedGeneration ?? 0) >= generation &&
          // Its code runs only once its node enforces its egress rules, if it has any.
          ((endpointOf(b) !== undefined && egressEnforced(b, this.context.templateOf(b))) ||
            egressRefused(b) !== undefined ||
            b.status?.phase === "Failed"),
        config.startTimeoutMs,
      );
    } catch {
      throw new ApiError(504, `sandbox "${id}" did not start in ${config.startTimeoutMs / 1000} s`);
    }
    if (!box || box.status?.phase === "Failed") {
      throw new ApiError(
        500,
        `sandbox "${id}" failed to start: ${box?.status?.message ?? box?.status?.reason}`,
      );
    }
    const refused = egressRefused(box);
    if (refused) throw new ApiError(500, `sandbox "${id}" failed to start: ${refused}`);
    running();
    const initialized = sandboxStart.startTimer({ step: "init" });
    const url = box.status!.poddURL!;
    const token = config.tokenKeys.accessToken(box);
    const credential = config.tokenKeys.credential(box)!;
    const body = JSON.stringify({
      envVars,
      accessToken: token,
      defaultUser: this.context.templateOf(box)?.spec?.user ?? DEFAULT_SANDBOX_USER,
      timestamp: new Date().toISOString(),
    });
    // A claimed standby's daemon has long been serving: /init first, and only when nothing
    // answers yet, wait for `GET /health` and send it again.
    let status = await init(url, body, credential);
    while (status === undefined) {
      if (Date.now() > deadline) {
        throw new ApiError(
          504,
          `sandbox "${id}" runs, but its daemon did not answer ${url}/health`,
        );
      }
      await new Promise(r => setTimeout(r, 100));
      if (await healthy(url)) status = await init(url, body, credential);
    }
    if (status.status >= 300) {
      throw new ApiError(
        502,
        `sandbox "${id}": its daemon refused /init (HTTP ${status.status}): ${status.why}`,
      );
    }
    initialized();
    return sandbox(box, config.tokenKeys.tokens(box), config.domain);
  }
}

/**
 * `POST /init`'s status and, when refused, why; undefined when the daemon does not answer. A
 * refusal's text is read to {@link MAX_DAEMON_ANSWER_BYTES} at most.
 */
async function init(
  url: string,
  body: string,
  credential: string,
): Promise<{ status: number; why: string } | undefined> {
  let text: string;
  try {
    const res = await request(`${url}/init`, {
      method: "POST",
      headers: { "Content-Type": "application/json", [CONTROL_HEADER]: credential },
      body,
      headersTimeout: 5000,
      bodyTimeout: 5000,
    });
    if (res.statusCode < 300) {
      await res.body.dump();
      return { status: res.statusCode, why: "" };
    }
    try {
      text = await readBoundedText(res.body, MAX_DAEMON_ANSWER_BYTES);
    } catch (e) {
      if (e instanceof AnswerTooLarge) return { status: res.statusCode, why: e.message };
      throw e;
    }
    let why = text;
    try {
      why = (JSON.parse(text) as { message?: string }).message ?? text;
    } catch {
      // not JSON: the text as it came
    }
    return { status: res.statusCode, why: why.slice(0, 500) };
  } catch {
    return undefined;
  }
}

async function healthy(url: string): Promise<boolean> {
  try {
    const res = await request(`${url}/health`, { headersTimeout: 2000, bodyTimeout: 2000 });
    await res.body.dump();
    return res.statusCode < 300;
  } catch {
    return false;
  }
}
