import { type ChildProcess, spawn } from "node:child_process";

/**
 * `tsx <args>` in a process group of its own, once it prints `ready`; kill the group to end it.
 * With `commands`, its stdin is a pipe the caller writes commands to; else it has none.
 */
export async function ownProcess(args: string[], ready: string, commands = false) {
  const proc = spawn("npx", ["tsx", ...args], {
    stdio: [commands ? "pipe" : "ignore", "pipe", "inherit"],
    detached: true,
  });
  await new Promise<void>((resolve, reject) => {
    proc.stdout!.on("data", d => String(d).includes(ready) && resolve());
    proc.on("exit", code => reject(new Error(`${args[0]} exited (${code})`)));
  });
  return proc;
}

/** Ends a process group started by {@link ownProcess}, if anything of it is left. */
export function killGroup(proc: ChildProcess) {
  try {
    process.kill(-proc.pid!, "SIGTERM");
  } catch {
    // Already gone: it may exit on its own once it has said what it had to.
  }
}
