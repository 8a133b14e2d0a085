import type { Failpoint } from "../config";

/**
 * The test hook of restart-safety tests (`CUBEPOD_FAILPOINT`, config.ts): the reconciler stops
 * dead, never returning, right after its n-th action of one type, as a process killed at that
 * point would. Inert without a failpoint.
 */
export class Failpoints {
  #seen = 0;

  constructor(private readonly failpoint?: Failpoint) {}

  /** True when the standby index must not hear from its watch. */
  get standbyWatchLags(): boolean {
    return this.failpoint?.kind === "standbyWatchLags";
  }

  /** Called after each applied action; hangs forever once the failpoint is reached. */
  async after(action: string): Promise<void> {
    const f = this.failpoint;
    if (f?.kind !== "afterAction" || action !== f.action) return;
    if (++this.#seen < f.count) return;
    console.error(`failpoint ${f.action}:${f.count} reached: the reconciler stops here`);
    await new Promise(() => undefined);
  }
}
