import { readdirSync, readFileSync } from "node:fs";

/** Linux counts a process's CPU time in ticks of 1/USER_HZ s, and USER_HZ is 100. */
const MS_PER_TICK = 10;

/**
 * CPU milliseconds a process has used, its own and, with `children`, its finished children's
 * (the iptables-save and -restore a policy sync runs, say), or 0 when it is gone.
 */
export function processCpuMs(pid: number, children = true): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Fields after the command's closing parenthesis: utime, stime, cutime, cstime are 14-17.
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const fields = children ? [11, 12, 13, 14] : [11, 12];
    return fields.reduce((sum, i) => sum + Number(f[i]), 0) * MS_PER_TICK;
  } catch {
    return 0;
  }
}

/** CPU milliseconds by role, from {@link cpuByRole}. */
export type RoleCpu = Map<string, number>;

/**
 * The CPU milliseconds every process of this machine has used so far, summed by the role
 * `roleOf` gives its pid and command line. Kernel threads have no command line and are left out.
 */
export function cpuByRole(roleOf: (pid: number, command: string) => string): RoleCpu {
  const byRole: RoleCpu = new Map();
  for (const entry of readdirSync("/proc")) {
    const pid = Number(entry);
    if (!Number.isInteger(pid)) continue;
    let command = "";
    try {
      command = readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ").trim();
    } catch {
      continue;
    }
    if (!command) continue;
    const role = roleOf(pid, command);
    // Init reaps every orphan, and takes over a whole lifetime's CPU at once (a stopped module's).
    byRole.set(role, (byRole.get(role) ?? 0) + processCpuMs(pid, pid !== 1));
  }
  return byRole;
}

/** What each role used between two readings. */
export const cpuBetween = (before: RoleCpu, after: RoleCpu): RoleCpu =>
  new Map([...after].map(([role, ms]) => [role, ms - (before.get(role) ?? 0)]));

/** The machine's busy and total CPU ticks so far, from the first line of /proc/stat. */
function machineTicks(): { busy: number; total: number } {
  const cpu = readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).slice(1);
  const ticks = cpu.map(Number);
  // idle and iowait are the 4th and 5th fields.
  const total = ticks.reduce((a, b) => a + b, 0);
  return { busy: total - ticks[3] - (ticks[4] ?? 0), total };
}

/**
 * Resolves once the whole machine has been quiet (busy below `share` of its CPUs) for `seconds`
 * in a row, or after `timeoutMs` whatever it does; says which it was. A step measured while the
 * controllers still work off the step before it (garbage collection of its PVCs, a refill's
 * scheduling) measures that work too.
 */
export async function machineQuiet(share = 0.3, seconds = 2, timeoutMs = 120_000) {
  const end = Date.now() + timeoutMs;
  let quietFor = 0;
  let last = machineTicks();
  while (Date.now() < end) {
    await new Promise(r => setTimeout(r, 1000));
    const now = machineTicks();
    const busy = (now.busy - last.busy) / Math.max(1, now.total - last.total);
    last = now;
    quietFor = busy < share ? quietFor + 1 : 0;
    if (quietFor >= seconds) return true;
  }
  return false;
}
