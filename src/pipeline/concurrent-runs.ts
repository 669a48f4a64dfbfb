/**
 * Concurrent runs: two memlane runs on one machine skew each other's figures (USS moves
 * when another process maps the same libraries; timings share the cores), so each run says
 * in its report whether another was active, at its start or later.
 *
 * A run announces itself with a listening Unix socket in Linux's abstract namespace, named
 * `memlane-run.<pid>.<runId>`, and finds the others in /proc/net/unix. An abstract socket is
 * no file: nothing is left behind, even by a SIGKILLed orchestrator, and it disappears with
 * its process, so liveness needs no check. Runs in another network namespace (another
 * container) are not seen; see docs/report.md.
 */
import { readFileSync } from "node:fs";
import net from "node:net";

const PREFIX = "memlane-run.";
/** How often a run looks for runs that started after it. */
export const WATCH_INTERVAL_MS = 1000;

export interface OtherRun {
  pid: number;
  runId: string;
}

/** Every memlane run announced on this machine (this network namespace), from /proc/net/unix. */
export function activeRuns(procNetUnix = "/proc/net/unix"): OtherRun[] {
  let text: string;
  try {
    text = readFileSync(procNetUnix, "latin1");
  } catch {
    return [];
  }
  const runs = new Map<string, OtherRun>();
  for (const line of text.split("\n")) {
    const at = line.indexOf(`@${PREFIX}`);
    if (at < 0) continue;
    // Node pads an abstract name with NULs, which /proc shows as '@'.
    const name = line.slice(at + 1).replace(/@+$/, "");
    const m = /^memlane-run\.(\d+)\.([\w.:-]+)$/.exec(name);
    if (m) runs.set(name, { pid: Number(m[1]), runId: m[2]! });
  }
  return [...runs.values()];
}

/**
 * Announces this run and watches for others. `notes()` gives the lines for the report: the
 * runs active when this one started, and those that started during it.
 */
export class ConcurrentRuns {
  readonly #server: net.Server;
  readonly #timer: NodeJS.Timeout;
  readonly #atStart: OtherRun[];
  readonly #later = new Map<string, OtherRun & { afterMs: number }>();
  readonly #t0 = Date.now();

  constructor(readonly runId: string) {
    const self = (r: OtherRun): boolean => r.pid === process.pid && r.runId === runId;
    this.#atStart = activeRuns().filter((r) => !self(r));
    this.#server = net.createServer((socket) => socket.destroy());
    this.#server.on("error", () => {}); // announcing is best effort: a run is never failed for it
    this.#server.listen(`\0${PREFIX}${process.pid}.${runId}`);
    this.#server.unref();
    const known = new Set(this.#atStart.map((r) => `${r.pid}.${r.runId}`));
    this.#timer = setInterval(() => {
      for (const r of activeRuns()) {
        const key = `${r.pid}.${r.runId}`;
        if (self(r) || known.has(key)) continue;
        known.add(key);
        this.#later.set(key, { ...r, afterMs: Date.now() - this.#t0 });
      }
    }, WATCH_INTERVAL_MS);
    this.#timer.unref();
  }

  /** Stops watching and withdraws the announcement. Safe to call twice. */
  close(): void {
    clearInterval(this.#timer);
    this.#server.close();
  }

  notes(): string[] {
    const out: string[] = [];
    const list = (rs: OtherRun[]): string => rs.map((r) => `pid ${r.pid} (run ${r.runId})`).join(", ");
    if (this.#atStart.length > 0)
      out.push(`another memlane run was active when this run started: ${list(this.#atStart)}; memory (USS, PSS) and timings are skewed by it.`);
    const later = [...this.#later.values()];
    if (later.length > 0)
      out.push(
        `another memlane run started during this run: ${later.map((r) => `pid ${r.pid} (run ${r.runId}) ${(r.afterMs / 1000).toFixed(1)} s in`).join(", ")}; memory (USS, PSS) and timings from then on are skewed by it.`,
      );
    return out;
  }
}
