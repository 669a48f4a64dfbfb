/** Executors of checkpoint-load (one fresh worker per method) and python stages (pythonia). */
import { rm } from "node:fs/promises";
import { register } from "../workers/cleanup.ts";
import { openPythonBridge, pythonError } from "../workers/python-bridge.ts";
import { withProcessTmpdir } from "../workers/process-tmpdir.ts";
import { describeExit, WorkerError } from "../workers/worker-error.ts";
import { ErrorCode } from "../transport/protocol.ts";
import type { StageMeta, TrainResult } from "./exec-model.ts";
import { pythonWorker } from "./exec-model.ts";
import type { RunSession } from "./session.ts";
import { CHECKPOINT_METHODS, type CheckpointMethod, type StageContext, type StageDef } from "./stages.ts";

export async function runCheckpointLoad(
  s: RunSession,
  stage: Extract<StageDef, { kind: "checkpoint-load" }>,
  signal: AbortSignal,
  meta: StageMeta,
): Promise<Array<{ method: CheckpointMethod; pid: number; bytes: number }>> {
  meta.kind = "checkpoint.load";
  meta.worker = "python";
  const onWorker = (w: { pid: number | undefined }): void => void (meta.pid = w.pid ?? null);
  const methods = stage.opts.methods ?? [...CHECKPOINT_METHODS];
  const steps = methods.length + (stage.opts.zoo !== undefined ? 1 : 0);
  let i = 0;
  const seed = stage.opts.seed ?? 0;
  const zooDir = stage.opts.zoo !== undefined ? s.artifact(`zoo-checkpoint-seed${seed}`) : null;
  const out: Array<{ method: CheckpointMethod; pid: number; bytes: number }> = [];
  const recorded = s.checkpointLoads.length;
  try {
    let source: { arch: string; checkpoint: string; checkpointPt: string };
    if (stage.opts.zoo !== undefined) {
      // Written by its own worker, so no load below starts with the writer's pages.
      const run = await s.runTask(
        { ...pythonWorker(`${stage.name}-write`), label: `zoo.checkpoint ${stage.opts.zoo}` },
        "zoo.checkpoint",
        { arch: stage.opts.zoo, seed, outDir: zooDir },
        { signal, onWorker },
      );
      source = { arch: stage.opts.zoo, ...(run.result.value as { checkpoint: string; checkpointPt: string }) };
      s.progress.update(stage.name, ++i, steps, `zoo.checkpoint ${stage.opts.zoo}`);
    } else {
      const trained = s.results.get(stage.opts.from!) as TrainResult | undefined;
      if (!trained?.checkpoint) throw new Error(`checkpoint-load needs the train stage "${stage.opts.from}", which did not run`);
      source = trained;
    }
    // One method at a time, each in a fresh worker: a load's RSS must not include another's.
    for (const method of methods) {
      const checkpoint = method === "safetensors" ? source.checkpoint : source.checkpointPt;
      const run = await s.runTask(
        { ...pythonWorker(`load-${method.replace(/[^\w.-]/g, "-")}`), label: `checkpoint.load ${method}` },
        "checkpoint.load",
        { arch: source.arch, checkpoint, method },
        { signal, onWorker },
      );
      const bytes = Number((run.result.value as { bytes: number }).bytes);
      s.checkpointLoads.push({ method, arch: source.arch, pid: run.pid, bytes, marks: run.result.phases });
      out.push({ method, pid: run.pid, bytes });
      s.progress.update(stage.name, ++i, steps, method);
    }
    meta.summary = `${source.arch}: ${methods.join(", ")}`;
  } catch (err) {
    // A retry measures every method again: no row of a failed attempt stays in the report.
    s.checkpointLoads.splice(recorded);
    throw err;
  } finally {
    // Regenerable from the seed, and ~90 MiB (resnet18, both formats): not kept in the run dir.
    if (zooDir !== null) await rm(zooDir, { recursive: true, force: true });
  }
  return out;
}

export async function runPythonStage(
  s: RunSession,
  stage: Extract<StageDef, { kind: "python" }>,
  signal: AbortSignal,
  meta: StageMeta,
): Promise<unknown> {
  meta.kind = "inline";
  meta.worker = "python-bridge";
  // The interpreter inherits the process's environment: its TMPDIR is the run's scratch dir.
  const handle = await withProcessTmpdir(s.tmpDir, () => openPythonBridge({ onProcess: (p) => s.trackProcess(p.pid, stage.name, p.exited) }));
  meta.pid = handle.pid;
  // Registered like a worker: Ctrl-C and process exit stop it too.
  const unregister = register({ stop: () => handle.close(), killNow: () => {
      try {
        process.kill(handle.pid, "SIGKILL");
      } catch {
        // already gone
      }
    },
  });
  const ctx: StageContext = {
    runId: s.runId,
    runDir: s.runDir,
    results: s.results,
    heldout: () => s.heldout,
    benchmark: (runtime) => s.benchmarks.get(runtime) ?? null,
    writeArtifact: (name, data) => s.writeArtifact(name, data),
    // Printed after the final table (and kept out of the progress lines, to print it once).
    log: (line) => void s.notes.push(line),
    signal,
  };
  const aborted = new Promise<never>((_, reject) => {
    const onAbort = (): void => reject(signal.reason ?? new Error(`stage "${stage.name}" aborted`));
    if (signal.aborted) onAbort();
    else signal.addEventListener("abort", onAbort, { once: true });
  });
  aborted.catch(() => {});
  // A call pending when the interpreter dies never settles (pythonia does not reject it):
  // the interpreter's exit fails the stage, as a dead worker (retried like one).
  let finished = false;
  const died = handle.exited.then(({ exitCode, signal: sig }) => {
    if (finished) return new Promise<never>(() => {});
    throw new WorkerError(`the python bridge's interpreter (pid ${handle.pid}) ${describeExit(exitCode ?? undefined, sig ?? undefined)} during stage "${stage.name}"`, {
      code: ErrorCode.WORKER_DIED,
      worker: { name: "python-bridge", pid: handle.pid },
      ...(exitCode !== null ? { exitCode } : {}),
      ...(sig !== null ? { signal: sig } : {}),
    });
  });
  died.catch(() => {});
  try {
    const value = await Promise.race([
      stage.fn(handle.bridge, ctx).catch((err: unknown) => {
        throw pythonError(err);
      }),
      aborted,
      died,
    ]);
    finished = true;
    if (value !== undefined)
      await s.writeArtifact(`${stage.name}.json`, JSON.stringify(value, (_k, v) => (typeof v === "bigint" ? Number(v) : v), 2));
    return value;
  } finally {
    finished = true;
    await handle.close();
    unregister();
  }
}
