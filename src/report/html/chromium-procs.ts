/**
 * Chromium's processes found through /proc by the profile they were started with, for the
 * last resort of an exiting orchestrator: an 'exit' hook cannot wait for anything, and a
 * profile removed while chromium still runs is written again by chromium's last writes
 * (CI once found $TMPDIR/memlane-chromium-* after a Ctrl-C during rendering).
 */
import { readdirSync, readFileSync } from "node:fs";

interface ProcInfo {
  pid: number;
  pgid: number;
  zombie: boolean;
  cmdline: string[];
}

/** Every process this user can read: pid, process group, command line, zombie or not. */
function processes(): ProcInfo[] {
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return []; // no /proc: nothing to find
  }
  const out: ProcInfo[] = [];
  for (const d of entries) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, "latin1");
      // After the command's closing parenthesis: state, ppid, pgrp, ...
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      out.push({ pid: Number(d), pgid: Number(fields[2]), zombie: fields[0] === "Z", cmdline: readFileSync(`/proc/${d}/cmdline`, "latin1").split("\0") });
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return out;
}

/**
 * What to kill for the chromiums started with `--user-data-dir=<profile>`: playwright starts
 * chromium as a process-group leader, and its zygote, GPU and renderer processes (whose
 * command lines need not name the profile) are in that group; a chromium that leads no group
 * is only itself (its group may be ours).
 */
export function chromiumTargets(profile: string): { groups: Set<number>; pids: Set<number> } {
  const flag = `--user-data-dir=${profile}`;
  const groups = new Set<number>();
  const pids = new Set<number>();
  // Zombies count: a zombie leader's cmdline reads empty, but its zygote and renderers carry
  // the flag too (chromium passes --user-data-dir on), so their group is still found.
  for (const p of processes()) {
    if (!p.cmdline.includes(flag)) continue;
    if (p.pgid === p.pid) groups.add(p.pgid);
    else pids.add(p.pid);
  }
  return { groups, pids };
}

/**
 * SIGKILLs the chromiums using `profile` (their process groups) and waits, synchronously and
 * at most `withinMs`, until none of those processes runs, so that removing the profile
 * afterwards is final. Returns how many processes it signalled (groups count once).
 */
export function killChromiumSync(profile: string, withinMs = 2000): number {
  const { groups, pids } = chromiumTargets(profile);
  for (const target of [...[...groups].map((g) => -g), ...pids]) {
    try {
      process.kill(target, "SIGKILL");
    } catch {
      // already gone
    }
  }
  if (groups.size + pids.size === 0) return 0;
  const until = Date.now() + withinMs;
  const tick = new Int32Array(new SharedArrayBuffer(4));
  const running = (): boolean => processes().some((p) => !p.zombie && (groups.has(p.pgid) || pids.has(p.pid)));
  // A blocking wait, the only kind an 'exit' hook has; SIGKILL takes effect in milliseconds.
  while (running() && Date.now() < until) Atomics.wait(tick, 0, 0, 10);
  return groups.size + pids.size;
}
