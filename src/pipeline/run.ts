/**
 * Running a pipeline: create runs/<runId>/, start the sampler, schedule the stages (each
 * worker fresh, stopped when its stage ends), compute numerics in one place, build the report
 * with src/report and write report.json, report.md (and report.html where available).
 */
import { Pipeline } from "./builder.ts";
import { runDag, StageError, type DagNode } from "./scheduler.ts";
import { createRunDir } from "./run-dir.ts";
import { createProgress } from "./progress.ts";
import { RunSession } from "./session.ts";
import { runExport, runTrain, type StageMeta } from "./exec-model.ts";
import { runBenchmark } from "./exec-benchmark.ts";
import { runCheckpointLoad, runPythonStage } from "./exec-misc.ts";
import { referenceRuntime, updateNumerics } from "./numerics.ts";
import { runSummary } from "./summary.ts";
import { budgetLimits } from "./budgets.ts";
import { checkLimits, type LimitCheck } from "../report/limits.ts";
import { checkInt, checkOneOf, OptionError, type PipelineOptions } from "./options.ts";
import type { StageDef } from "./stages.ts";
import type { Io } from "../cli/io.ts";
import type { Report } from "../report/schema.ts";
import { buildReport } from "../report/build.ts";
import { writeReport } from "../report/write.ts";
import { renderTerminal } from "../report/terminal.ts";
import type { GpuProbe } from "../memory/sampler.ts";
import { ErrorCode, errorCodeName } from "../transport/protocol.ts";
import { ShmRegistry } from "../transport/shm.ts";

/** Options of {@link runPipeline}. */
export interface RunPipelineOptions {
  /** Where run directories go (default "runs"). */
  outDir?: string;
  /** Overrides the pipeline's concurrency. */
  concurrency?: number;
  /** Overrides the pipeline's device ("cpu", "cuda" or "auto"). */
  device?: PipelineOptions["device"];
  /** Where progress and notes go (default: nowhere; the CLI passes the terminal). */
  io?: Io;
  /** No progress lines. */
  quiet?: boolean;
  /** Aborting stops every running stage and its worker. */
  signal?: AbortSignal;
  /**
   * Input tensors of at least 1 MiB go to workers that read shared memory through /dev/shm
   * segments of this run (default true); false sends every tensor as a frame.
   */
  sharedMemory?: boolean;
}

export interface RunOutcome {
  runId: string;
  runDir: string;
  report: Report;
  reportJson: string;
  /** report.md, report.html (when written) and other artifacts worth naming. */
  otherFiles: string[];
  /** The terminal summary (already formatted). */
  table: string;
  /**
   * Declared budgets that were exceeded: the run fails (exit 1) with these. A budget that could
   * not be checked (a GPU figure without a GPU, a runtime that was unavailable) is reported as
   * such in the report and the summary but does not fail the run; `memlane check` is stricter.
   */
  budgetFailures: LimitCheck[];
}

const silentIo: Io = Object.freeze({ out: () => {}, err: () => {}, isTTY: false, redraw: () => {}, columns: 120 });

export interface ResolvedRunPipelineOptions {
  readonly outDir: string;
  readonly concurrency: number;
  readonly device: NonNullable<PipelineOptions["device"]>;
  readonly io: Io;
  readonly quiet: boolean;
  readonly signal: AbortSignal | undefined;
  readonly sharedMemory: boolean;
}

export const RUN_DEFAULTS = Object.freeze({ outDir: "runs", quiet: false });

export function resolveRunOptions(p: Pipeline, opts: RunPipelineOptions): ResolvedRunPipelineOptions {
  const known = ["outDir", "concurrency", "device", "io", "quiet", "signal", "sharedMemory"];
  for (const k of Object.keys(opts)) if (!known.includes(k)) throw new OptionError(`runPipeline options.${k}`, `one of ${known.join(", ")}`, k);
  const outDir = opts.outDir ?? RUN_DEFAULTS.outDir;
  if (typeof outDir !== "string" || outDir === "") throw new OptionError("outDir", "a directory path", outDir);
  if (opts.signal !== undefined && !(opts.signal instanceof AbortSignal)) throw new OptionError("signal", "an AbortSignal", opts.signal);
  if (opts.sharedMemory !== undefined && typeof opts.sharedMemory !== "boolean") throw new OptionError("sharedMemory", "a boolean", opts.sharedMemory);
  return Object.freeze({
    outDir,
    concurrency: opts.concurrency === undefined ? p.options.concurrency : checkInt("concurrency", opts.concurrency, 1),
    device: opts.device === undefined ? p.options.device : checkOneOf("device", opts.device, ["cpu", "cuda", "auto"] as const),
    io: opts.io ?? silentIo,
    quiet: opts.quiet ?? RUN_DEFAULTS.quiet,
    signal: opts.signal,
    sharedMemory: opts.sharedMemory ?? true,
  });
}

async function gpuProbe(): Promise<RunSession["gpuProbe"]> {
  try {
    const { createGpuProbe } = await import("../memory/gpu.ts");
    return createGpuProbe() as GpuProbe as RunSession["gpuProbe"];
  } catch {
    return undefined; // no addon built: GPU figures read "unavailable", with the sampler's reason
  }
}

/** report.png next to report.html; a missing chromium or a failed render is one line, not an error. */
async function writePng(html: string, io: Io): Promise<string | undefined> {
  const png = html.replace(/\.html$/, ".png");
  try {
    const { screenshotReport, screenshotUnavailable } = await import("../report/html/screenshot.ts");
    const why = screenshotUnavailable();
    if (why) {
      io.err(`memlane: report.png skipped: ${why}`);
      return undefined;
    }
    return await screenshotReport(html, png);
  } catch (err) {
    io.err(`memlane: report.png skipped: ${(err as Error).message.split("\n")[0]}`);
    return undefined;
  }
}

function shmRegistry(runId: string, io: Io): ShmRegistry | undefined {
  try {
    return new ShmRegistry({ runId });
  } catch (err) {
    io.err(`memlane: shared memory unavailable, every tensor travels as a frame: ${(err as Error).message}`);
    return undefined;
  }
}

function errorOf(err: unknown): { code: number; name: string; message: string } {
  const code = typeof (err as { code?: unknown })?.code === "number" ? (err as { code: number }).code : ErrorCode.TASK_FAILED;
  return { code, name: errorCodeName(code), message: err instanceof Error ? err.message : String(err) };
}

function node(s: RunSession, def: StageDef): DagNode<unknown> {
  return {
    name: def.name,
    after: def.after,
    exclusive: def.exclusive,
    run: async (signal) => {
      const meta: StageMeta = { kind: def.kind === "python" ? "inline" : def.kind, worker: "python", pid: null };
      const startMs = Date.now();
      s.progress.stageStart(def.name, def.kind === "benchmark" ? `benchmark ${def.runtime}` : def.kind);
      const record = (status: "ok" | "failed" | "cancelled" | "skipped", err?: unknown): void => {
        s.stages.push({
          name: def.name, kind: meta.kind, worker: meta.worker, pid: meta.pid, startMs, endMs: Date.now(), status,
          ...(err !== undefined ? { error: errorOf(err) } : {}),
        });
      };
      try {
        let value: unknown;
        switch (def.kind) {
          case "train": value = await runTrain(s, def, signal, meta); break;
          case "export": value = await runExport(s, def, signal, meta); break;
          case "benchmark": value = await runBenchmark(s, def, signal, meta); updateNumerics(s); break;
          case "checkpoint-load": value = await runCheckpointLoad(s, def, signal, meta); break;
          case "python": value = await runPythonStage(s, def, signal, meta); break;
        }
        s.results.set(def.name, value);
        const unavailable = (value as { available?: boolean } | undefined)?.available === false;
        if (unavailable) {
          const { reason, code } = value as { reason: string; code?: number };
          record("skipped", Object.assign(new Error(reason), { code: code ?? ErrorCode.BACKEND_UNAVAILABLE }));
        } else record("ok");
        s.progress.stageEnd(def.name, meta.summary ?? "");
        return value;
      } catch (err) {
        // Aborted because another stage failed (or Ctrl-C): cancelled, unless it failed on its own.
        const code = (err as { code?: unknown } | null)?.code;
        const cancelled = signal.aborted && (code === ErrorCode.CANCELLED || typeof code !== "number");
        record(cancelled ? "cancelled" : "failed", err);
        s.progress.stageEnd(def.name, cancelled ? "cancelled" : err instanceof Error ? err.message.split("\n")[0]! : String(err), true);
        throw err;
      }
    },
  };
}

/** Runs `p` end to end; rejects with a StageError naming the stage that failed. */
export async function runPipeline(p: Pipeline, opts: RunPipelineOptions = {}): Promise<RunOutcome> {
  // Duck-typed: a pipeline module may load another copy of memlane than the CLI's.
  const q = p as unknown as Partial<Pipeline> | null;
  const looksBuilt = p instanceof Pipeline || (typeof q?.name === "string" && Array.isArray(q?.stages) && typeof q?.options === "object");
  if (!looksBuilt) throw new OptionError("pipeline", "a Pipeline built with pipeline()", p);
  const stages = p.stages; // validates the graph before anything starts
  const { outDir, concurrency, device, io, quiet, signal, sharedMemory } = resolveRunOptions(p, opts);
  const progress = createProgress(io, quiet);
  const { runId, runDir } = await createRunDir(outDir);
  // Input tensors of >= 1 MiB reach workers that read shared memory through /dev/shm
  // segments named for this run; the start-up sweep removes those of crashed orchestrators.
  const shm = sharedMemory ? shmRegistry(runId, io) : undefined;
  const s = new RunSession(p.name, runId, runDir, { ...p.options, device }, progress, await gpuProbe(), shm);
  progress.log(`memlane: pipeline "${p.name}", run ${runId} → ${runDir}`);
  const record = () =>
    buildReport({
      pipeline: p.name,
      runId,
      training: s.training,
      runtimes: s.runtimes,
      checkpointLoad: s.checkpointLoads,
      tracks: s.sampler.snapshot(),
      stages: s.stages,
      gpu: s.gpuReport(),
      numericsReference: referenceRuntime(s),
      ...(s.transport ? { transport: s.transport } : {}),
      ...(s.transportNote ? { notes: [s.transportNote] } : {}),
    });
  try {
    await runDag(stages.map((d) => node(s, d)), { concurrency, ...(signal ? { signal } : {}) });
  } catch (err) {
    // Stages never started are part of the record too.
    for (const d of stages)
      if (!s.stages.some((x) => x.name === d.name))
        s.stages.push({ name: d.name, kind: d.kind, worker: "-", pid: null, startMs: 0, endMs: 0, status: "skipped" });
    await s.close();
    progress.close();
    // What completed before the failure is still worth reading: a partial report, best effort.
    if (s.stages.some((x) => x.status === "ok")) {
      try {
        updateNumerics(s);
        const written = await writeReport(record(), outDir);
        io.err(`memlane: partial report of the completed stages: ${written.json}`);
      } catch {
        // The failure left nothing reportable (e.g. no completed phase): no partial report.
      }
    }
    throw err instanceof StageError ? err : new StageError("(run)", err);
  }
  await s.close();
  progress.close();
  updateNumerics(s);
  if (shm?.sent.tensors)
    s.notes.push(
      `shared memory: ${shm.sent.tensors} input tensor(s), ${(shm.sent.bytes / 2 ** 20).toFixed(2)} MiB, mapped from /dev/shm instead of sent through the socket; ` +
        `${shm.made.segments} segment(s) of ${(shm.made.bytes / 2 ** 20).toFixed(2)} MiB, unlinked.`,
    );
  if (s.transportNote) s.notes.push(s.transportNote);
  const report = record();
  const limits = budgetLimits(stages);
  if (limits.length > 0) report.budgets = checkLimits(report, limits);
  const written = await writeReport(report, outDir);
  const otherFiles = [written.markdown];
  let html: string | undefined;
  try {
    const { writeHtmlReport } = await import("../report/html/index.ts");
    otherFiles.push((html = await writeHtmlReport(runDir)));
  } catch (err) {
    // report.json and report.md are written; a rendering bug must not fail the run, but it
    // must be seen (a silent catch once hid one).
    io.err(`memlane: report.html not written: ${(err as Error).message.split("\n")[0]} (retry with \`memlane report ${runDir}\`)`);
  }
  if (html) {
    const png = await writePng(html, io);
    if (png) otherFiles.push(png);
  }
  let table = renderTerminal(report, { width: Math.max(80, Math.min(160, io.columns)) });
  const extra = runSummary(report, s);
  if (extra.length) table = `${table.trimEnd()}\n\n${extra.join("\n")}`;
  const budgetFailures = (report.budgets ?? []).filter((b) => b.status === "exceeded");
  return { runId, runDir, report, reportJson: written.json, otherFiles, table, budgetFailures };
}
