/**
 * One worker OS process: launched with execa, its stderr tail kept, its exit observed, and
 * stopped by escalation. Knows nothing of the protocol; incarnation.ts adds that.
 */
import { execa, type ResultPromise } from "execa";
import type { WorkerSpec } from "./options.ts";

export interface ExitInfo {
  exitCode: number | undefined;
  signal: NodeJS.Signals | undefined;
  /** Set when the process could not be started at all (e.g. ENOENT). */
  spawnError: Error | undefined;
}

/** Keeps the last `limit` bytes of a stream, cut at a line start where possible. */
class Tail {
  private chunks: Buffer[] = [];
  private size = 0;
  constructor(private readonly limit: number) {}
  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.size += chunk.length;
    while (this.size - (this.chunks[0]?.length ?? 0) >= this.limit && this.chunks.length > 1) {
      this.size -= this.chunks.shift()!.length;
    }
  }
  text(): string {
    const all = Buffer.concat(this.chunks);
    return all.subarray(Math.max(0, all.length - this.limit)).toString("utf8");
  }
}

export class WorkerProcess {
  readonly pid: number | undefined;
  readonly exited: Promise<ExitInfo>;
  private readonly child: ResultPromise;
  private readonly stderr: Tail;
  private exitInfo: ExitInfo | undefined;

  constructor(
    readonly spec: WorkerSpec,
    endpoint: string,
    opts: {
      stderrTailBytes: number;
      forward: ((line: string) => void) | undefined;
      /** Added to the environment after spec.env (the per-spawn key: never in argv). */
      env?: Record<string, string>;
    },
  ) {
    this.stderr = new Tail(opts.stderrTailBytes);
    this.child = execa(spec.command, [...(spec.args ?? []), "--connect", endpoint, "--name", spec.name], {
      env: { ...(spec.env ?? {}), ...(opts.env ?? {}) },
      extendEnv: true,
      ...(spec.cwd ? { cwd: spec.cwd } : {}),
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
      buffer: false,
      reject: false,
      // Own process group: a terminal Ctrl-C reaches only the orchestrator, which then
      // stops every worker by escalation instead of having them die mid-write.
      detached: true,
      cleanup: false,
      forceKillAfterDelay: false,
    });
    this.pid = this.child.pid;
    const forward = opts.forward;
    const errLines = forward ? lineSplitter((l) => forward(`[${spec.name}:err] ${l}`)) : undefined;
    const outLines = forward ? lineSplitter((l) => forward(`[${spec.name}] ${l}`)) : undefined;
    this.child.stderr?.on("data", (chunk: Buffer) => {
      this.stderr.push(chunk);
      errLines?.push(chunk);
    });
    this.child.stderr?.on("end", () => errLines?.flush());
    // stdout must be drained even when unused, or a chatty worker blocks on a full pipe.
    this.child.stdout?.on("data", (chunk: Buffer) => outLines?.push(chunk));
    this.child.stdout?.on("end", () => outLines?.flush());
    this.exited = new Promise<ExitInfo>((resolve) => {
      const done = (info: ExitInfo): void => {
        if (this.exitInfo) return;
        this.exitInfo = info;
        resolve(info);
      };
      // 'exit' fires when the worker itself ends, even if a grandchild still holds its
      // stderr open (execa's promise would wait for that); give the pipes a moment to drain
      // so the stderr tail is complete, then report.
      this.child.once("exit", (code, signal) => {
        const info = { exitCode: code ?? undefined, signal: (signal ?? undefined) as NodeJS.Signals | undefined, spawnError: undefined };
        const drained = this.child.then(() => undefined, () => undefined);
        void Promise.race([drained, new Promise((r) => setTimeout(r, 250))]).then(() => done(info));
      });
      void this.child.then((r) => {
        const failedToStart = r.failed && r.exitCode === undefined && r.signal === undefined;
        done({
          exitCode: r.exitCode,
          signal: r.signal as NodeJS.Signals | undefined,
          spawnError: failedToStart ? new Error(r.originalMessage || r.shortMessage, { cause: r.cause }) : undefined,
        });
      });
    });
  }

  get alive(): boolean {
    return this.exitInfo === undefined;
  }

  stderrTail(): string {
    return this.stderr.text();
  }

  kill(signal: NodeJS.Signals): void {
    if (!this.alive || this.pid === undefined) return;
    // The worker leads its own process group (detached): signal the group so that its
    // children (a shell wrapper's payload, a dataloader) go with it.
    for (const target of [-this.pid, this.pid]) {
      try {
        process.kill(target, signal);
        return;
      } catch {
        // no such group (or already gone, ESRCH): try the pid, else the exit promise reports it
      }
    }
  }

  killNow(): void {
    this.kill("SIGKILL");
  }

  /**
   * Escalation: `askToExit` (the shutdown message) → wait `graceMs` → SIGTERM → wait
   * `killGraceMs` → SIGKILL. Resolves with how the process ended.
   */
  async stop(graceMs = 2000, killGraceMs = 2000, askToExit?: () => void): Promise<ExitInfo> {
    if (!this.alive) return this.exited;
    if (askToExit) {
      askToExit();
      if (await this.exitsWithin(graceMs)) return this.exited;
    }
    this.kill("SIGTERM");
    if (await this.exitsWithin(killGraceMs)) return this.exited;
    this.kill("SIGKILL");
    return this.exited;
  }

  private exitsWithin(ms: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    return Promise.race([
      this.exited.then(() => true),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), ms))),
    ]).finally(() => clearTimeout(timer));
  }
}

/** Splits a stream into whole lines (a chunk may end mid-line); flush() emits the rest. */
function lineSplitter(emit: (line: string) => void): { push(chunk: Buffer): void; flush(): void } {
  let rest = "";
  return {
    push(chunk) {
      const parts = (rest + chunk.toString("utf8")).split("\n");
      rest = parts.pop() ?? "";
      for (const line of parts) emit(line);
    },
    flush() {
      if (rest.length > 0) emit(rest);
      rest = "";
    },
  };
}
