/**
 * One stage as a node of the DAG: runs its executor, retries it in a fresh worker when its
 * worker dies (attempts.ts), and records it for the report: status, error, every attempt.
 */
import { predictStagePeak } from "./memory-plan.ts";
import type { DagNode } from "./scheduler.ts";
import type { RunSession } from "./session.ts";
import { runExport, runTrain, type StageMeta } from "./exec-model.ts";
import { runDistributedTrain } from "./distributed/exec.ts";
import { benchmarkOrRow, errorOf } from "./runtime-rows.ts";
import { runCheckpointLoad, runPythonStage } from "./exec-misc.ts";
import { updateNumerics } from "./numerics.ts";
import { exitCause, retryNote, workerDied } from "./attempts.ts";
import type { StageDef, UnavailableRuntime } from "./stages.ts";
import type { StageAttempt } from "../report/schema.ts";
import { ErrorCode } from "../transport/protocol.ts";
import { shutdownStarted } from "../workers/cleanup.ts";

async function runOnce(s: RunSession, def: StageDef, signal: AbortSignal, meta: StageMeta): Promise<unknown> {
  switch (def.kind) {
    case "train": return def.opts.distributed ? runDistributedTrain(s, def, signal, meta) : runTrain(s, def, signal, meta);
    case "export": return runExport(s, def, signal, meta);
    case "benchmark": {
      const value = await benchmarkOrRow(s, def, signal, meta);
      updateNumerics(s);
      return value;
    }
    case "checkpoint-load": return runCheckpointLoad(s, def, signal, meta);
    case "python": return runPythonStage(s, def, signal, meta);
  }
}

/** `stages`: the whole pipeline, for a prediction that needs the stage a benchmark takes its model from. */
export function stageNode(s: RunSession, def: StageDef, stages: readonly StageDef[]): DagNode<unknown> {
  return {
    name: def.name,
    after: def.after,
    exclusive: def.exclusive,
    predictPeak: () => predictStagePeak(s, def, stages),
    run: async (signal) => {
      const meta: StageMeta = { kind: def.kind === "python" ? "inline" : def.kind, worker: "python", pid: null };
      const startMs = Date.now();
      const attempts: StageAttempt[] = [];
      s.progress.stageStart(def.name, def.kind === "benchmark" ? `benchmark ${def.runtime}` : def.kind);
      const record = (status: "ok" | "failed" | "cancelled" | "skipped", err?: unknown): void => {
        s.stages.push({
          name: def.name, kind: meta.kind, worker: meta.worker, pid: meta.pid, startMs, endMs: Date.now(), status,
          ...(err !== undefined ? { error: errorOf(err) } : {}),
          attempts,
        });
        if (attempts.length > 1) s.notes.push(retryNote(def.name, def.kind, attempts));
      };
      for (let attempt = 1; ; attempt++) {
        const attemptStart = Date.now();
        meta.pid = null;
        try {
          const value = await runOnce(s, def, signal, meta);
          attempts.push({ attempt, pid: meta.pid, startMs: attemptStart, endMs: Date.now(), status: "ok", exit: null });
          s.results.set(def.name, value);
          const unavailable = (value as { available?: boolean } | undefined)?.available === false;
          if (unavailable) {
            const { reason, code, status } = value as UnavailableRuntime;
            record(status === "failed" ? "failed" : "skipped", Object.assign(new Error(reason), { code: code ?? ErrorCode.BACKEND_UNAVAILABLE }));
          } else record("ok");
          s.progress.stageEnd(def.name, meta.summary ?? "", (value as UnavailableRuntime | undefined)?.status === "failed");
          return value;
        } catch (err) {
          // Aborted because another stage failed (or Ctrl-C): cancelled, unless it failed on its own.
          const code = (err as { code?: unknown } | null)?.code;
          const cancelled = signal.aborted && (code === ErrorCode.CANCELLED || typeof code !== "number");
          attempts.push({ attempt, pid: meta.pid, startMs: attemptStart, endMs: Date.now(), status: cancelled ? "cancelled" : "failed", exit: cancelled ? "cancelled" : exitCause(err) });
          // Never during a Ctrl-C/SIGTERM shutdown: its workers die on purpose.
          if (!cancelled && !signal.aborted && !shutdownStarted() && workerDied(err) && attempt <= def.retries) {
            s.progress.log(`memlane: stage "${def.name}" attempt ${attempt} ended by ${exitCause(err)} (pid ${meta.pid ?? "?"}); retrying in a fresh worker (${attempt} of ${def.retries} retries)`);
            continue;
          }
          record(cancelled ? "cancelled" : "failed", err);
          s.progress.stageEnd(def.name, cancelled ? "cancelled" : err instanceof Error ? err.message.split("\n")[0]! : String(err), true);
          throw err;
        }
      }
    },
  };
}
