/**
 * Test hook for restart-safety tests: with `CUBEPOD_FAILPOINT=<action>:<n>` set, the reconciler
 * stops dead (never returns) right after applying its n-th action of that type, as a process
 * killed at that point would. Inert when the variable is unset.
 */
const spec = process.env.CUBEPOD_FAILPOINT;
const [failAction, failCount] = spec ? spec.split(":") : [];
let seen = 0;

/** Called after each applied action; hangs forever when the failpoint is reached. */
export async function failpoint(action: string): Promise<void> {
  if (!failAction || action !== failAction) return;
  seen++;
  if (seen >= Number(failCount ?? 1)) {
    console.error(`failpoint ${spec} reached: the reconciler stops here`);
    await new Promise(() => undefined);
  }
}

/**
 * With `CUBEPOD_FAILPOINT=standby-watch-lags`, the index of ready standbys never hears from its
 * watch, as if every standby's event arrived after the box that claims it: claims must find their
 * standby by their own read.
 */
export const standbyWatchLags = spec === "standby-watch-lags";
