/**
 * The one error type for everything that goes wrong with a worker or its tasks.
 */
import { ErrorCode, errorCodeName } from "../transport/protocol.ts";

/** Which worker an error came from. */
export interface WorkerIdentity {
  name: string;
  pid: number | undefined;
}

/** Fields of a {@link WorkerError} beyond its message. */
export interface WorkerErrorInit {
  code: number;
  worker: WorkerIdentity;
  task?: string;
  taskId?: string;
  cause?: unknown;
  exitCode?: number;
  signal?: NodeJS.Signals;
  timedOut?: boolean;
  stderrTail?: string;
  details?: Record<string, unknown>;
  traceback?: string;
}

/**
 * A worker failed, refused, timed out or died. `code` is the protocol error code
 * (`codeName` its name, e.g. `WORKER_DIED`); `exitCode`/`signal` are set when the worker's
 * process ended; `stderrTail` holds its last ~4 KiB of stderr; `traceback` is the worker's
 * own stack trace when it reported the error itself.
 */
export class WorkerError extends Error {
  override readonly name = "WorkerError";
  readonly code: number;
  readonly codeName: string;
  readonly worker: WorkerIdentity;
  readonly task: string | undefined;
  readonly taskId: string | undefined;
  readonly exitCode: number | undefined;
  readonly signal: NodeJS.Signals | undefined;
  readonly timedOut: boolean;
  readonly stderrTail: string;
  readonly details: Record<string, unknown> | undefined;
  readonly traceback: string | undefined;

  constructor(message: string, init: WorkerErrorInit) {
    super(message, init.cause === undefined ? undefined : { cause: init.cause });
    this.code = init.code;
    this.codeName = errorCodeName(init.code);
    this.worker = { ...init.worker };
    this.task = init.task;
    this.taskId = init.taskId;
    this.exitCode = init.exitCode;
    this.signal = init.signal;
    this.timedOut = init.timedOut ?? false;
    this.stderrTail = init.stderrTail ?? "";
    this.details = init.details;
    this.traceback = init.traceback;
  }

  /** The same failure seen from one task: names the task and keeps the rest. */
  forTask(task: string, taskId: string, message = this.message): WorkerError {
    return new WorkerError(message, { ...this.fields(), task, taskId });
  }

  private fields(): WorkerErrorInit {
    const init: WorkerErrorInit = { code: this.code, worker: this.worker, timedOut: this.timedOut, stderrTail: this.stderrTail };
    if (this.cause !== undefined) init.cause = this.cause;
    if (this.exitCode !== undefined) init.exitCode = this.exitCode;
    if (this.signal !== undefined) init.signal = this.signal;
    if (this.details !== undefined) init.details = this.details;
    if (this.traceback !== undefined) init.traceback = this.traceback;
    return init;
  }
}

/** `worker "python-ort" (pid 123)` */
export const describeWorker = (w: WorkerIdentity): string =>
  `worker "${w.name}"${w.pid === undefined ? "" : ` (pid ${w.pid})`}`;

/** How a process ended, in words: `was killed by SIGKILL` / `exited with code 3`. */
export function describeExit(exitCode: number | undefined, signal: string | undefined): string {
  if (signal) return `was killed by ${signal}`;
  if (exitCode !== undefined) return `exited with code ${exitCode}`;
  return "ended";
}

export const isWorkerDied = (err: unknown): boolean => err instanceof WorkerError && err.code === ErrorCode.WORKER_DIED;
