/**
 * Calibration: the fixed costs of each runtime (imports, library loads, a session) and how
 * its phases grow with weights, activations and the eval set, measured on THIS machine by
 * running the probes (probe-models.ts) through `compare`'s own pipeline, real workers and
 * all, then fitted per runtime, phase and counter (fit.ts). Cached under the user's cache
 * directory, keyed by the library versions, CPU and kernel (cache.ts); `memlane estimate
 * --calibrate` redoes it.
 *
 * Each probe runs in a fresh `memlane compare` process: node-ort's figures are the
 * orchestrator's own process, whose heap would otherwise carry every earlier probe's eval
 * set (a first calibration that ran the probes in one process put node-ort's import phase
 * anywhere between 142 and 686 MiB for the same runtime).
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import type { Io } from "../cli/io.ts";
import type { Runtime } from "../pipeline/stages.ts";
import type { PhaseReport, Report } from "../report/schema.ts";
import { PIPELINE_DEFAULTS } from "../pipeline/options.ts";
import { Phase } from "../transport/protocol.ts";
import { register } from "../workers/cleanup.ts";
import { REPO_ROOT } from "../workers/specs.ts";
import { describeSharing, processesSharingRuntimeLibraries } from "./calibration-sharing.ts";
import { FEATURE_NAMES, type Fit, fitLinear } from "./fit.ts";
import { type Features, features, isOrtRuntime, type ModelTerms, modelTerms, requestsPerBatch, type RunShape } from "./model-terms.ts";
import { probeOrtLoad } from "./ort-load.ts";
import { PROBES, type Probe, writeProbes } from "./probe-models.ts";

/** The ONNX runtimes calibration measures (python-torch runs a module, not an ONNX file). */
export const CALIBRATED_RUNTIMES = ["python-ort", "node-ort", "native"] as const satisfies readonly Runtime[];

/** The counters an estimate predicts per phase, read from a report phase. */
export const COUNTERS = Object.freeze({
  rss: (p: PhaseReport) => p.rssMiB,
  uss: (p: PhaseReport) => p.ussMiB,
  pss: (p: PhaseReport) => p.pssMiB,
  peak: (p: PhaseReport) => p.peakRssMiB,
});
export type Counter = keyof typeof COUNTERS;

export const CALIBRATION_FORMAT = 56; // 56: the ORT arena replay takes a tensor of a fixed size from the stale pattern's block, not the arena, in a request whose batch finds another's pattern (ort-arena.ts): GPT-2's position embeddings moved where its held eval outputs went (python-ort steady -6.9 % at opset 14); 55: the ORT replay folds a Gemm's activation into it as ORT's GemmActivationFusion does (ort-fusions.ts, FusedGemm): OPT reshapes its tokens to rows at run time before fc1, so its Relu got no buffer in place, and its replayed pattern was 1.86x ORT's block; 54: node-ort's peak beyond its end figures is the middle of its dead requests' outputs collected before the eval pass's chunks and copy pile up and not (node-ort-outputs.ts nodePeakBeyondEndMiB): seven encoders of hidden 128 measured 20 to 32 MiB where the first outcome says 16 (peaks -3.3 to -7.8 %); 53: the ORT replay fuses a LayerNorm written out (mean, difference, variance, root, quotient, scale, bias) into one LayerNormalization, and x / Sqrt(mean(x^2) + eps) * scale into one SimplifiedLayerNormalization, as ORT's layer_norm_fusion does (ort-fusions-transformer.ts): I-BERT's requests of a stale pattern took the chain's tensors one by one, and its eval pass then grew the arena 16 MiB in ORT and none in the replay (python-ort steady -9.1 %); 52: the ORT replay moves a Transpose through a Softmax (opset 13 on) where a Transpose follows (ort-transposes.ts AXIS_OPS), and a permute of a fused q, k, v projection after each Gather of one index, the graph then walked again in ORT's order: CaiT's talking heads cancel theirs, its projection dies before the scores, and its replayed pattern went from 1.37x ORT's block to 1.00x (python-ort steady +20.7 %); and node-ort's dead requests count on its peak beyond the eval set's outputs, which come after them (node-ort-outputs.ts nodePeakBeyondEndMiB: small encoders' peaks were +4 to +12 %); 51: the ORT replay removes no-op arithmetic as ORT's NoopElimination does (ort-noop-elimination.ts: x + 0, x * 1, x - 0, x / 1): timm's unreparameterized MobileOne sums each block from `scale + 0`, and its pattern was 4.59 MiB a sample where ORT's is 2.87, python-ort and node-ort +56 % steady; 50: node-ort's dead requests below the load's mmap threshold are a coin, not trimmed, where the eval pass's chunks fit in the room they left (node-ort-outputs.ts nodeDeadOutputKept): RoBERTa, DeBERTa-v2, MPNet and RoFormer (hidden 128) at compare's defaults were -6.6 to -7.9 % steady; 49: memlane-rt's batch tail counts the bytes its fused kernels write, and its kernels' workspace at the largest batch where it outgrows the chunks' (the load result's batchTailUnwrittenBytesPerSample, batchTailWorkspaceBytesByBatch): mobilenet_v2 at batches 1,64 was +3.7 % steady; 48: memlane-rt's eval-set tensors under the shared-memory threshold travel in the task's message, resident from runtime-create (model-terms.ts socketEvalMiB, slope 1 at runtime-create and model-load): a GRU's 0.98 MiB set put its runtime-create and model-load 0.9 MiB over; 47: memlane-rt's weights term is its plan's weight bytes for every model (model-terms.ts nativeWeightMiB), not the file's: BiT stores each conv kernel twice for its weight standardisation, 17.5 MiB in the file for 9.0 in the plan, and memlane-rt's steady RSS was +19.9 %; 46: memlane-rt's plan tables (only Gather reads them) are resident by the windows their ids touch, the window measured on the plan (table-reads.ts; their bytes in nativeReleasedMiB, what requests read in firstRequestMiB and mappedWeightMiB): a DLRM's 46 MiB of tables, one id a table a sample, was +250 % at first-inference, +7 % steady; ORT's external tables the same way; 45: the ORT runtimes read a model's external data in place, resident as requests read it (ort-mapped.ts, mappedWeightMiB; the first request's share in firstRequestMiB): a base-size BERT saved with external data was -7.9 / -6.5 % steady; 44: glibc's mmap threshold after ORT's load is the freed block's chunk, a page beyond its size (node-ort-outputs.ts ortLoadMmapThresholdMiB), so node-ort's eval copy of exactly that size comes from the heap and pins the dead requests: RemBERT (hidden 256, 4 MiB copy after a 4 MiB read buffer) was -10.8 % steady; 43: node-ort's dead outputs cost no new pages where the blocks its load left held, after ORT's arena, take them (node-ort-outputs.ts heldServedMiB): a base-size DistilBERT, BERT and RoBERTa (hidden 768) were +5.5, +4.3 and +6.3 % at --batch 1,8 --eval-samples 32; 42: the ORT runtimes' load terms leave out what their load probe's malloc had out or held but never wrote (ort-load.ts untouchedMiB: the arena room a quantized model's pre-packed weights leave), and the arena replay starts from that room (bfc-arena.ts loadFreeBytes): an int8 ResNet-50's model-load was +11 % on both ORT runtimes, its steady RSS at batch 1 +13.7 %; 41: the ORT replay folds a scalar scale of a MatMul input into the FusedMatMul (ORT's MatMulScaleFusion: ESM's pattern was 7.4 % over ORT's); 40: the ORT replay gives no freed buffer to a scalar (ORT's FindReusableTensor refuses a rank-0 shape): SegFormer's pattern was 9.6 % over ORT's block at batch 1, ConvBERT's 24.6 % at batch 64; 39: the ORT replay fuses a Transpose of a MatMul input's last two axes into the MatMul (ORT's MatmulTransposeFusion: SqueezeBERT's pattern at batch 64 was 16.7 % over ORT's); 38: the ORT replay keeps a shape value ORT computes at run time until the node that reads it (ort-run-time.ts withRunTimeReads), reuses buffers for those whose shapes ORT infers from shapes alone, treats Constant nodes' outputs as constants in its unknown-shape rule, makes a Shape of a Transpose's output read the value before it, and runs ORT's order walked on the final graph with ORT's node numbers (ort-order.ts ortOrderOfFinalGraph): PoolFormer's pattern was 8.3 % under ORT's, MobileBERT's 8.3 % and SqueezeBERT's 7.9 % over, DistilBERT's 3.9 % under; 37: the ORT replay keeps Gelu and HardSigmoid blocked, and makes a blocked map's Mul by a constant a channel a blocked node of ORT's (poolformer's layer scales); 36: the ORT replay runs the nodes ORT's NCHWc rewrite adds as ORT numbers them, after every other (ort-order.ts ortOrderAfterRewrite: shufflenet_v2_x2_0's pattern was 17 % under ORT's), and blocks a conv of a block or more input channels only where they are a multiple of 4; 35: memlane-rt's unwritten arena is the backend's own figure (the load result's arenaUnwrittenBytesPerSample, cpu/arena_unwritten.h: every fused kernel), where a TypeScript copy of the 1x1 -> depthwise rule alone missed the MatMul -> Add -> Gelu epilogue (Swin at batches 1,64: +6.1 %); 34: node-ort's peak counts its eval chunks' outputs while they are gathered, or its dead requests' outputs, whichever is more (deadOutputMiB, model-terms.ts nodePeakBeyondEndMiB), and its eval-output slope is 1 on the peak too (fitted 1.64, a decoder LM's peak was -13 % at 256 eval samples); no slope before model-load (memlane-rt's import had fitted 0.005 on the eval outputs: a decoder LM's import +47.9 %); the ORT replay's pattern takes the room between its last live block and its high-water mark as a gap (ORT's MemPatternPlanner; swin and efficientnet_b3 were 9.1 and 15.4 % under ORT's block), and blocks a depthwise conv only when its channels are a multiple of 4 (shufflenet_v2_x2_0's 122): the probes' ORT terms are replayed again; 33: the first request is a term of its own (firstRequestMiB: memlane-rt's outputs and an unchunked plan's arena beyond one sample up to the first batch size, node-ort's outputs held at the mark), slope 1 at first-inference: falcon's first-inference was -12.4 / -29.5 / -49.5 % at batches 1,8 / 2,8 / 4,8 on memlane-rt, -4.0 / -9.6 % at 1,8 / 4,8 on node-ort; 32: node-ort's peak keeps its fitted eval-output slope (1.64: the outputs and their gathered copy alive together; given 1 it put the small models' peaks +8 %); 31: node-ort's eval-output slope is given (1 at steady-inference: its fitted 0.71 left a decoder LM's logits over 256 eval samples 18.9 % short), and its dead requests' chunks are not kept where the eval pass leaves the heap's top free to trim (model-terms.ts evalPassTrimsHeap); 30: node-ort's load terms are its own load probe's (a node-ort child that stops after model-load, ort-load.ts runtime "node-ort"): held, in use, peak above the end and the held blocks its arena finds, where python-ort's probe stood in (resnet18 holds 93.9 MiB after onnxruntime-node's load, 76.3 after Python's), and node-ort's eval set, read into one Buffer after the load, takes a held block first where one holds it (ort-heap-reuse.ts `before`: efficientnet_b1's first-inference was +8.4 %); 29: node-ort's end figures are read after a full collection (node-ort-process.mjs), so its uncollected outputs (deadOutputMiB) count on the peak only and the end figures count those malloc keeps once collected (deadOutputKeptMiB: the outputs below the mmap threshold the largest initializer set): opt's steady RSS moved between 118, 128 and 132 MiB run to run, now 109.4-109.7 in three runs of four (113.4 in the fourth); 28: the ORT runtimes' weights are their load probe's in-use bytes (Features.loadMiB, given slope 1; W and Wconv slopes 0) and their model-load peak adds that probe's peak above its end (loadTransientMiB): swin_t's load was 15 MiB short, its model-load peak +28 %; 27: the ORT replay runs the nodes ORT computes at run time that the compiler folds, at a size that does not grow with the batch (ort-run-time.ts: BEiT's relative-position index), and merges equal constants of up to 8 elements (ort-cse.ts); 26: the ORT replay plans from the shapes a file declares (graph.value_info, ort-pattern.ts declaredShape): the dynamo exporter's LLMs were -8 to -11 % on python-ort; 25: memlane-rt's timed requests write their batch-first outputs into the eval frames (outputBufferMiB keeps only what the frames cannot take, model-terms.ts nativeOutputBufferMiB); 24: ORT's arena regions and handle tables that fit in the blocks the load left held cost no RSS beyond heldMiB (ort-heap-reuse.ts, the load probe's freePieces), where every written page of the replay counted; 23: memlane-rt's model-load peak adds the load probe's own peak above the load's end (nativeLoadTransientMiB, given slope 1 on that counter), not a fitted slope on W; 22: the ORT runtimes' first-inference arena is the replay's after the first request (ortFirstRequestMiB, given slope 1), not a slope fitted on the whole run's arena, and their activation slope is 0 before it (node-ort no longer borrows python-ort's fitted slope); 21: memlane-rt's kernel workspace at one sample is a given term (nativeWorkspaceMiB, from the native load probe), where the activation slope had taken up an im2col conv's columns on a CPU without AVX-512; 20: ORT's common subexpression elimination in the replay (ort-cse.ts); 19: ORT's arena regions cost their handle tables too (1/32 of each, bfc-arena.ts); 18: ORT's layout 0 LSTM, its LSTM and Where kernels' scratch in the arena replay (ort-scratch.ts), and python-ort's eval pass keeping its outputs in the arena (ort-arena.ts EvalPass), so its eval-output slope is the join alone; 17: memlane-rt's kernel workspace beyond one sample (an LSTM's input projections) joins its arena beyond one sample in largestBatchMiB (was wholeBatchArenaMiB); 16: memlane-rt's output buffers (outputBufferMiB), left unzeroed by its worker until the largest batch writes them; 15: node-ort's dead output tensors are a given term (deadOutputMiB, model-terms.ts: nodeDeadOutputMiB), the probes' requests counted; 14: node-ort runs in a child Node process of its own (node-ort-process.mjs), not on the orchestrator's worker_thread; 13: the orchestrator no longer keeps the last plan file it read (msgpackr held the buffer a header view came from), which node-ort's weight slope had taken up; 12: memlane-rt runs a split batch's last ops over the whole batch in an arena of their own (nativeBatchTailPerSampleMiB, from the native load probe); 11: node-ort's held memory is its own (the addon's mallocInfo), not python-ort's, and memlane-rt's load is measured (native-load.ts: nativeLoadMiB, nativeReleasedMiB); 10: node-ort starts from a collected and trimmed orchestrator (collect-garbage.ts); 9: ORT's activations are its arena replayed (ort-arena.ts: resident bytes, not the pattern times a fitted slope), slope 1 at steady-inference; 8: memlane-rt's unchunked arena (wholeBatchArenaMiB, native-chunk.ts); 7: what malloc holds after ORT's load is a measured term (heldMiB, ort-load.ts); 2: node-ort reads its eval chunks as views (node-ort-thread.mjs); 3: ORT activations are its simulated memory pattern (ort-pattern.ts); 4: node-ort's activation slope is python-ort's (fitModels); 5: the eval set's outputs are a term of their own (probe eval-outputs); 6: E is the eval inputs alone
/** The run shape of every probe run: small, so calibration takes about a minute. */
export const PROBE_RUN: Readonly<{ batchSizes: number[]; iterations: number; threads: number }> = Object.freeze({
  batchSizes: [1, 8], iterations: 5, threads: 1,
});

export interface Calibration {
  format: typeof CALIBRATION_FORMAT;
  key: Record<string, string>;
  createdAt: string;
  /** runtime → phase → counter → fit; phases in the order the runtime marked them. */
  models: Record<string, { phases: string[]; fits: Record<string, Record<Counter, Fit>> }>;
  /** What each probe measured, kept so a calibration can be inspected and refitted. */
  probes: Array<{ name: string; features: Record<string, Features>; phases: Record<string, Record<string, Record<Counter, number>>> }>;
  /**
   * The other processes that mapped the runtimes' libraries while the probes ran
   * (calibration-sharing.ts describeSharing): the USS and PSS fits are low by the pages they
   * shared. Absent where none did.
   */
  sharing?: string;
}

/** Runs every probe through compare's pipeline and fits the models. */
export async function calibrate(key: Record<string, string>, io: Pick<Io, "err">, probes: readonly Probe[] = PROBES): Promise<Calibration> {
  const dir = mkdtempSync(join(tmpdir(), "memlane-calibrate-"));
  const measured: Calibration["probes"] = [];
  // Every exit mid-way skips the finally below: a SIGINT/SIGTERM shutdown (which stops the
  // probe's compare, a registered child, before it exits) and an uncaught error (EPIPE on
  // stderr when piped into `head`: the registry's exit hook SIGKILLs the compare). Either way
  // the probes and their runs go with this exit hook (synchronous, as exit hooks are).
  const removeDir = () => rmSync(dir, { recursive: true, force: true });
  process.on("exit", removeDir);
  // Read before the first probe and after the last, when no probe of ours is alive.
  const sharing = new Map(processesSharingRuntimeLibraries().map((p) => [p.pid, p]));
  if (sharing.size > 0) io.err(`memlane estimate: warning: ${describeSharing([...sharing.values()])}; the USS and PSS fits will be low by the pages they share (RSS is not affected): calibrate on a quiet machine (memlane estimate --calibrate)`);
  try {
    const files = writeProbes(dir, probes);
    for (const probe of probes) {
      const file = files.get(probe.name)!;
      const started = Date.now();
      const report = await compareInFreshProcess(file, probe.evalSamples, join(dir, `runs-${probe.name}`));
      const termsOf = await termsByRuntime(report, await modelTerms(file, {}, { nativeLoad: true }));
      const run: RunShape = { maxBatch: Math.max(...PROBE_RUN.batchSizes), batchSizes: PROBE_RUN.batchSizes, evalSamples: probe.evalSamples, calls: requestsPerBatch({ iterations: PROBE_RUN.iterations, warmup: PIPELINE_DEFAULTS.warmup }), threads: PROBE_RUN.threads };
      const entry: Calibration["probes"][number] = { name: probe.name, features: {}, phases: {} };
      for (const row of report.runtimes) {
        entry.features[row.name] = features(row.name, termsOf(row.name), run);
        entry.phases[row.name] = Object.fromEntries(
          row.phases.map((ph) => [ph.name, Object.fromEntries(Object.entries(COUNTERS).map(([c, read]) => [c, read(ph)])) as Record<Counter, number>]),
        );
      }
      measured.push(entry);
      io.err(`memlane estimate: calibrated probe ${probe.name} (${probe.moves}) in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    }
  } finally {
    process.off("exit", removeDir);
    removeDir();
  }
  for (const p of processesSharingRuntimeLibraries()) if (!sharing.has(p.pid)) sharing.set(p.pid, p);
  return {
    format: CALIBRATION_FORMAT, key, createdAt: new Date().toISOString(), models: fitModels(measured), probes: measured,
    ...(sharing.size > 0 ? { sharing: describeSharing([...sharing.values()]) } : {}),
  };
}

/**
 * The probe's held memory as its own run measured it, for `runtime`: its malloc-free growth
 * over model-load (docs/memory.md, "Held by malloc"). Not the load probe's: the same load holds
 * 72, 81 or 90 MiB of the conv probe's 36 MiB in three fresh processes, and a fit against
 * another process's figure would take that scatter as a slope. node-ort reads its own since
 * the addon's mallocInfo: its load holds what python-ort's does in a fresh process, but
 * the orchestrator's malloc history can make it more (the mixed probe: +35 MiB in node-ort,
 * 0 in python-ort), and with python-ort's figure that went into node-ort's intercept (a fit
 * rms of 14.9 MiB at model-load, mlp then +8 % at steady state). Without node-ort's own figure
 * (an addon without mallocInfo) python-ort's stands in; without either, null.
 */
export function measuredHeldMiB(report: Pick<Report, "runtimes">, runtime = "python-ort"): number | null {
  const held = (name: string) => report.runtimes.find((r) => r.name === name)?.phases.find((p) => p.name === Phase.MODEL_LOAD)?.deltaMallocFreeMiB;
  const own = held(runtime);
  const v = typeof own === "number" ? own : held("python-ort");
  return typeof v === "number" ? Math.max(0, v) : null;
}

/**
 * Each ORT runtime's terms with its own measured held memory (measuredHeldMiB), else its load
 * probe's (ort-load.ts: a Python worker for python-ort, a node-ort child for node-ort), and that
 * probe's blocks of it (where the arena lands without growing RSS, ort-heap-reuse.ts): the
 * estimate subtracts them, so the fit must see them too. One probe run a model and runtime:
 * what the subtraction uses is the blocks of 4 MiB and less (the first regions, every table),
 * which resnet18's load left in both of its modes (75.8 and 93.8 MiB held in a bare thread);
 * the modes differ in their 8 MiB blocks.
 */
async function termsByRuntime(report: Report, terms: ModelTerms): Promise<(runtime: string) => ModelTerms> {
  const byRuntime = new Map<string, ModelTerms>();
  for (const r of report.runtimes) {
    if (!isOrtRuntime(r.name)) continue;  // held memory is an ORT runtime's term only
    const measured = measuredHeldMiB(report, r.name);
    // Needed where the run could not measure its held memory; else for the blocks, the in-use
    // bytes and the load's peak above its end (which the run does not measure apart).
    const probed = await probeOrtLoad(terms.file, { runs: 1, runtime: r.name }).catch((err: unknown) => {
      if (measured === null) throw err;
      return null;
    });
    const load = { heldMiB: measured ?? probed!.heldMiB, freePieces: probed?.freePieces ?? null, inUseMiB: probed?.inUseMiB ?? null, peakAboveEndMiB: probed?.peakAboveEndMiB ?? null };
    byRuntime.set(r.name, { ...terms, ortLoad: { [r.name]: load } });
  }
  return (runtime) => byRuntime.get(runtime) ?? terms;
}

/**
 * `memlane compare` on one model in its own orchestrator (the probe run shape unless given);
 * its report. Also what bench:estimate measures with.
 */
export async function compareInFreshProcess(
  file: string, evalSamples: number, outDir: string, shape: { batchSizes: readonly number[]; iterations: number; threads: number } = PROBE_RUN,
): Promise<Report> {
  mkdirSync(outDir, { recursive: true });
  const args = [
    "--import", "tsx", join(REPO_ROOT, "src/cli/main.ts"), "compare", file, "--runtimes", CALIBRATED_RUNTIMES.join(","),
    "--batch", shape.batchSizes.join(","), "--iterations", String(shape.iterations), "--threads", String(shape.threads),
    "--eval-samples", String(evalSamples), "-o", outDir, "-q",
  ];
  // Registered like a worker: a SIGINT/SIGTERM to this process alone (not its group, as a
  // terminal's Ctrl-C would be) stops the compare too, which stops its own workers, instead of
  // leaving it to finish as an orphan; on any other exit it gets SIGKILL.
  const sub = execa(process.execPath, args, { cwd: REPO_ROOT, reject: false, all: true });
  const forget = register({
    stop: async () => {
      sub.kill("SIGTERM");
      await sub;
    },
    killNow: () => void sub.kill("SIGKILL"),
  });
  let child: Awaited<typeof sub>;
  try {
    child = await sub;
  } finally {
    forget();
  }
  const runs = readdirSync(outDir);
  if (child.exitCode !== 0 || runs.length !== 1) {
    // each runtime's failure line (compare's summary: "<runtime>: failed — <why>"), then its last words
    const lines = String(child.all ?? "").split("\n");
    const why = [...lines.filter((l) => /^\S+: failed — /.test(l)).map((l) => l.slice(0, 400)), ...lines.slice(-3)];
    throw new Error(`memlane compare on ${file} failed (exit ${child.exitCode}):\n${why.join("\n")}`);
  }
  return JSON.parse(readFileSync(join(outDir, runs[0]!, "report.json"), "utf8")) as Report;
}

/**
 * The slope on heldMiB (what malloc keeps of ORT's load, ort-load.ts): 1 from model-load on, 0
 * before. It is measured bytes that stay resident (private, anonymous: RSS, USS, PSS and the
 * peak alike), so it is given, not fitted: fitted, it would share the conv-weights probe with
 * Wconv (the one probe that moves either much), and each would take the other's part. Given,
 * the probes' own held memory (36 MiB of conv kernels keep ~90 MiB) leaves Wconv's slope, and
 * resnet18 (45 MiB of weights, 76 held) no longer inherits the probe's ratio.
 */
const BEFORE_LOAD: ReadonlySet<string> = new Set([Phase.IMPORT, Phase.RUNTIME_CREATE]);
const heldSlope = (phase: string) => (BEFORE_LOAD.has(phase) ? 0 : 1);
/**
 * The slope on largestBatchMiB (memlane-rt: what only its largest batch touches, the arena of a
 * plan its CPU backend runs whole and the kernels' workspace beyond one sample, model-terms.ts):
 * 1 at steady-inference, where the largest batch first runs and touches it, 0 before. No
 * probe is unchunkable, so it cannot be fitted; distilbert's steady RSS grew 1.5 MiB more at
 * batches 1,8 than at 1 alone (eval set 64 or 256 samples), its arena beyond a sample 1.53 MiB.
 */
const largestBatchSlope = (phase: string) => (phase === Phase.STEADY_INFERENCE ? 1 : 0);
/**
 * The slopes on node-ort's dead outputs (model-terms.ts), given, not fitted: two probes make any
 * to speak of (eval-outputs and mixed, 256 KiB a sample: 22.5 MiB each over their 10 requests
 * of batch 1 and of 8), too few to tell the terms from the intercept. Both 0 before
 * steady-inference. There, deadOutputMiB (the tensors V8 had not collected yet) counts on the
 * peak; the end figures come after a full collection (node-ort-process.mjs), so only
 * deadOutputKeptMiB (those malloc keeps once collected) counts on them.
 */
const deadOutputSlope = (phase: string, counter: Counter) => (phase === Phase.STEADY_INFERENCE && counter === "peak" ? 1 : 0);
const deadOutputKeptSlope = (phase: string, counter: Counter) => (phase === Phase.STEADY_INFERENCE && counter !== "peak" ? 1 : 0);
/**
 * The slope on outputBufferMiB (memlane-rt's output buffers for one request of the largest
 * batch, rt/tasks_infer.cc): 1 at steady-inference, where the largest batch writes them, 0
 * before. Given: the probes' buffers are at most 2 MiB (eval-outputs at batch 8), where a small
 * GPT-2 export's at batch 64 are 31 MiB.
 */
const outputBufferSlope = (phase: string) => (phase === Phase.STEADY_INFERENCE ? 1 : 0);
/**
 * The slopes on the load probes' terms (native-load.ts, ort-load.ts), given, never fitted.
 * loadMiB (what the model's load leaves resident, measured for the model itself) is resident
 * from model-load on (1; 0 before), like heldMiB.
 * - memlane-rt: its repacked weights. Which weights a probe repacks depends on the CPU (on
 *   AVX-512 every dense layer goes into packed panels, so L is W; on AVX2 nothing is, so L is
 *   ~0), so the probes cannot tell these bytes from W. nativeReleasedMiB, the originals of the
 *   repacked weights, are out of RSS once inference pages the others in, where W's slope counts
 *   them all (-1 from first-inference on, 0 before). resnet18's load: +16.8 MiB (its model-load
 *   measured 24.3 MiB, estimated 8.2 without the term), 9.0 MiB of its plan given back.
 * - ORT: the bytes malloc handed out over the session's creation (weights, their pre-packed
 *   and layout-changed copies, the graph), so W's and Wconv's slopes are 0 for the ORT runtimes
 *   (weightSlopes). Fitted on W and Wconv instead, they held the probes' ratio of in-use bytes
 *   to weights: swin_t's load (109 MiB of MatMul weights, 125 in use) came out 15 MiB short and
 *   shufflenet_v2_x1_0's (channels no multiple of 16, no NCHWc copies) 3.5 MiB short.
 */
const loadSlope = (phase: string) => (BEFORE_LOAD.has(phase) ? 0 : 1);
/**
 * The ORT runtimes' weights are in loadMiB (their load probe's in-use bytes), so W and Wconv are
 * given 0 there; memlane-rt's and torch's are fitted.
 */
const weightSlopes = (runtime: string): { weightMiB?: number; convWeightMiB?: number } =>
  isOrtRuntime(runtime) ? { weightMiB: 0, convWeightMiB: 0 } : {};
/**
 * The slope on nativeWorkspaceMiB (memlane-rt's kernel workspace at one sample, native-load.ts):
 * 1 from first-inference on, where the first request's kernels write it, 0 before (reserved at
 * load, not touched). Given: the probes' workspaces depend on which conv paths the CPU offers
 * (one probe's 18 MiB of im2col columns without AVX-512, none with it).
 */
const nativeWorkspaceSlope = (phase: string) => (BEFORE_LOAD.has(phase) || phase === Phase.MODEL_LOAD ? 0 : 1);
/**
 * The slope on firstRequestMiB (what the first request leaves resident beyond the one-sample
 * terms: memlane-rt's outputs and unchunked arena up to the first batch size, node-ort's
 * outputs held at the mark; model-terms.ts): 1 at first-inference, 0 elsewhere (steady-inference
 * counts them in evalOutputMiB and largestBatchMiB). Given: no probe's first request writes
 * more than 256 KiB of outputs.
 */
const firstRequestSlope = (phase: string) => (phase === Phase.FIRST_INFERENCE ? 1 : 0);
/**
 * The slope on mappedWeightMiB (weights read in place: the ORT runtimes' external data,
 * memlane-rt's plan tables; ort-mapped.ts, table-reads.ts): 1 at steady-inference, where every
 * request and the eval pass have read them, 0 before (the first request's share is in
 * firstRequestMiB). Given: measured bytes, as the held and load terms are.
 */
const mappedWeightSlope = (phase: string) => (phase === Phase.STEADY_INFERENCE ? 1 : 0);
/**
 * The slope on socketEvalMiB (memlane-rt's eval-set tensors in the task's message, model-terms.ts):
 * 1 at runtime-create and model-load, where the worker holds the message that arrived before
 * them, 0 at import (before the task) and from first-inference on, where the fitted slope on
 * evalMiB (1.00 there) counts every eval tensor, mapped or not. Given: the probes' message-borne
 * sets are 0.25 MiB at most (the weights probe's runtime-create was 0.3 MiB over the others').
 */
const socketEvalSlope = (phase: string) => (phase === Phase.RUNTIME_CREATE || phase === Phase.MODEL_LOAD ? 1 : 0);
/**
 * The slope on loadTransientMiB (how far the load probe's model-load peak rose above its end:
 * memlane-rt's originals held with their repacked copies, native-load.ts; ORT's blocks freed to
 * the kernel before the session was made, ort-load.ts): 1 on model-load's peak, 0 on its end
 * figures and in every other phase. Given: the probe measures it for the model itself, where a
 * slope on W fitted on the probes (on AVX-512 all of their dense weights are repacked) would
 * carry their ratio of repacked weights to every model. For ORT, fitted on W it put swin_t's
 * model-load peak at +28 %: its load's peak is its end.
 */
const loadTransientSlope = (phase: string, counter: Counter) => (phase === Phase.MODEL_LOAD && counter === "peak" ? 1 : 0);
const nativeReleasedSlope = (phase: string) => (BEFORE_LOAD.has(phase) || phase === Phase.MODEL_LOAD ? 0 : -1);
/**
 * The ORT runtimes' arena, given in every phase, never fitted: its bytes are the replay's
 * (ort-arena.ts), resident bytes as heldMiB's are. At steady-inference, where every request has
 * run, activationMiB (the arena after all of them) with slope 1: fitted freely on the probes it
 * came out 1.02. At first-inference, ortFirstRequestMiB (the arena after the first request
 * alone) with slope 1 and activationMiB 0: a slope fitted on the whole run's arena there put
 * squeezenet1_1's first-inference RSS (batches 1,64, 256 eval samples) at +10.4 % in python-ort
 * and +5.3 % in node-ort, now -0.2 % and +1.0 %. Before the first request, 0: no arena yet.
 * (Until calibration format 22 node-ort took python-ort's fitted slope in every phase: fitted
 * on its own, the orchestrator's heap noise, ~6 MiB rms over the probes, made it 2.6 against 2.3.)
 * Other runtimes: ortFirstRequestMiB is 0 and activationMiB fitted.
 */
const ORT_ARENA_RUNTIMES: ReadonlySet<string> = new Set(["python-ort", "node-ort"]);
const arenaSlope = (runtime: string, phase: string): { activationMiB?: number; ortFirstRequestMiB: number } => {
  if (!ORT_ARENA_RUNTIMES.has(runtime)) return { ortFirstRequestMiB: 0 };
  if (phase === Phase.STEADY_INFERENCE) return { activationMiB: 1, ortFirstRequestMiB: 0 };
  if (phase === Phase.FIRST_INFERENCE) return { activationMiB: 0, ortFirstRequestMiB: 1 };
  return { activationMiB: 0, ortFirstRequestMiB: 0 };
};

/**
 * node-ort's slope on the eval set's outputs: 1 at steady-inference on every counter (its
 * child's copy of them all, gathered after the eval pass), 0 before, given. The chunks' outputs
 * alive while they are gathered count on the peak through deadOutputMiB (model-terms.ts
 * nodePeakBeyondEndMiB). Fitted on the end figures it came out 0.71 (the eval-outputs probe's
 * dead requests' chunks were counted where glibc had given them back: evalPassTrimsHeap), which
 * a decoder LM's 625 MiB of logits then lacked by 181 MiB (-18.9 %); fitted on the peak, 1.64,
 * 13 % short on the same LMs' peaks.
 */
const nodeEvalOutputSlope = (runtime: string, phase: string): { evalOutputMiB?: number } =>
  runtime === "node-ort" ? { evalOutputMiB: phase === Phase.STEADY_INFERENCE ? 1 : 0 } : {};

/**
 * Before model-load nothing of the model exists in the worker: every slope there is given 0
 * and the phase is its intercept. Fitted, the probes' noise left memlane-rt's import a slope of
 * 0.005 on the eval set's outputs, which a decoder LM's 625 MiB of logits (256 eval samples)
 * turned into 3.1 MiB of a 6.7 MiB phase: gpt_neox's import estimated +47.9 %.
 */
const beforeLoadSlopes = (phase: string): Partial<Record<(typeof FEATURE_NAMES)[number], number>> =>
  BEFORE_LOAD.has(phase) ? Object.fromEntries(FEATURE_NAMES.map((f) => [f, 0])) : {};

/** One fit per runtime, phase and counter over the probes that measured that phase. */
export function fitModels(probes: Calibration["probes"]): Calibration["models"] {
  const models: Calibration["models"] = {};
  const runtimes = [...new Set(probes.flatMap((p) => Object.keys(p.phases)))];
  for (const rt of runtimes) {
    const phases: string[] = [];
    for (const p of probes) for (const ph of Object.keys(p.phases[rt] ?? {})) if (!phases.includes(ph)) phases.push(ph);
    const fits: Record<string, Record<Counter, Fit>> = {};
    for (const ph of phases) {
      const rows = probes.filter((p) => p.phases[rt]?.[ph] && p.features[rt]);
      fits[ph] = Object.fromEntries(
        (Object.keys(COUNTERS) as Counter[]).map((c) => {
          const given = { ...weightSlopes(rt), heldMiB: heldSlope(ph), largestBatchMiB: largestBatchSlope(ph), loadMiB: loadSlope(ph), nativeReleasedMiB: nativeReleasedSlope(ph), deadOutputMiB: deadOutputSlope(ph, c), deadOutputKeptMiB: deadOutputKeptSlope(ph, c), outputBufferMiB: outputBufferSlope(ph), nativeWorkspaceMiB: nativeWorkspaceSlope(ph), firstRequestMiB: firstRequestSlope(ph), mappedWeightMiB: mappedWeightSlope(ph), loadTransientMiB: loadTransientSlope(ph, c), ...arenaSlope(rt, ph), ...nodeEvalOutputSlope(rt, ph), ...beforeLoadSlopes(ph), socketEvalMiB: socketEvalSlope(ph) };
          return [c, fitLinear(rows.map((p) => ({ features: p.features[rt]!, value: p.phases[rt]![ph]![c] })), given)];
        }),
      ) as Record<Counter, Fit>;
    }
    models[rt] = { phases, fits };
  }
  return models;
}
