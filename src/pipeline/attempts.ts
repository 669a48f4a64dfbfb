/**
 * Stage retries: a stage whose worker died (a signal, an exit, a timeout) runs again in a
 * fresh worker, up to its `retries`. Only a dead worker is retried: an error the worker
 * reported (a Python exception, a missed minAccuracy) would fail the same way again, and
 * nothing is retried once the run is being stopped (Ctrl-C, another stage failed).
 *
 * Every attempt is recorded with how it ended. A benchmark's figures come from its last
 * (successful) attempt only: an executor adds its runtime row only when it succeeds.
 */
import { ErrorCode } from "../transport/protocol.ts";
import type { StageAttempt } from "../report/schema.ts";
import type { StageDef } from "./stages.ts";
import { OptionError } from "./options.ts";

/** Default retries by stage kind: measurements (benchmark, checkpoint-load) are not retried unless asked. */
export const DEFAULT_RETRIES = Object.freeze({ train: 1, export: 1, python: 1, benchmark: 0, "checkpoint-load": 0 } as const);

/** Upper bound of the `retries` option (a stage runs at most 1 + MAX_RETRIES times). */
export const MAX_RETRIES = 10;

/** The retries of a stage of `kind`: `given` checked (an integer in [0, MAX_RETRIES]), else the default. */
export function resolveRetries(kind: StageDef["kind"], stage: string, given: unknown): number {
  if (given === undefined) return DEFAULT_RETRIES[kind];
  if (typeof given !== "number" || !Number.isInteger(given) || given < 0 || given > MAX_RETRIES)
    throw new OptionError(`stage "${stage}": retries`, `an integer in [0, ${MAX_RETRIES}]`, given);
  return given;
}

interface ExitLike {
  code?: unknown;
  signal?: unknown;
  exitCode?: unknown;
  timedOut?: unknown;
  message?: unknown;
}

/** Whether `err` says the stage's worker (or bridge interpreter) died or timed out. */
export function workerDied(err: unknown): boolean {
  const e = (err ?? {}) as ExitLike;
  return e.code === ErrorCode.WORKER_DIED || e.code === ErrorCode.TIMEOUT || e.timedOut === true;
}

/** How an attempt ended, in a few words: "SIGKILL", "exit code 3", "timed out", "error: ...". */
export function exitCause(err: unknown): string {
  const e = (err ?? {}) as ExitLike;
  if (e.timedOut === true || e.code === ErrorCode.TIMEOUT) return "timed out";
  if (typeof e.signal === "string") return e.signal;
  if (typeof e.exitCode === "number") return `exit code ${e.exitCode}`;
  const message = err instanceof Error ? err.message : String(err);
  return `error: ${message.split("\n")[0]!.slice(0, 200)}`;
}

/** One line for the report's notes about a stage that needed more than one attempt. */
export function retryNote(stage: string, kind: StageDef["kind"], attempts: readonly StageAttempt[]): string {
  const failed = attempts.filter((a) => a.status === "failed");
  const last = attempts.at(-1)!;
  const ended = failed.map((a) => `attempt ${a.attempt} (pid ${a.pid ?? "?"}) ended by ${a.exit}`).join("; ");
  const outcome = last.status === "ok" ? `attempt ${last.attempt} (pid ${last.pid ?? "?"}) succeeded` : `all ${attempts.length} attempts failed`;
  const figures = kind === "benchmark" || kind === "checkpoint-load" ? `; its figures come from attempt ${last.attempt} alone` : "";
  return `stage "${stage}" was retried: ${ended}; ${outcome}${last.status === "ok" ? figures : ""}.`;
}
