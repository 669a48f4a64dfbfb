/**
 * Runtimes that did not run keep their rows: an `optional` benchmark (every runtime of
 * `memlane compare`) that fails becomes its runtime's row with the error, and the run goes on.
 */
import type { RuntimeNotRun } from "../report/schema.ts";
import { ErrorCode, errorCodeName } from "../transport/protocol.ts";
import { runBenchmark } from "./exec-benchmark.ts";
import type { StageMeta } from "./exec-model.ts";
import type { RunSession } from "./session.ts";
import type { StageDef, UnavailableRuntime } from "./stages.ts";

/** A stage's error as the report records it: protocol code (TASK_FAILED when it has none), its name, the message. */
export function errorOf(err: unknown): { code: number; name: string; message: string } {
  const code = typeof (err as { code?: unknown })?.code === "number" ? (err as { code: number }).code : ErrorCode.TASK_FAILED;
  return { code, name: errorCodeName(code), message: err instanceof Error ? err.message : String(err) };
}

/**
 * A benchmark; an `optional` one that fails (not cancelled) becomes its runtime's row with the
 * error, and the run goes on (compare: runtimes are independent).
 */
export async function benchmarkOrRow(s: RunSession, def: Extract<StageDef, { kind: "benchmark" }>, signal: AbortSignal, meta: StageMeta): Promise<unknown> {
  try {
    return await runBenchmark(s, def, signal, meta);
  } catch (err) {
    if (!def.opts.optional || signal.aborted) throw err;
    const e = errorOf(err);
    meta.summary = `failed: ${e.name}: ${e.message.split("\n")[0]}`;
    const row: UnavailableRuntime = { runtime: def.runtime, available: false, status: "failed", reason: e.message, code: e.code };
    s.unavailable.push(row);
    return row;
  }
}

/** The report's rows of runtimes that did not run. */
export function notRun(s: RunSession): RuntimeNotRun[] {
  return s.unavailable.map((u) => {
    const code = u.code ?? ErrorCode.BACKEND_UNAVAILABLE;
    return { name: u.runtime, status: u.status ?? "unavailable", error: { code, name: errorCodeName(code), message: u.reason } };
  });
}
