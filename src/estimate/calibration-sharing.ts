/**
 * Other processes that map a library the calibration's probes load (ONNX Runtime's, libtorch,
 * libpython): the pages they share count as shared in the probes' readings, so the USS and
 * PSS fits come out low, and the cache keeps them. Measured: a calibration made while a vitest
 * run's Python workers had onnxruntime loaded put python-ort's import USS at 47.1 MiB against
 * 53.2 on a quiet machine. RSS counts a shared page like a private one and is not affected.
 */
import { readdirSync, readFileSync } from "node:fs";
import { basename } from "node:path";

/** The libraries whose pages a probe would share, by file name. */
const RUNTIME_LIBRARY = /onnxruntime|libtorch_cpu|libpython3/;

export interface SharingProcess {
  pid: number;
  /** The process's name (/proc/PID/comm). */
  name: string;
  /** The runtime libraries it maps, by file name. */
  libraries: string[];
}

/**
 * Processes that map a runtime library, read from /proc, other than `self` and its descendants
 * (a run's own workers). Processes this user cannot read are skipped, as are those that exit
 * while being read.
 */
export function processesSharingRuntimeLibraries(self: number = process.pid, procRoot = "/proc"): SharingProcess[] {
  let entries: string[];
  try {
    entries = readdirSync(procRoot);
  } catch {
    return [];
  }
  const pids = entries.map(Number).filter((pid) => Number.isInteger(pid) && pid > 0);
  const parentOf = new Map(pids.map((pid) => [pid, parentPid(procRoot, pid)]));
  const ours = (pid: number): boolean => {
    for (let p: number | undefined = pid, hops = 0; p !== undefined && p > 1 && hops < 64; p = parentOf.get(p), hops++) if (p === self) return true;
    return false;
  };
  const found: SharingProcess[] = [];
  for (const pid of pids) {
    if (ours(pid)) continue;
    let maps: string;
    try {
      maps = readFileSync(`${procRoot}/${pid}/maps`, "utf8");
    } catch {
      continue;
    }
    const libraries = new Set<string>();
    for (const line of maps.split("\n")) {
      const at = line.indexOf("/");
      if (at < 0) continue;
      const file = basename(line.slice(at));
      if (RUNTIME_LIBRARY.test(file)) libraries.add(file);
    }
    if (libraries.size === 0) continue;
    let name = "?";
    try {
      name = readFileSync(`${procRoot}/${pid}/comm`, "utf8").trim();
    } catch {
      // gone since its maps were read
    }
    found.push({ pid, name, libraries: [...libraries].sort() });
  }
  return found;
}

/** The parent's pid from /proc/PID/stat (after the parenthesised name, which may hold spaces). */
function parentPid(procRoot: string, pid: number): number | undefined {
  try {
    const stat = readFileSync(`${procRoot}/${pid}/stat`, "utf8");
    const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    return Number.isInteger(ppid) ? ppid : undefined;
  } catch {
    return undefined;
  }
}

/** One line naming them, for the calibration's log and the estimate's note. */
export function describeSharing(sharing: readonly SharingProcess[]): string {
  const shown = sharing.slice(0, 4).map((p) => `${p.name} (pid ${p.pid}: ${p.libraries.join(", ")})`);
  const more = sharing.length > shown.length ? ` and ${sharing.length - shown.length} more` : "";
  return `${sharing.length} other process${sharing.length === 1 ? "" : "es"} mapped the runtimes' libraries while it ran: ${shown.join("; ")}${more}`;
}
