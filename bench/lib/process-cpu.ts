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
