/**
 * The handle a caller holds for a named worker. It outlives one process: a task run with
 * `retries` moves to a fresh process when its worker dies, and the handle follows it.
 */
import type { Hello } from "../transport/protocol.ts";
import type { Incarnation } from "./incarnation.ts";
import { checkRunOptions, type RunOptions, type TaskResult } from "./options.ts";
import type { ExitInfo } from "./process.ts";
import { isWorkerDied } from "./worker-error.ts";

/** A running worker: run tasks on it, stop it. Obtained from {@link Supervisor.spawn}. */
export class WorkerHandle {
  private current: Incarnation;
  private respawning: Promise<Incarnation> | undefined;

  /** @internal */
  constructor(
    first: Incarnation,
    private readonly relaunch: () => Promise<Incarnation>,
    private readonly onStopped: (h: WorkerHandle) => void,
  ) {
    this.current = first;
  }

  /** The name given in the spec. */
  get name(): string {
    return this.current.spec.name;
  }

  /** The pid of the current process (changes after a retry on a fresh worker). */
  get pid(): number | undefined {
    return this.current.proc.pid;
  }

  /** The current process's hello (capabilities, versions). */
  get hello(): Hello {
    return this.current.hello!;
  }

  /** True while the current process runs and is not being stopped. */
  get alive(): boolean {
    return this.current.alive;
  }

  /** Resolves when the current process has exited. */
  get exited(): Promise<ExitInfo> {
    return this.current.proc.exited;
  }

  /** The last ~4 KiB the current process wrote to stderr. */
  stderrTail(): string {
    return this.current.proc.stderrTail();
  }

  /**
   * Run `task` with `args` (and optional input tensors). Rejects with a WorkerError: the
   * worker's own error, TIMEOUT (`timedOut`), CANCELLED (abort), or WORKER_DIED when the
   * process ends meanwhile — then retried on a fresh process up to `retries` times.
   */
  async run(task: string, args: Record<string, unknown> = {}, options: RunOptions = {}): Promise<TaskResult> {
    checkRunOptions(task, options);
    const retries = options.retries ?? 0;
    for (let attempt = 0; ; attempt++) {
      if (attempt > 0 || (!this.current.alive && retries > 0)) await this.freshWorker();
      try {
        return await this.current.run(task, args, options);
      } catch (err) {
        if (!isWorkerDied(err) || attempt >= retries || options.signal?.aborted) throw err;
      }
    }
  }

  /** Stop by escalation (shutdown message, SIGTERM, SIGKILL); resolves when it has exited. */
  async stop(): Promise<ExitInfo> {
    await this.respawning?.catch(() => {});
    const info = await this.current.stop();
    this.onStopped(this);
    return info;
  }

  /** Replace a dead process by a fresh one; concurrent retries share one respawn. */
  private async freshWorker(): Promise<void> {
    if (this.current.alive) {
      // Make sure the old process is gone before its successor takes the name.
      await this.current.stop();
    }
    this.respawning ??= this.relaunch().finally(() => (this.respawning = undefined));
    const next = await this.respawning;
    this.current = next;
  }
}
