/**
 * Running a pipeline: create runs/<runId>/, start the sampler, schedule the stages (each
 * worker fresh, stopped when its stage ends), compute numerics in one place, build the report
 * with src/report and write report.json, report.md (and report.html where available).
 */
import { existsSync } from "node:fs";
import { Pipeline } from "./builder.ts";
import { runDag, StageError } from "./scheduler.ts";
import { availableMiB, reportEstimates } from "./memory-plan.ts";
import { createRunDir, createScratchDir, removeIfEmpty } from "./run-dir.ts";
import { createProgress } from "./progress.ts";
import { RunSession } from "./session.ts";
import { stageNode } from "./stage-node.ts";
import { ConcurrentRuns } from "./concurrent-runs.ts";
import { onShutdown } from "../workers/cleanup.ts";
import { ErrorCode } from "../transport/protocol.ts";
import { notRun } from "./runtime-rows.ts";
import { referenceRuntime, updateNumerics } from "./numerics.ts";
import { runSummary } from "./summary.ts";
import { budgetLimits } from "./budgets.ts";
import { checkLimits, type LimitCheck } from "../report/limits.ts";
import { baseMessageLimit, checkInt, checkOneOf, OptionError, type PipelineOptions } from "./options.ts";
import type { Io } from "../cli/io.ts";
import type { Report } from "../report/schema.ts";
import { buildReport } from "../report/build.ts";
import { writeReport } from "../report/write.ts";
import { renderTerminal } from "../report/terminal.ts";
import type { GpuProbe } from "../memory/sampler.ts";
import { ShmRegistry } from "../transport/shm.ts";
import { RemoteHosts, type RemoteRunOptions } from "./remote-hosts.ts";
import { parseHostPort } from "../workers/join-protocol.ts";

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
   * Host RAM the stages may take together, MiB (default: MemAvailable at the start): stages
   * with a predicted peak (ONNX runtimes, from this machine's calibration) start together
   * only while their predictions fit, and one predicted above it fails before it starts.
   */
  memoryBudgetMiB?: number;
  /**
   * Input tensors of at least 1 MiB go to workers that read shared memory through /dev/shm
   * segments of this run (default true); false sends every tensor as a frame.
   */
  sharedMemory?: boolean;
  /**
   * Ranks on other hosts (`memlane run --rdzv-endpoint`): a CURVE broker for the multi-host
   * stages (`distributed.nnodes > 1`) and the hosts that `memlane join` it (remote-hosts.ts).
   */
  remote?: RemoteRunOptions;
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
  readonly memoryBudgetMiB: number;
  readonly remote: RemoteRunOptions | undefined;
}

export const RUN_DEFAULTS = Object.freeze({ outDir: "runs", quiet: false });

export function resolveRunOptions(p: Pipeline, opts: RunPipelineOptions): ResolvedRunPipelineOptions {
  const known = ["outDir", "concurrency", "device", "io", "quiet", "signal", "sharedMemory", "memoryBudgetMiB", "remote"];
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
    memoryBudgetMiB: opts.memoryBudgetMiB === undefined ? availableMiB() : checkPositive("memoryBudgetMiB", opts.memoryBudgetMiB),
    remote: opts.remote === undefined ? undefined : checkRemote(opts.remote),
  });
}

function checkRemote(r: unknown): RemoteRunOptions {
  const o = r as Partial<RemoteRunOptions> | null;
  if (typeof o !== "object" || o === null) throw new OptionError("remote", "{ rdzvEndpoint, joinKeyFile?, brokerPort? }", r);
  parseHostPort(String(o.rdzvEndpoint), "remote.rdzvEndpoint");
  if (o.joinKeyFile !== undefined && (typeof o.joinKeyFile !== "string" || o.joinKeyFile === "")) throw new OptionError("remote.joinKeyFile", "a file path", o.joinKeyFile);
  if (o.brokerPort !== undefined && (!Number.isInteger(o.brokerPort) || o.brokerPort < 1 || o.brokerPort > 65535)) throw new OptionError("remote.brokerPort", "a port in 1..65535", o.brokerPort);
  if (o.joinTimeoutMs !== undefined) checkInt("remote.joinTimeoutMs", o.joinTimeoutMs, 1);
  return Object.freeze({ ...o }) as RemoteRunOptions;
}

/** The most other hosts one stage of the pipeline needs (its `distributed.nnodes` - 1). */
function otherHostsNeeded(stages: Pipeline["stages"]): number {
  let most = 0;
  for (const d of stages) {
    const nnodes = d.kind === "train" ? ((d.opts as { distributed?: { nnodes?: number } }).distributed?.nnodes ?? 1) : 1;
    most = Math.max(most, nnodes - 1);
  }
  return most;
}

function checkPositive(option: string, v: unknown): number {
  if (typeof v !== "number" || !Number.isFinite(v) || v <= 0) throw new OptionError(option, "a positive number of MiB", v);
  return v;
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
async function writePng(html: string, io: Io, tmpDir: string): Promise<string | undefined> {
  const png = html.replace(/\.html$/, ".png");
  try {
    const { screenshotReport, screenshotUnavailable } = await import("../report/html/screenshot.ts");
    const why = screenshotUnavailable();
    if (why) {
      io.err(`memlane: report.png skipped: ${why}`);
      return undefined;
    }
    return await screenshotReport(html, png, { tmpDir });
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

/** Runs `p` end to end; rejects with a StageError naming the stage that failed. */
export async function runPipeline(p: Pipeline, opts: RunPipelineOptions = {}): Promise<RunOutcome> {
  // Duck-typed: a pipeline module may load another copy of memlane than the CLI's.
  const q = p as unknown as Partial<Pipeline> | null;
  const looksBuilt = p instanceof Pipeline || (typeof q?.name === "string" && Array.isArray(q?.stages) && typeof q?.options === "object");
  if (!looksBuilt) throw new OptionError("pipeline", "a Pipeline built with pipeline()", p);
  const stages = p.stages; // validates the graph before anything starts
  const { outDir, concurrency, device, io, quiet, signal, sharedMemory, memoryBudgetMiB, remote } = resolveRunOptions(p, opts);
  // A remote broker binds a public port and writes a key file: only for a stage that needs other hosts.
  if (remote && otherHostsNeeded(stages) === 0)
    throw new OptionError("remote.rdzvEndpoint", "a pipeline with a train stage of distributed.nnodes > 1 (no stage here needs other hosts)", remote.rdzvEndpoint);
  const progress = createProgress(io, quiet);
  const outExisted = existsSync(outDir);
  const { runId, runDir } = await createRunDir(outDir);
  // Everything the run starts keeps its temporary files in runs/<runId>/.tmp, removed at the end.
  const scratch = createScratchDir(runDir);
  const others = new ConcurrentRuns(runId);
  // Ctrl-C / SIGTERM (with the CLI's handlers): the stages are cancelled, and the signal's
  // exit waits until the run has written its partial report.
  const interrupt = new AbortController();
  const dagSignal = signal ? AbortSignal.any([signal, interrupt.signal]) : interrupt.signal;
  const running = runInDir(p, stages, { concurrency, device, io, signal: dagSignal, sharedMemory, outDir, memoryBudgetMiB, remote }, progress, runId, runDir, scratch.path, others);
  const forget = onShutdown(async (sig) => {
    interrupt.abort(Object.assign(new Error(`interrupted by ${sig}`), { code: ErrorCode.CANCELLED }));
    await running.catch(() => {});
  });
  try {
    return await running;
  } catch (err) {
    scratch.remove();
    // A failure that wrote nothing (a bad model, an unreadable file) leaves no empty run directory.
    if (removeIfEmpty(runDir) && !outExisted) removeIfEmpty(outDir); // and the runs/ it made
    throw err;
  } finally {
    forget();
    others.close();
    scratch.remove();
  }
}

interface RunInDirOptions {
  concurrency: number;
  device: NonNullable<PipelineOptions["device"]>;
  io: Io;
  signal: AbortSignal | undefined;
  sharedMemory: boolean;
  outDir: string;
  memoryBudgetMiB: number;
  remote: RemoteRunOptions | undefined;
}

async function runInDir(
  p: Pipeline,
  stages: Pipeline["stages"],
  { concurrency, device, io, signal, sharedMemory, outDir, memoryBudgetMiB, remote }: RunInDirOptions,
  progress: ReturnType<typeof createProgress>,
  runId: string,
  runDir: string,
  tmpDir: string,
  others: ConcurrentRuns,
): Promise<RunOutcome> {
  // Input tensors of >= 1 MiB reach workers that read shared memory through /dev/shm
  // segments named for this run; the start-up sweep removes those of crashed orchestrators.
  const shm = sharedMemory ? shmRegistry(runId, io) : undefined;
  const s = new RunSession(p.name, runId, runDir, { ...p.options, device }, progress, await gpuProbe(), shm);
  s.tmpDir = tmpDir;
  progress.log(`memlane: pipeline "${p.name}", run ${runId} → ${runDir}`);
  const record = (outcome: "complete" | "failed") =>
    buildReport({
      pipeline: p.name,
      runId,
      training: s.training,
      distributed: s.distributed,
      runtimes: s.runtimes,
      checkpointLoad: s.checkpointLoads,
      tracks: s.sampler.snapshot(),
      stages: s.stages,
      gpu: s.gpuReport(),
      numericsReference: referenceRuntime(s),
      outcome,
      notes: [...others.notes(), ...s.notes],
      runtimesNotRun: notRun(s),
      ...(s.heldout?.model
        ? { inputs: s.heldout.model.inputs.map((i) => ({ name: i.spec.name, dtype: i.spec.dtype, shape: i.spec.shape, batchAxis: i.spec.batchAxis, values: i.values })) }
        : {}),
      ...(s.transport ? { transport: s.transport } : {}),
    });
  try {
    if (remote) {
      // Bound before any stage starts, so that the other hosts can join while this one works.
      // Inside the try: a failure to bind closes the session (sampler, shm registry) like any other.
      s.remote = await RemoteHosts.open(remote, {
        outDir, capacity: otherHostsNeeded(stages), maxMessageBytes: baseMessageLimit(p.options.maxMessageBytes), log: (line) => io.err(line),
      });
    }
    await runDag(stages.map((d) => stageNode(s, d, stages)), { concurrency, memory: { budgetMiB: memoryBudgetMiB }, ...(signal ? { signal } : {}) });
  } catch (err) {
    // Stages never started are part of the record too.
    for (const d of stages)
      if (!s.stages.some((x) => x.name === d.name))
        s.stages.push({ name: d.name, kind: d.kind, worker: "-", pid: null, startMs: 0, endMs: 0, status: "skipped" });
    await s.close();
    progress.close();
    const reason: unknown = signal?.aborted ? signal.reason : undefined;
    if (reason instanceof Error && reason.message.startsWith("interrupted by "))
      s.notes.push(`the run was ${reason.message}: the stages still running were cancelled, those not started skipped.`);
    // What completed before the failure is still worth reading: a partial report, best effort.
    if (s.stages.some((x) => x.status === "ok")) {
      try {
        updateNumerics(s);
        const written = await writeReport(record("failed"), outDir);
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
  const report = record("complete");
  report.estimates = await reportEstimates(report, stages, s);
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
    const png = await writePng(html, io, tmpDir);
    if (png) otherFiles.push(png);
  }
  let table = renderTerminal(report, { width: Math.max(80, Math.min(160, io.columns)) });
  const extra = runSummary(report, s);
  if (extra.length) table = `${table.trimEnd()}\n\n${extra.join("\n")}`;
  const budgetFailures = (report.budgets ?? []).filter((b) => b.status === "exceeded");
  return { runId, runDir, report, reportJson: written.json, otherFiles, table, budgetFailures };
}
