/** Prints a failed command's error with what the user needs: stage, worker, pid, signal. */
import { OptionError } from "../pipeline/options.ts";
import { PipelineDefinitionError, StageError } from "../pipeline/scheduler.ts";

interface WorkerErrorLike {
  message: string;
  codeName?: string;
  worker?: { name: string; pid: number | undefined };
  task?: string;
  signal?: string;
  exitCode?: number;
  timedOut?: boolean;
  stderrTail?: string;
  traceback?: string;
}

function tail(text: string, lines: number): string {
  return text.trimEnd().split("\n").slice(-lines).map((l) => `    ${l}`).join("\n");
}

export function formatFailure(command: string, err: unknown): string {
  if (err instanceof OptionError || err instanceof PipelineDefinitionError)
    return `memlane ${command}: invalid pipeline: ${err.message}`;
  const out: string[] = [];
  let cause: unknown = err;
  if (err instanceof StageError) {
    out.push(`memlane ${command}: stage "${err.stage}" failed`);
    cause = err.cause;
  } else {
    out.push(`memlane ${command}: failed`);
  }
  const e = (cause ?? {}) as WorkerErrorLike;
  out.push(`  error: ${cause instanceof Error ? cause.message : String(cause)}`);
  if (e.worker) out.push(`  worker: ${e.worker.name}${e.worker.pid !== undefined ? ` (pid ${e.worker.pid})` : ""}`);
  if (e.task) out.push(`  task: ${e.task}`);
  if (e.codeName) out.push(`  code: ${e.codeName}`);
  if (e.signal) out.push(`  signal: ${e.signal}`);
  if (e.exitCode !== undefined && e.exitCode !== null) out.push(`  exit code: ${e.exitCode}`);
  if (e.timedOut) out.push("  timed out: yes");
  if (e.traceback) out.push(`  worker traceback (last lines):\n${tail(e.traceback, 8)}`);
  else if (e.stderrTail) out.push(`  worker stderr (last lines):\n${tail(e.stderrTail, 8)}`);
  if (!e.worker && !e.traceback && cause instanceof Error && cause.stack && process.env.MEMLANE_DEBUG)
    out.push(cause.stack);
  return out.join("\n");
}
