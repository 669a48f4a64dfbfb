/**
 * Options of the supervisor, parsed once at the entry point into frozen resolved values;
 * errors name the option, what was expected and what was received.
 */
import type { Tensor } from "../transport/codec.ts";
import type { PhaseMark, Progress } from "../transport/protocol.ts";
import type { ExitInfo } from "./process.ts";

/** How to launch a worker; `--connect <endpoint> --name <name>` is appended to `args`. */
export interface WorkerSpec {
  /** Names the worker in errors and logs, e.g. `python-ort`. */
  name: string;
  command: string;
  args?: string[];
  /** Added to the orchestrator's environment. */
  env?: Record<string, string>;
  cwd?: string;
}

/** A worker's OS process, as {@link SpawnOptions.onProcess} learns of it. */
export interface SpawnedProcess {
  /** The worker's name (from its spec). */
  name: string;
  pid: number;
  /** Resolves when this process has exited. */
  exited: Promise<ExitInfo>;
}

/** Options of {@link Supervisor.spawn} (defaults can be set on the supervisor). */
export interface SpawnOptions {
  /** How long to wait for the worker's hello (default 30000 ms). */
  helloTimeoutMs?: number;
  /** Heartbeat period (default 1000 ms). */
  heartbeatIntervalMs?: number;
  /** Silence after which a worker counts as hung and is killed (default 15000 ms; 0 = never). */
  heartbeatTimeoutMs?: number;
  /** After the shutdown message, wait this long before SIGTERM (default 2000 ms). */
  stopGraceMs?: number;
  /** After SIGTERM, wait this long before SIGKILL (default 2000 ms). */
  killGraceMs?: number;
  /** After a cancel or timeout, how long the worker may take to give up the task before it is killed (default 5000 ms). */
  cancelGraceMs?: number;
  /** Bytes of stderr kept for errors (default 4096). */
  stderrTailBytes?: number;
  /** Forward the worker's stdout/stderr, one prefixed line at a time: true = to stderr. */
  verbose?: boolean | ((line: string) => void);
  /**
   * Called as soon as each OS process of the worker exists, before its hello (so before
   * spawn() resolves), and again for the fresh process of a retry: where a memory sampler
   * starts tracking the pid, so that start-up is measured too. An exception it throws is
   * ignored.
   */
  onProcess?: (p: SpawnedProcess) => void;
}

export interface ResolvedSpawnOptions {
  readonly helloTimeoutMs: number;
  readonly heartbeatIntervalMs: number;
  readonly heartbeatTimeoutMs: number;
  readonly stopGraceMs: number;
  readonly killGraceMs: number;
  readonly cancelGraceMs: number;
  readonly stderrTailBytes: number;
  readonly forward: ((line: string) => void) | undefined;
  readonly onProcess: ((p: SpawnedProcess) => void) | undefined;
}

export const SPAWN_DEFAULTS = Object.freeze({
  helloTimeoutMs: 30_000,
  heartbeatIntervalMs: 1_000,
  heartbeatTimeoutMs: 15_000,
  stopGraceMs: 2_000,
  killGraceMs: 2_000,
  cancelGraceMs: 5_000,
  stderrTailBytes: 4_096,
});

/** Options of {@link WorkerHandle.run}. */
export interface RunOptions {
  /** Input tensors, sent as raw frames. */
  tensors?: Record<string, Tensor>;
  onProgress?: (progress: Progress) => void;
  onPhase?: (mark: PhaseMark) => void;
  /** Reject with a TIMEOUT WorkerError (timedOut) and cancel the task after this long. */
  timeoutMs?: number;
  /** Aborting cancels the task and rejects with a CANCELLED WorkerError. */
  signal?: AbortSignal;
  /** Times to run the task again on a fresh worker if the worker dies (WORKER_DIED); default 0. */
  retries?: number;
}

/** What a task answered. */
export interface TaskResult {
  value: Record<string, unknown>;
  tensors: Record<string, Tensor>;
  /** Phase marks in arrival order (start and end). */
  phases: PhaseMark[];
  /** The pid of the worker process that ran it (differs from the first after a retry). */
  workerPid: number;
}

const describe = (x: unknown): string => (typeof x === "function" ? "a function" : JSON.stringify(x) ?? String(x));

export function optionError(where: string, option: string, expected: string, got: unknown): TypeError {
  return new TypeError(`${where} option \`${option}\`: expected ${expected}, got ${describe(got)}`);
}

function ms(where: string, o: Record<string, unknown>, key: string, fallback: number, allowZero = false): number {
  const v = o[key];
  if (v === undefined) return fallback;
  if (typeof v !== "number" || !Number.isFinite(v) || v < 0 || (!allowZero && v === 0)) {
    throw optionError(where, key, allowZero ? "a number >= 0" : "a number > 0", v);
  }
  return v;
}

export function resolveSpawnOptions(options: SpawnOptions = {}, base?: ResolvedSpawnOptions): ResolvedSpawnOptions {
  const d = base ?? { ...SPAWN_DEFAULTS, forward: undefined, onProcess: undefined };
  const o = options as Record<string, unknown>;
  const w = "spawn";
  let forward = d.forward;
  if (options.verbose === true) forward = (line) => process.stderr.write(`${line}\n`);
  else if (options.verbose === false) forward = undefined;
  else if (typeof options.verbose === "function") forward = options.verbose;
  else if (options.verbose !== undefined) throw optionError(w, "verbose", "a boolean or a function", options.verbose);
  if (options.onProcess !== undefined && typeof options.onProcess !== "function") throw optionError(w, "onProcess", "a function", options.onProcess);
  return Object.freeze({
    helloTimeoutMs: ms(w, o, "helloTimeoutMs", d.helloTimeoutMs),
    heartbeatIntervalMs: ms(w, o, "heartbeatIntervalMs", d.heartbeatIntervalMs),
    heartbeatTimeoutMs: ms(w, o, "heartbeatTimeoutMs", d.heartbeatTimeoutMs, true),
    stopGraceMs: ms(w, o, "stopGraceMs", d.stopGraceMs, true),
    killGraceMs: ms(w, o, "killGraceMs", d.killGraceMs, true),
    cancelGraceMs: ms(w, o, "cancelGraceMs", d.cancelGraceMs, true),
    stderrTailBytes: ms(w, o, "stderrTailBytes", d.stderrTailBytes),
    forward,
    onProcess: options.onProcess ?? d.onProcess,
  });
}

export function checkSpec(spec: WorkerSpec): WorkerSpec {
  const w = "worker spec";
  if (typeof spec !== "object" || spec === null) throw optionError(w, "spec", "an object", spec);
  if (typeof spec.name !== "string" || !/^[\w.@-]+$/.test(spec.name)) {
    throw optionError(w, "name", "a non-empty name of letters, digits, . _ @ -", spec.name);
  }
  if (typeof spec.command !== "string" || spec.command.length === 0) throw optionError(w, "command", "a non-empty string", spec.command);
  if (spec.args !== undefined && !(Array.isArray(spec.args) && spec.args.every((a) => typeof a === "string"))) {
    throw optionError(w, "args", "an array of strings", spec.args);
  }
  if (spec.env !== undefined && (typeof spec.env !== "object" || spec.env === null)) throw optionError(w, "env", "an object of strings", spec.env);
  return spec;
}

export function checkRunOptions(task: string, options: RunOptions): void {
  const w = `run(${JSON.stringify(task)})`;
  if (typeof task !== "string" || task.length === 0) throw optionError("run", "task", "a non-empty task name", task);
  if (options.timeoutMs !== undefined && !(typeof options.timeoutMs === "number" && options.timeoutMs > 0)) {
    throw optionError(w, "timeoutMs", "a number > 0", options.timeoutMs);
  }
  if (options.retries !== undefined && !(Number.isInteger(options.retries) && options.retries >= 0)) {
    throw optionError(w, "retries", "an integer >= 0", options.retries);
  }
  if (options.signal !== undefined && !(options.signal instanceof AbortSignal)) throw optionError(w, "signal", "an AbortSignal", options.signal);
}
