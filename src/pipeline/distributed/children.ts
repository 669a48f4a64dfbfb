/**
 * The processes torch.distributed.run starts, found through /proc: the orchestrator is not
 * their parent (the launcher is), and each rank leads its own session, so neither waitpid
 * nor the launcher's process group reaches them. A watcher scans /proc for the launcher's
 * children every `periodMs` so that the sampler sees each rank from its spawn (its torch
 * import included), and so that nothing the launcher started outlives the stage.
 */
import { readdirSync, readFileSync } from "node:fs";

export interface ProcStat {
  pid: number;
  ppid: number;
  /** Field 22 of /proc/<pid>/stat, in clock ticks since boot: tells a pid apart from its reuse. */
  startTime: number;
  zombie: boolean;
}

export function readStat(pid: number): ProcStat | null {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, "latin1");
  } catch {
    return null;
  }
  // The command name (field 2) may hold spaces and parentheses: fields start after the last ")".
  const rest = text.slice(text.lastIndexOf(")") + 2).split(" ");
  return { pid, ppid: Number(rest[1]), startTime: Number(rest[19]), zombie: rest[0] === "Z" };
}

/** Pids whose parent is `ppid` (one pass over /proc). */
export function childrenOf(ppid: number): ProcStat[] {
  const found: ProcStat[] = [];
  for (const d of readdirSync("/proc")) {
    if (d.charCodeAt(0) < 48 || d.charCodeAt(0) > 57) continue;
    const st = readStat(Number(d));
    if (st && st.ppid === ppid && !st.zombie) found.push(st);
  }
  return found;
}

/** Whether the process seen as `st` still runs (same pid, same start time, not a zombie). */
export function stillRunning(st: ProcStat): boolean {
  const now = readStat(st.pid);
  return now !== null && !now.zombie && now.startTime === st.startTime;
}

/** Watches a process's children; `onChild` gets each new one once with a promise of its end. */
export class ChildWatcher {
  readonly #seen = new Map<number, { stat: ProcStat; end: () => void }>();
  readonly #timer: NodeJS.Timeout;

  constructor(
    readonly parent: number,
    private readonly onChild: (pid: number, exited: Promise<void>) => void,
    periodMs = 100,
  ) {
    this.#timer = setInterval(() => this.scan(), periodMs);
    this.#timer.unref();
    this.scan();
  }

  scan(): void {
    for (const [pid, s] of this.#seen) {
      if (!stillRunning(s.stat)) {
        s.end();
        this.#seen.delete(pid);
      }
    }
    let kids: ProcStat[];
    try {
      kids = childrenOf(this.parent);
    } catch {
      return; // /proc unreadable for a moment: the next scan sees them
    }
    for (const st of kids) {
      if (this.#seen.has(st.pid)) continue;
      let end!: () => void;
      const exited = new Promise<void>((r) => (end = r));
      this.#seen.set(st.pid, { stat: st, end });
      this.onChild(st.pid, exited);
    }
  }

  /** Children seen and still running. */
  alive(): ProcStat[] {
    return [...this.#seen.values()].map((s) => s.stat).filter(stillRunning);
  }

  /** SIGKILL every child still running (each leads its own session: its group goes too). */
  killAll(): number[] {
    const killed: number[] = [];
    for (const st of this.alive()) {
      for (const target of [-st.pid, st.pid]) {
        try {
          process.kill(target, "SIGKILL");
          killed.push(st.pid);
          break;
        } catch {
          // not a group leader, or gone
        }
      }
    }
    return killed;
  }

  /**
   * Stops watching. No last scan: by now the launcher's pid may name another process, whose
   * children are none of ours; ranks the scans missed end on their own, bound to the
   * launcher's death (PR_SET_PDEATHSIG, python/memlane_worker/parent_death.py).
   */
  close(): void {
    clearInterval(this.#timer);
    for (const s of this.#seen.values()) s.end();
  }
}
