/**
 * The model-dependent terms of an estimate, computed from the ONNX graph without running it:
 * the weight bytes, the activation memory the compiler plans for one sample (memlane-rt's
 * own arena rule, and the per-sample figure ORT's planner approaches with exact-size reuse),
 * and the eval set a benchmark holds (inputs and outputs of every eval sample). All in MiB.
 */
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { compileOnnx } from "../compiler/compile.ts";
import { batchAxis, type Graph, perSample } from "../compiler/ir.ts";
import { loadOnnx } from "../compiler/load.ts";
import { fileElemBytes } from "../compiler/tensor-data.ts";
import { readOnnxIo } from "../pipeline/inputs/onnx-io.ts";
import { inputFileShapes, prepareEvalSet } from "../pipeline/inputs/eval-set.ts";
import { InputSpecError, resolveModelIo, type ShapeOverrides } from "../pipeline/inputs/shapes.ts";
import { readPlan } from "../compiler/read.ts";
import { DEFAULT_SHM_THRESHOLD } from "../transport/shm.ts";
import { nativeChunkable, nativeChunkSamples, nativeLanes } from "../compiler/native-chunk.ts";
import { probeNativeLoad, workspaceAt } from "./native-load.ts";
import { type FreePieces, type OrtLoadProbe, type OrtRuntime, probeOrtLoad } from "./ort-load.ts";
import { type ExternalTensor, externalTensors, mappedWeightsMiB, withMeasuredWindows } from "./ort-mapped.ts";
import { FAULT_AROUND_BYTES, type PlanTable, planTables, tableBytesRead, withFaultWindows } from "./table-reads.ts";
import { arenaResidentBeyondHeld } from "./ort-heap-reuse.ts";
import { nodeDeadOutputKeptMiB, nodePeakBeyondEndMiB } from "./node-ort-outputs.ts";
import { evalChunks, ortPatternKey, replayOrtArena } from "./ort-arena.ts";
import { ortGraphIo, ortPatternBytesPerSample, ortRunTracePerSample, type TraceEvent } from "./ort-pattern.ts";
import { isHalfPrecision } from "./ort-fp16.ts";

const MIB = 2 ** 20;
export { NATIVE_CHUNK_ARENA_BYTES } from "../compiler/native-chunk.ts";

/**
 * One ORT runtime's load probe (ort-load.ts): freed memory glibc's malloc keeps after the load
 * (heldMiB: null where mallinfo2 cannot be read), the blocks of it the arena can take
 * (freePieces: where ORT's regions and their tables land without growing RSS,
 * ort-heap-reuse.ts; null: the replay's pages all count), what the load left allocated (inUseMiB:
 * the weights as ORT keeps them, pre-packed or reordered to NCHWc, and the graph), how much of
 * that and of the held memory was never written (untouchedMiB: the arena's room a quantized
 * model's load leaves) and how far RSS rose above the load's end (peakAboveEndMiB). `unavailable`: why heldMiB is null although
 * the probe was asked for (it failed, or the process's malloc is not glibc's); the estimate then
 * leaves the held term out and says so.
 */
export type OrtLoadTerms = Omit<OrtLoadProbe, "rssMiB"> & { unavailable?: string };

export interface ModelTerms {
  file: string;
  params: number;
  /** Initializer bytes as stored in the ONNX file. */
  weightMiB: number;
  /**
   * The weight bytes of memlane-rt's plan, its weights term: what it maps, where the file's
   * bytes may differ. A half-precision model's are float32 where the file's are float16. A
   * constant subgraph folds into fewer bytes: BiT's weight-standardised convs store each kernel
   * twice (as it is and transposed, both read only by the standardisation), 17.5 MiB in the file
   * for 9.0 in the plan, and the file's figure put memlane-rt's steady RSS +19.9 % over. Absent
   * where the compiler refused the model (the file's bytes stand).
   */
  nativeWeightMiB?: number;
  /**
   * A half-precision model's input and output terms as ORT runs it (float16 outputs), where the
   * plan's (float32) stand for memlane-rt; the ORT runtimes' eval-set terms. Absent otherwise.
   */
  ortIo?: Pick<ModelTerms, "ioPerSampleMiB" | "outputPerSampleMiB" | "outputTensorsPerSampleMiB" | "outputNotBatchFirstPerSampleMiB">;
  /** The part of weightMiB that Conv nodes take as their kernel (ORT pre-packs these into a second layout). */
  convWeightMiB: number;
  /** Planned arena for one sample (inputs, outputs and activations); null when the compiler refused the model. */
  arenaPerSampleMiB: number | null;
  /**
   * Of that arena, what memlane-rt's CPU backend never writes on this CPU (the tensors inside
   * the kernels it fuses), MiB a sample: reported by the native load probe (native-load.ts),
   * else null (the whole arena counted).
   */
  nativeUnwrittenPerSampleMiB: number | null;
  /**
   * ONNX Runtime's memory pattern for one sample (ort-pattern.ts): the block its planner asks
   * the arena for, with ORT's own reuse rules; null when the graph's shapes cannot be followed.
   */
  ortPatternPerSampleMiB: number | null;
  /**
   * ORT's run, tensor by tensor, for one sample (ortRunTracePerSample): what its arena replay
   * (ort-arena.ts) is fed; null when the graph's shapes cannot be followed.
   */
  ortTracePerSample: TraceEvent[] | null;
  /**
   * Every input's shape as fed, -1 at the batch: ORT caches a memory pattern per XOR of the input
   * dims (ortPatternKey), so which shapes share one decides how it allocates (ort-arena.ts).
   * null when the benchmark could not feed the model.
   */
  ortInputDims: number[][] | null;
  /** The initializers the file stores in external data (ort-mapped.ts): ORT reads those it leaves mapped in place. */
  externalTensors: ExternalTensor[];
  /** memlane-rt: the plan's tables Gather reads in place, with their measured windows (table-reads.ts); empty without a plan. */
  nativeTables?: PlanTable[];
  /** Why the tables' windows (ORT's external data, memlane-rt's plan) were not measured, where a probe failed: 64 KiB is taken. */
  tableWindowsUnavailable?: string;
  /** Sum of input and output bytes of one sample; null when a dim is unknown. */
  ioPerSampleMiB: number | null;
  /** The outputs' part of ioPerSampleMiB; null when a dim is unknown. */
  outputPerSampleMiB: number | null;
  /** The same, output by output (each is an allocation of its own per request); null likewise. */
  outputTensorsPerSampleMiB: number[] | null;
  /**
   * memlane-rt's plan inputs, one sample each, MiB (an input without a batch axis whole, as it
   * is sent once): which of the eval set's tensors travel through the socket (socketEvalMiB).
   * Absent without a plan.
   */
  inputTensorsPerSampleMiB?: Array<{ mib: number; batched: boolean }>;
  /**
   * The largest initializer's bytes, MiB: ORT frees a copy of each at load, and glibc raises its
   * mmap threshold to the largest mmapped block freed (node-ort-outputs.ts nodeDeadOutputKeptMiB).
   */
  largestInitializerMiB: number;
  /** The ONNX file's size, MiB (ORT reads it into one buffer at load, up to 4 MiB: node-ort-outputs.ts ortLoadMmapThresholdMiB). */
  fileMiB: number;
  /**
   * The part of outputPerSampleMiB whose batch is not the first axis (a seq-first encoder's
   * output): memlane-rt's worker cannot write those into its eval frames, so its timed calls
   * keep a buffer of their own for them (Features.outputBufferMiB); null when a dim is unknown.
   */
  outputNotBatchFirstPerSampleMiB: number | null;
  /** Why the compiler-derived figures are missing, if they are. */
  compileError: string | null;
  /**
   * Why ORT's replay could not follow the graph (an op it has no shape rule for: an
   * ORT-optimized BERT's Attention), or null; with compileError, why the ORT runtimes' activation
   * and eval-set terms are missing too. Absent where it was not tried.
   */
  ortReplayError?: string | null;
  /**
   * Whether memlane-rt's CPU backend runs this plan in chunks of samples (native-chunk.ts);
   * false: it runs the whole batch at once. null when the compiler refused the model.
   */
  nativeChunkable: boolean | null;
  /**
   * What each ORT runtime's load probe measured (ort-load.ts), for the runtimes asked for
   * (`{ ortLoad: [...] }`): each binding loads in a process of its own kind, and what malloc
   * keeps and where the arena then lands differ between them. Absent: not probed (features
   * leaves the held term out and the weights stand in for the load).
   */
  ortLoad: Partial<Record<OrtRuntime, OrtLoadTerms>>;
  /**
   * memlane-rt's model-load RSS growth (its repacked weights and kernels' state) and the plan
   * weight bytes it gave back after repacking, MiB (native-load.ts): measured by the native
   * load probe when asked (`{ nativeLoad: true }`), else null.
   */
  nativeLoadMiB: number | null;
  nativeReleasedMiB: number | null;
  /** How far model-load's peak rose above its end in the same probe (native-load.ts), MiB, else null. */
  nativeLoadPeakAboveEndMiB: number | null;
  /**
   * memlane-rt's arena per sample for the last ops, which its CPU backend runs over the whole
   * batch where it splits a batch into chunks (native-load.ts), MiB: from the same probe, else null.
   */
  nativeBatchTailPerSampleMiB: number | null;
  /**
   * The batch tail's arena bytes a sample no kernel writes, and its kernels' workspace for 1, 2,
   * 4 ... samples, MiB (native-load.ts): from the same probe; absent where it gave none.
   */
  nativeBatchTailUnwrittenPerSampleMiB?: number;
  nativeBatchTailWorkspaceByBatchMiB?: number[];
  /**
   * memlane-rt's largest kernel workspace for 1, 2, 4 ... samples at once, MiB (native-load.ts:
   * workspaceAt reads it): from the same probe, else null.
   */
  nativeWorkspaceByBatchMiB: number[] | null;
  /** Why the native load figures are null although asked for; the estimate leaves them out (0) and says so. */
  nativeLoadUnavailable?: string;
}

export interface RunShape {
  /** Largest batch a benchmark runs. */
  maxBatch: number;
  /**
   * The batch sizes it runs, in its order (ORT's arena replay depends on it); absent: batch 1
   * then maxBatch, the benchmarks' default shape.
   */
  batchSizes?: readonly number[];
  /** Samples in the eval set every benchmark worker receives. */
  evalSamples: number;
  /**
   * Requests each batch size runs before the eval pass (warmup + timed iterations); absent: 0,
   * and node-ort's dead outputs (Features.deadOutputMiB) are left out.
   */
  calls?: number;
  /** Intra-op threads of every runtime (memlane-rt runs a split batch's chunks one lane a thread); absent: 1. */
  threads?: number;
}

/** RunShape.calls of a benchmark: its warmup and timed requests at each batch size. */
export const requestsPerBatch = (o: { iterations: number; warmup: number }): number => o.iterations + o.warmup;

/** The features a calibrated estimate is linear in (fit.ts), per runtime. */
export interface Features {
  weightMiB: number;
  convWeightMiB: number;
  activationMiB: number;
  /** The eval set's inputs. */
  evalMiB: number;
  /**
   * What malloc keeps of what ORT freed while loading (ModelTerms.ortLoad: heldMiB), for the ORT
   * runtimes; 0 for memlane-rt (it maps its plan) and where it was not measured. Its slope is
   * 1 from model-load on, never fitted (calibration.ts): it is measured bytes.
   */
  heldMiB: number;
  /**
   * memlane-rt: what only its largest batch touches, MiB. For a plan its CPU backend cannot
   * chunk (native-chunk.ts), the arena beyond one sample; for a chunked plan whose largest batch
   * is split, the same of its batch tail's arena (ModelTerms.nativeBatchTailPerSampleMiB); and
   * for every plan, its kernels' workspace beyond one sample for the samples it runs at once
   * (ModelTerms.nativeWorkspaceByBatchMiB: an LSTM's input projections, S x 4H floats a
   * sample). 0 for the other runtimes. Its slope is 1 at steady-inference (where every batch
   * size runs) and 0 before, never fitted: no probe is unchunkable or has an LSTM.
   */
  largestBatchMiB: number;
  /**
   * What the model's load leaves resident, by the runtime's load probe, MiB: memlane-rt's
   * repacked weights and kernels' state (ModelTerms.nativeLoadMiB); the ORT runtimes' in-use
   * bytes after the session's creation (ModelTerms.ortLoad: inUseMiB, their weights, so W's slope
   * is 0 for them) less what of those and the held bytes was never written (untouchedMiB: the
   * arena's room, which the activations' replay counts as the requests write it), the weights
   * where that probe has no figure. An int8 ResNet-50's load grew RSS 16 MiB less than it had
   * out and held: its model-load was +11 % before. Slope 1 from model-load on,
   * never fitted (measured bytes, as heldMiB is); 0 for torch.
   */
  loadMiB: number;
  /**
   * memlane-rt: plan weight bytes given back after repacking (ModelTerms.nativeReleasedMiB):
   * their copies are in nativeLoadMiB, and inference pages in only the rest of the weights, so
   * its slope is -1 from first-inference on (where W's slope counts every weight), 0 before.
   */
  nativeReleasedMiB: number;
  /**
   * How far model-load's peak rose above the load's end in the runtime's load probe: memlane-rt's
   * originals of the weights it repacks, held with their copies until each one's last reader is
   * built (ModelTerms.nativeLoadPeakAboveEndMiB); ORT's blocks given back to the kernel before the
   * session was made (ModelTerms.ortLoad: peakAboveEndMiB). 0 for torch. Slope 1 on
   * model-load's peak, 0 on every other counter and phase, never fitted. Before (calibration
   * format 22), the peak's slope on W was fitted on probes whose dense layers are all repacked
   * (peak 32 MiB above the end for 48 MiB of weights) and put the model-load peak of
   * mobilenet_v2 / gpt2 / efficientnet_b0 at +25 / +51 / +30 %.
   */
  loadTransientMiB: number;
  /**
   * The outputs every eval sample gives, apart from the inputs: they cost a worker another
   * amount, at other phases. python-ort holds the output chunks and their concatenation (2
   * copies) from steady-inference on, memlane-rt none before its first inference, node-ort's
   * orchestrator the other runtimes' outputs from the start. With one term for both, GPT-2's
   * logits (0.49 MiB a sample) left python-ort at −39 % and memlane-rt's first-inference at
   * seven times its measurement.
   */
  evalOutputMiB: number;
  /**
   * node-ort: what its steady-inference peak holds beyond the end figures (node-ort-outputs.ts nodePeakBeyondEndMiB):
   * its timed requests' outputs that are dead but not yet collected (nodeDeadOutputMiB), or its
   * eval chunks' outputs, alive together while they are gathered into the one copy the end
   * figures count, whichever is more; 0 for the other runtimes, whose outputs are freed when the
   * caller drops them. Slope 1 on steady-inference's peak, 0 on its end figures (read after a
   * collection: deadOutputKeptMiB) and before, never fitted.
   */
  deadOutputMiB: number;
  /**
   * node-ort: the part of deadOutputMiB that malloc keeps once V8 has collected it
   * (nodeDeadOutputKeptMiB), which the end figures count: they are read after a full collection
   * (node-ort-process.mjs). Slope 1 on steady-inference's end figures, 0 on its peak and before,
   * never fitted.
   */
  deadOutputKeptMiB: number;
  /**
   * memlane-rt: the output buffers its worker's timed requests write beyond its eval frames (one
   * request of the largest batch: python/memlane_worker has none, the ORT runtimes' outputs are
   * their own tensors), resident once the largest batch has run; nativeOutputBufferMiB. Slope 1
   * at steady-inference, 0 before, never fitted.
   */
  outputBufferMiB: number;
  /**
   * ORT's arena after the run's first request alone (ort-arena.ts: ArenaReplay.firstRequestBytes),
   * MiB: the ORT runtimes' activations at first-inference, where activationMiB (the arena after
   * every request) is not yet resident (without a trace, the same stand-in as activationMiB's at
   * the first batch size). 0 for the other runtimes. Slope 1 at first-inference, 0
   * elsewhere, never fitted (measured the way activationMiB's bytes are). Before, first-inference
   * fitted a slope on activationMiB: on regnet_y_400mf at batches 1 and 64 it put python-ort's
   * first-inference RSS at +15.8 % and node-ort's at +9.3 %, the batch-64 arena counted in a
   * phase that had run batch 1 only.
   */
  ortFirstRequestMiB: number;
  /**
   * memlane-rt: its kernels' workspace at one sample (ModelTerms.nativeWorkspaceByBatchMiB), which the
   * first request (a batch of one) touches; what more samples touch is in largestBatchMiB. 0 for
   * the other runtimes. Slope 1 from first-inference on, 0 before, never fitted: on a CPU without
   * AVX-512 the probes' 32-channel conv on a 128x128 map takes im2col (18 MiB of columns a
   * sample), and fitted into the activation slope it came out 6.7, which put the digits
   * pipeline's steady RSS at +18 %.
   */
  nativeWorkspaceMiB: number;
  /**
   * What the run's first request (a batch of its first batch size, b) leaves resident at the
   * first-inference mark that the one-sample terms leave out. memlane-rt: its b samples of
   * outputs, written into the eval frames (or the worker's output buffer), and for a plan the
   * CPU backend runs whole, its arena and kernel workspace beyond one sample up to b. node-ort:
   * the request's outputs, copied into JS arrays, alive at the mark (the phase's result is held
   * through the collection before the reading, node-ort-process.mjs). python-ort: 0 (its worker
   * drops them; ORT's arena is ortFirstRequestMiB). Slope 1 at first-inference, 0 elsewhere
   * (steady-inference has every output in evalOutputMiB and the largest batch's arena in
   * largestBatchMiB), never fitted: the probes' first requests are of one sample with at most
   * 256 KiB of outputs, and the first-inference slope on the eval outputs came out 0. A decoder
   * LM (falcon, 2.4 MiB of logits a sample, its Range unchunkable) measured 20.2, 25.2 and 35.1
   * MiB at memlane-rt's first-inference with batches 1,8, 2,8 and 4,8, all estimated 17.7;
   * node-ort's was -4.0 and -9.6 % at 1,8 and 4,8.
   */
  firstRequestMiB: number;
  /**
   * Weights read in place from a file, resident once the run's requests have read them, MiB: the
   * ORT runtimes' external data (ort-mapped.ts: every initializer the load probe found still
   * mapped, a table by the windows its ids touch), memlane-rt's plan tables (table-reads.ts:
   * their whole bytes are in nativeReleasedMiB, not resident until read). What the first request
   * alone reads is in firstRequestMiB. 0 for torch. Slope 1 at steady-inference, 0 before, never
   * fitted (the probes' tables are read whole by a run either way).
   */
  mappedWeightMiB: number;
  /**
   * memlane-rt: the eval set's tensors that travel in the task's message rather than in shared
   * memory (socketEvalMiB), MiB. 0 for the other runtimes. Slope 1 at runtime-create and
   * model-load, 0 before and after (from first-inference on evalMiB counts them), never fitted:
   * the probes' socket-borne sets are 0.25 MiB at most.
   */
  socketEvalMiB: number;
}

/** Bytes of one element of a graph input or output (int64 ids and masks are 8, not 4). */
const dtypeBytes = (dtype: string) => (/64/.test(dtype) ? 8 : /16/.test(dtype) ? 2 : /8|bool/.test(dtype) ? 1 : 4);

/**
 * What a benchmark feeds a model whose inputs have symbolic dims besides the batch (a
 * transformer exported with a dynamic sequence): the shapes of an `--inputs` file's arrays,
 * `--shape` overrides, else every such dim at `seq` (the benchmark's default, 128), exactly as
 * the benchmark resolves them (src/pipeline/inputs/shapes.ts).
 */
export interface InputFeed {
  seq?: number;
  shapes?: ShapeOverrides;
  /** An .npz or .safetensors file the benchmark feeds (an export stage's `inputs`, `--inputs`). */
  inputsFile?: string;
}

/**
 * The compiler's `inputShapes` (-1 at the batch) for what the benchmark will feed; undefined
 * when no input has a symbolic dim off its batch axis (the graph's own shapes are what runs).
 * The batch is the axis the benchmark takes (resolveModelIo), not the compiler's guess (the
 * first symbolic dim): x [1, "seq", 32] runs [N, 128, 32], x ["seq", "batch", 32] [128, N, 32].
 * A fully static side input (no batch axis) is left out: the compiler plans it as the graph has it.
 * Throws InputSpecError for what the benchmark could not feed either.
 */
export function fedInputShapes(onnxPath: string, feed: InputFeed = {}): Record<string, number[]> | undefined {
  return fedInputs(onnxPath, feed).inputShapes;
}

/**
 * What the benchmark feeds, from one read of the file: the compiler's `inputShapes` (as
 * fedInputShapes) and every input's shape, -1 at the batch (`dims`: what ORT keys its memory
 * patterns on, ort-arena.ts).
 */
function fedInputs(onnxPath: string, feed: InputFeed): { inputShapes: Record<string, number[]> | undefined; dims: number[][]; byName: Map<string, number[]> } {
  const io = readOnnxIo(onnxPath);
  const fromFile = feed.inputsFile !== undefined ? inputFileShapes(feed.inputsFile, io) : undefined;
  const { inputs } = resolveModelIo(io, { ...(feed.seq !== undefined ? { seq: feed.seq } : {}), ...(feed.shapes ? { shapes: feed.shapes } : {}), ...(fromFile ? { fromFile } : {}) });
  const offBatch = io.inputs.some((i, k) => i.dims === null || i.dims.some((d, a) => typeof d !== "number" && a !== inputs[k]!.batchAxis));
  const inputShapes = offBatch ? Object.fromEntries(inputs.filter((i) => i.batchAxis >= 0).map((i) => [i.name, i.shape])) : undefined;
  return { inputShapes, dims: inputs.map((i) => [...i.shape]), byName: new Map(inputs.map((i) => [i.name, [...i.shape]])) };
}

/**
 * The eval samples a benchmark fed from an inputs file holds: the arrays' rows on their batch
 * axis (checked as the run checks them); null without a file (the stage's evalSamples count).
 */
export function inputFileRows(onnxPath: string, feed: InputFeed): number | null {
  return feed.inputsFile === undefined ? null : prepareEvalSet(onnxPath, { ...feed, nEval: 1 }).nEval;
}

/**
 * The bytes of the eval set's inputs or of its outputs, whichever is larger: a benchmark sends
 * the one (as frames, where shared memory is not used) and gets the other back in one message.
 * `inputShapes`: the shapes the run feeds (-1 at the batch), undefined for the graph's own.
 * From ORT's inference of the graph, without compiling it; null where the graph cannot be
 * followed. A run sizes a benchmark's message limit by it (RunSession.messageLimitFor): a
 * decoder LM's logits over 256 eval samples (2.4 MiB a sample at a vocabulary of 5000 and seq
 * 128) passed the default 256 MiB, and python-ort and native failed.
 */
export function evalSetMessageBytes(onnxPath: string, inputShapes: Record<string, number[]> | undefined, evalSamples: number): number | null {
  try {
    const { inputs, outputs } = ortGraphIo(loadOnnx(onnxPath, { customDomains: "keep" }), inputShapes);
    return Math.max(bytesPerSample(inputs), bytesPerSample(outputs)) * evalSamples;
  } catch {
    return null;
  }
}

/** Bytes of one sample of these tensors, the batch wherever it sits (-1 counts as 1). */
const bytesPerSample = (tensors: ReadonlyArray<{ shape: readonly number[]; dtype: string }>) =>
  tensors.reduce((a, t) => a + perSample(t.shape) * dtypeBytes(t.dtype), 0);

/**
 * `ortLoad`: run the load probe of each of these ORT runtimes (ort-load.ts: a Python worker, a
 * node-ort child; about a second each) for ModelTerms.ortLoad; `nativeLoad`: the native one
 * (native-load.ts: a memlane-rt worker loads the compiled plan) for nativeLoadMiB and
 * nativeReleasedMiB. What an estimate of those runtimes needs (loadProbesFor), not the graph's
 * own terms.
 */
export async function modelTerms(onnxPath: string, feed: InputFeed = {}, opts: { ortLoad?: readonly OrtRuntime[]; nativeLoad?: boolean; tmpDir?: string } = {}): Promise<ModelTerms> {
  const terms = await graphTerms(onnxPath, feed, opts.nativeLoad === true);
  const ortLoad: ModelTerms["ortLoad"] = {};
  for (const runtime of opts.ortLoad ?? []) ortLoad[runtime] = await ortLoadTerms(onnxPath, runtime, opts.tmpDir);
  // The external tables' windows, on those an ORT load left mapped (ort-mapped.ts, table-reads.ts).
  const maps = Object.values(ortLoad).flatMap((l) => l.fileMaps ?? []);
  if (maps.length === 0) return { ...terms, ortLoad };
  const measured = await withMeasuredWindows(terms.externalTensors, maps, dirname(onnxPath));
  const unavailable = terms.tableWindowsUnavailable ?? measured.unavailable;
  return { ...terms, ortLoad, externalTensors: measured.tensors, ...(unavailable ? { tableWindowsUnavailable: unavailable } : {}) };
}

/** One ORT runtime's load probe as terms; its failure is said, not thrown (the graph's terms stand). */
async function ortLoadTerms(onnxPath: string, runtime: OrtRuntime, tmpDir: string | undefined): Promise<OrtLoadTerms> {
  // The probe's workers write where ORT writes (its `.ses` and logs in TMPDIR): a run's scratch.
  const env = tmpDir !== undefined ? { env: { TMPDIR: tmpDir } } : {};
  const none = { heldMiB: null, freePieces: null, inUseMiB: null, peakAboveEndMiB: null };
  try {
    const { rssMiB: _rss, ...probe } = await probeOrtLoad(onnxPath, { ...env, runtime });
    return probe.heldMiB === null ? { ...none, unavailable: "mallinfo2 cannot be read in the probe (no glibc malloc)" } : probe;
  } catch (err) {
    return { ...none, unavailable: `the load probe failed: ${err instanceof Error ? err.message : String(err)}` };
  }
}

async function graphTerms(onnxPath: string, feed: InputFeed, nativeLoad: boolean): Promise<ModelTerms> {
  // ONNX Runtime's own ops (a quantized model's QLinearAdd) stay for its replay; the compile refuses them.
  const g = loadOnnx(onnxPath, { customDomains: "keep" });
  let inputShapes: Record<string, number[]> | undefined;
  let ortInputDims: number[][] | null = null;
  let fedByName = new Map<string, number[]>();
  let feedError: string | null = null;
  try {
    ({ inputShapes, dims: ortInputDims, byName: fedByName } = fedInputs(onnxPath, feed));
  } catch (err) {
    if (!(err instanceof InputSpecError)) throw err;
    // An input the benchmark could not feed either: no plan at shapes it would not run.
    feedError = err.message.split("\n")[0]!;
  }
  let params = 0;
  let weightBytes = 0;
  let largestInitializerBytes = 0;
  for (const t of g.consts.values()) {
    const n = t.dims.reduce((a, b) => a * b, 1);
    params += n;
    weightBytes += n * fileElemBytes(t);
    largestInitializerBytes = Math.max(largestInitializerBytes, n * fileElemBytes(t));
  }
  let convBytes = 0;
  const counted = new Set<string>();
  for (const n of g.nodes) {
    const w = n.opType === "Conv" || n.opType === "ConvTranspose" ? n.inputs[1] : undefined;
    const t = w ? g.consts.get(w) : undefined;
    if (w && t && !counted.has(w)) {
      counted.add(w);
      convBytes += t.dims.reduce((a, b) => a * b, 1) * fileElemBytes(t);
    }
  }
  // Without a plan there is nothing for the native load probe to load; why is the compile error.
  const noPlan = nativeLoad ? { nativeLoadUnavailable: "no plan to load (the compile error above)" } : {};
  // Ids a sample of a fed input holds (its dims but the batch): how much of a table Gather reads.
  const idsPerSample = (input: string) => {
    const dims = fedByName.get(input);
    return dims ? dims.filter((d) => d >= 0).reduce((a, b) => a * b, 1) : null;
  };
  const weights = { file: onnxPath, ortInputDims, externalTensors: externalTensors(g, idsPerSample), params, weightMiB: weightBytes / MIB, convWeightMiB: convBytes / MIB, largestInitializerMiB: largestInitializerBytes / MIB, fileMiB: statSync(onnxPath).size / MIB, ortLoad: {}, nativeLoadMiB: null, nativeReleasedMiB: null, nativeLoadPeakAboveEndMiB: null, nativeBatchTailPerSampleMiB: null, nativeWorkspaceByBatchMiB: null, nativeUnwrittenPerSampleMiB: null };
  const unplanned = { arenaPerSampleMiB: null, ioPerSampleMiB: null, outputPerSampleMiB: null, outputTensorsPerSampleMiB: null, outputNotBatchFirstPerSampleMiB: null, nativeChunkable: null };
  if (feedError !== null) return { ...weights, ...noPlan, ...unplanned, ortPatternPerSampleMiB: null, ortTracePerSample: null, compileError: feedError };
  let ortPatternPerSampleMiB: number | null = null;
  let ortTracePerSample: TraceEvent[] | null = null;
  let ortReplayError: string | null = null;
  try {
    ortPatternPerSampleMiB = ortPatternBytesPerSample(g, inputShapes) / MIB;
    ortTracePerSample = ortRunTracePerSample(g, inputShapes);
  } catch (err) {
    // A graph shape inference cannot follow: the compiler's arena stands in (features()).
    ortReplayError = (err as Error).message.split("\n")[0]!.split("; memlane-rt supports")[0]!;
  }
  const dir = mkdtempSync(join(tmpdir(), "memlane-estimate-"));
  try {
    const s = await compileOnnx(onnxPath, join(dir, "m.mlplan"), { verify: false, ...(inputShapes ? { inputShapes } : {}) });
    const plan = readPlan(s.planPath);
    const header = plan.header;
    // Each table's window measured on this plan, just written as the run's will be: the page
    // cache's folios decide, and a small table written in one piece lies in one.
    const tables = nativeLoad ? await withFaultWindows(s.planPath, planTables(plan)) : { tables: planTables(plan) };
    // A float16 model runs in float32 in memlane-rt (its weights too) and in float16 at ORT's
    // edges: each runtime's own weights and eval-set terms (a BERT's float16 outputs counted as
    // the plan's float32 put python-ort's steady RSS +4.9 % over 256 eval samples).
    const half = isHalfPrecision(g) && ortTracePerSample ? { ortIo: ortIoTerms(g, inputShapes) } : {};
    return {
      nativeChunkable: nativeChunkable(header),
      ...weights,
      nativeTables: tables.tables,
      ...(tables.unavailable ? { tableWindowsUnavailable: tables.unavailable } : {}),
      nativeWeightMiB: header.tensors.reduce((sum, x) => sum + (x.kind === "weight" ? x.bytes : 0), 0) / MIB,
      ...half,
      ...(nativeLoad ? await nativeLoadTerms(onnxPath, inputShapes, s.planPath) : {}),
      arenaPerSampleMiB: s.arenaBytesPerSample / MIB, ortPatternPerSampleMiB, ortTracePerSample, ortReplayError,
      ioPerSampleMiB: (bytesPerSample(s.inputs) + bytesPerSample(s.outputs)) / MIB,
      outputPerSampleMiB: bytesPerSample(s.outputs) / MIB,
      outputTensorsPerSampleMiB: s.outputs.map((o) => bytesPerSample([o]) / MIB),
      inputTensorsPerSampleMiB: s.inputs.map((i) => ({ mib: bytesPerSample([i]) / MIB, batched: i.batchAxis >= 0 })),
      outputNotBatchFirstPerSampleMiB: bytesPerSample(s.outputs.filter((o) => o.batchAxis !== 0)) / MIB,
      compileError: null,
    };
  } catch (err) {
    // memlane-rt cannot run the model, but ORT may: its eval-set terms from ORT's inference.
    return { ...weights, ...noPlan, ...unplanned, ...(ortTracePerSample ? ortIoTerms(g, inputShapes) : {}), ortPatternPerSampleMiB, ortTracePerSample, ortReplayError, compileError: (err as Error).message.split("\n")[0]! };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The input and output terms from ORT's inference of the graph (ortGraphIo), for a model memlane's compiler refused. */
function ortIoTerms(g: Graph, inputShapes: Record<string, number[]> | undefined): Pick<ModelTerms, "ioPerSampleMiB" | "outputPerSampleMiB" | "outputTensorsPerSampleMiB" | "outputNotBatchFirstPerSampleMiB"> {
  const { inputs, outputs } = ortGraphIo(g, inputShapes);
  return {
    ioPerSampleMiB: (bytesPerSample(inputs) + bytesPerSample(outputs)) / MIB,
    outputPerSampleMiB: bytesPerSample(outputs) / MIB,
    outputTensorsPerSampleMiB: outputs.map((o) => bytesPerSample([o]) / MIB),
    outputNotBatchFirstPerSampleMiB: bytesPerSample(outputs.filter((o) => batchAxis(o.shape) !== 0)) / MIB,
  };
}

/** memlane-rt's plan tables read in place (table-reads.ts): their bytes, and what the first request and the run read of them, MiB. */
function nativeTablesRead(tables: readonly PlanTable[], run: { firstBatch: number; evalSamples: number }): { firstMiB: number; endMiB: number; tablesMiB: number } {
  const sum = (f: (t: PlanTable) => number) => tables.reduce((s, t) => s + f(t), 0) / MIB;
  const window = (t: PlanTable) => t.window ?? FAULT_AROUND_BYTES;
  return {
    tablesMiB: sum((t) => t.bytes),
    firstMiB: sum((t) => tableBytesRead(t.bytes, t.idsPerSample * run.firstBatch, window(t))),
    endMiB: sum((t) => tableBytesRead(t.bytes, t.idsPerSample * Math.max(run.evalSamples, run.firstBatch), window(t))),
  };
}

/** The native load probe's figures, or why there are none (its failure must not take the graph's terms with it). */
async function nativeLoadTerms(onnxPath: string, inputShapes: Record<string, number[]> | undefined, planPath: string): Promise<NativeLoadTerms> {
  // One probe per model file version and fed shapes in a process: a run's memory plan (before
  // its stages) and its report's estimate (after) ask for the same; a failure is asked again.
  const st = statSync(onnxPath);
  const key = JSON.stringify([onnxPath, st.size, st.mtimeMs, inputShapes ?? null]);
  const known = nativeLoadMemo.get(key);
  if (known) return known;
  const terms = await probedNativeLoadTerms(planPath);
  if (terms.nativeLoadMiB !== null) nativeLoadMemo.set(key, terms);
  return terms;
}
type NativeLoadTerms = Pick<ModelTerms, "nativeLoadMiB" | "nativeReleasedMiB" | "nativeLoadPeakAboveEndMiB" | "nativeBatchTailPerSampleMiB" | "nativeBatchTailUnwrittenPerSampleMiB" | "nativeBatchTailWorkspaceByBatchMiB" | "nativeWorkspaceByBatchMiB" | "nativeUnwrittenPerSampleMiB" | "nativeLoadUnavailable">;
const nativeLoadMemo = new Map<string, NativeLoadTerms>();

async function probedNativeLoadTerms(planPath: string): Promise<NativeLoadTerms> {
  try {
    const p = await probeNativeLoad(planPath);
    return { nativeLoadMiB: p.loadMiB, nativeReleasedMiB: p.releasedMiB, nativeLoadPeakAboveEndMiB: p.loadPeakAboveEndMiB, nativeBatchTailPerSampleMiB: p.batchTailPerSampleMiB, nativeBatchTailUnwrittenPerSampleMiB: p.batchTailUnwrittenPerSampleMiB, nativeBatchTailWorkspaceByBatchMiB: p.batchTailWorkspaceByBatchMiB, nativeWorkspaceByBatchMiB: p.workspaceByBatchMiB, nativeUnwrittenPerSampleMiB: p.unwrittenPerSampleMiB, nativeLoadUnavailable: undefined };
  } catch (err) {
    return { nativeLoadMiB: null, nativeReleasedMiB: null, nativeLoadPeakAboveEndMiB: null, nativeBatchTailPerSampleMiB: null, nativeWorkspaceByBatchMiB: null, nativeUnwrittenPerSampleMiB: null, nativeLoadUnavailable: `the native load probe failed: ${err instanceof Error ? err.message : String(err)}` };
  }
}

const ORT_RUNTIMES: ReadonlySet<string> = new Set<OrtRuntime>(["python-ort", "node-ort"]);
/** Whether a runtime is one of the ONNX Runtime bindings (held memory, the arena replay). */
export const isOrtRuntime = (runtime: string): runtime is OrtRuntime => ORT_RUNTIMES.has(runtime);
/** The load probes an estimate of these runtimes needs, as modelTerms' options. */
export const loadProbesFor = (runtimes: Iterable<string>): { ortLoad: OrtRuntime[]; nativeLoad: boolean } => {
  const rs = [...runtimes];
  return { ortLoad: [...new Set(rs.filter(isOrtRuntime))], nativeLoad: rs.includes("native") };
};
/**
 * Why a runtime's estimate lacks its activation and eval-set terms, or null when it has them:
 * memlane's compiler refused the model and, for ORT, its own inference of the graph failed too.
 */
export function activationsUnknown(t: Pick<ModelTerms, "compileError" | "ortTracePerSample" | "ortReplayError">, runtime: string): string | null {
  if (!isOrtRuntime(runtime) || t.compileError === null) return t.compileError;
  if (t.ortTracePerSample !== null) return null;
  return t.ortReplayError ? `${t.compileError}; ONNX Runtime's replay could not follow it either: ${t.ortReplayError}` : t.compileError;
}
/** A runtime's load probe terms, if it is an ORT runtime and was probed. */
export const ortLoadOf = (t: Pick<ModelTerms, "ortLoad">, runtime: string): OrtLoadTerms | undefined => (isOrtRuntime(runtime) ? t.ortLoad[runtime] : undefined);
/** The terms as if the runtime's held blocks were unknown: every page of ORT's arena counts (ort-heap-reuse.ts). */
export function withoutHeldPieces(t: ModelTerms, runtime: string): ModelTerms {
  const load = ortLoadOf(t, runtime);
  return load && isOrtRuntime(runtime) ? { ...t, ortLoad: { ...t.ortLoad, [runtime]: { ...load, freePieces: null, freePiecesAlike: [] } } } : t;
}


/**
 * A runtime's features for a run: ORT plans the whole batch (its arena grows to the largest
 * request) with its own reuse rules (its pattern, where known), memlane-rt's CPU backend only
 * a chunk of it, torch allocates per op.
 */
export function features(runtime: string, t0: ModelTerms, run: RunShape): Features {
  // The ORT runtimes' inputs and outputs where a float16 model's differ from memlane-rt's plan.
  const t = ORT_RUNTIMES.has(runtime) && t0.ortIo ? { ...t0, ...t0.ortIo } : t0;
  const load = ortLoadOf(t, runtime);
  const evalInMiB = ((t.ioPerSampleMiB ?? 0) - (t.outputPerSampleMiB ?? 0)) * run.evalSamples;
  // node-ort's child reads its eval set into one Buffer on the thread that loaded, after the
  // load and before the first request: a held block may take it (ort-heap-reuse.ts).
  const before = runtime === "node-ort" && evalInMiB > 0 ? [evalInMiB * MIB] : [];
  const untouchedMiB = load?.untouchedMiB ?? 0;
  const arena = ORT_RUNTIMES.has(runtime) ? ortArenaMiB(t, run, runtime === "python-ort", load?.heldMiB != null ? heldPieceSets(load) : null, before, untouchedMiB) : null;
  const ortArena = arena?.residentMiB ?? null;
  const ortPattern = ORT_RUNTIMES.has(runtime) ? t.ortPatternPerSampleMiB : null;
  const reads = { firstBatch: run.batchSizes?.[0] ?? 1, evalSamples: run.evalSamples };
  const mapped: { firstMiB: number; endMiB: number; tablesMiB?: number } = ORT_RUNTIMES.has(runtime) ? mappedWeightsMiB(t.externalTensors ?? [], load?.fileMaps, reads)
    : runtime === "native" ? nativeTablesRead(t.nativeTables ?? [], reads) : { firstMiB: 0, endMiB: 0 };
  const sampleBytes = (ortPattern ?? t.arenaPerSampleMiB ?? 0) * MIB;
  let samples = run.maxBatch;
  let largestBatchMiB = 0;
  let tailMiB = 0;
  let nativeUnwrittenMiB = 0;
  if (runtime === "native" && sampleBytes > 0) {
    // Unchunked, a batch of one (compare's and the pipelines' first request) touches one sample
    // of arena, and the largest batch, at steady-inference, the rest.
    const unchunked = t.nativeChunkable === false;
    samples = unchunked ? 1 : nativeChunkSamples(true, sampleBytes, run.maxBatch);
    // Chunks are sized by the whole arena (as the backend does), but the bytes its fused
    // kernels never write are never resident (the load probe's figure).
    const written = sampleBytes / MIB - (t.nativeUnwrittenPerSampleMiB ?? 0);
    nativeUnwrittenMiB = (t.nativeUnwrittenPerSampleMiB ?? 0) * samples;
    const curve = t.nativeWorkspaceByBatchMiB ?? [];
    if (unchunked) {
      largestBatchMiB = written * (run.maxBatch - 1);
      // The kernels' workspace is sized for the samples run at once: a batch of one touches
      // one sample's (nativeWorkspaceMiB), the largest batch the rest. The zoo's LSTM (S 128,
      // H 64, unchunkable) at batch 64: 8 MiB, which the estimate of its steady RSS lacked (-23 %).
      largestBatchMiB += workspaceAt(curve, run.maxBatch) - workspaceAt(curve, 1);
    } else {
      // With threads, the largest batch's chunks run side by side, one lane a thread, each in
      // a slice of arena and workspace of its own (native-chunk.ts nativeLanes): the lanes'
      // chunks beyond the first lane's are touched there too. efficientnet_b0 at batch 8, 2
      // threads: one sample of arena more (10 MiB), its steady RSS estimated -15 % without it.
      const lanes = nativeLanes(true, run.threads ?? 1, samples, run.maxBatch);
      largestBatchMiB += written * (lanes.touchedSamples - samples);
      largestBatchMiB += lanes.used * workspaceAt(curve, lanes.chunk) - workspaceAt(curve, 1);
      // A split batch's last ops run over all of it, in an arena of their own laid out like
      // the plan's: a batch of one touches one sample of it, the largest batch the rest, but for
      // the bytes its fused kernels never write. Its kernels run at the whole batch in the
      // workspace the lanes use, which then holds the larger of the two. mobilenet_v2 (its last
      // 1x1 conv and ReLU6 in the tail, 490 KiB a sample of which the conv's output is never
      // written) at batches 1,64: +7 MiB steady (+3.7 %) when every tail byte counted.
      if (lanes.chunk < run.maxBatch) {
        tailMiB = (t.nativeBatchTailPerSampleMiB ?? 0) - (t.nativeBatchTailUnwrittenPerSampleMiB ?? 0);
        largestBatchMiB += tailMiB * (run.maxBatch - 1);
        const tailWorkspace = workspaceAt(t.nativeBatchTailWorkspaceByBatchMiB ?? [], run.maxBatch);
        largestBatchMiB += Math.max(0, tailWorkspace - lanes.used * workspaceAt(curve, lanes.chunk));
      }
    }
  }
  return {
    weightMiB: runtime === "native" ? (t.nativeWeightMiB ?? t.weightMiB) : t.weightMiB,
    convWeightMiB: t.convWeightMiB,
    activationMiB: ortArena ?? (sampleBytes * samples) / MIB + tailMiB - nativeUnwrittenMiB,
    // The eval set's new pages: none where a held block took it (node-ort), its pages are in heldMiB.
    evalMiB: evalInMiB - (arena?.beforeServedMiB ?? 0),
    evalOutputMiB: (t.outputPerSampleMiB ?? 0) * run.evalSamples,
    heldMiB: load?.heldMiB ?? 0,
    largestBatchMiB,
    loadMiB: runtime === "native" ? (t.nativeLoadMiB ?? 0) : ORT_RUNTIMES.has(runtime) ? (load?.inUseMiB != null ? load.inUseMiB - untouchedMiB : t.weightMiB) : 0,
    // memlane-rt's tables are not resident whole: only the windows requests read (mapped, firstRequestMiB).
    nativeReleasedMiB: runtime === "native" ? (t.nativeReleasedMiB ?? 0) + (mapped.tablesMiB ?? 0) : 0,
    loadTransientMiB: runtime === "native" ? (t.nativeLoadPeakAboveEndMiB ?? 0) : load?.peakAboveEndMiB ?? 0,
    deadOutputMiB: runtime === "node-ort" ? nodePeakBeyondEndMiB(t, run, arena?.heldLeft ?? null) : 0,
    deadOutputKeptMiB: runtime === "node-ort" ? nodeDeadOutputKeptMiB(t, run, arena?.heldLeft ?? null) : 0,
    outputBufferMiB: runtime === "native" ? nativeOutputBufferMiB(t, run) : 0,
    nativeWorkspaceMiB: runtime === "native" ? workspaceAt(t.nativeWorkspaceByBatchMiB ?? [], 1) : 0,
    firstRequestMiB: (runtime === "native" || runtime === "node-ort" ? firstRequestMiB(runtime, t, run) : 0) + mapped.firstMiB,
    mappedWeightMiB: mapped.endMiB,
    socketEvalMiB: runtime === "native" ? socketEvalMiB(t, run.evalSamples) : 0,
    // Without a trace (shapes the replay cannot follow), the stand-in of activationMiB's: the
    // pattern (or the compiler's arena) at the first batch size.
    ortFirstRequestMiB: arena ? arena.firstRequestMiB : ORT_RUNTIMES.has(runtime) ? (sampleBytes * (run.batchSizes?.[0] ?? 1)) / MIB : 0,
  };
}

/**
 * Features.socketEvalMiB: the eval set's tensors under the shared-memory threshold
 * (DEFAULT_SHM_THRESHOLD, per tensor: src/transport/shm.ts), MiB. Those travel as frames of the
 * task's message, which memlane-rt's worker holds from the task's arrival, before its
 * runtime-create mark, to its end; a tensor at or over the threshold is a shared-memory segment
 * whose pages the first request's phase touches. A GRU's 32 samples of 100 x 80 floats (0.98
 * MiB) put memlane-rt's runtime-create and model-load 0.9 MiB over the estimate; 40 (1.22 MiB,
 * mapped) did not.
 */
export function socketEvalMiB(t: Pick<ModelTerms, "inputTensorsPerSampleMiB">, evalSamples: number): number {
  return (t.inputTensorsPerSampleMiB ?? [])
    .map((i) => (i.batched ? i.mib * evalSamples : i.mib))
    .filter((mib) => mib * MIB < DEFAULT_SHM_THRESHOLD)
    .reduce((a, b) => a + b, 0);
}

/**
 * Features.firstRequestMiB of memlane-rt or node-ort: the first request's outputs, and for an
 * unchunked memlane-rt plan its arena and workspace beyond one sample (a chunked plan's chunk
 * arena is at most 256 KiB, in activationMiB already). The first batch is capped at the
 * largest, as the workers run it.
 */
export function firstRequestMiB(
  runtime: "native" | "node-ort",
  t: Pick<ModelTerms, "outputPerSampleMiB" | "nativeChunkable" | "arenaPerSampleMiB" | "nativeUnwrittenPerSampleMiB" | "nativeWorkspaceByBatchMiB">,
  run: Pick<RunShape, "maxBatch" | "batchSizes">,
): number {
  const first = Math.min(run.batchSizes?.[0] ?? 1, run.maxBatch);
  let mib = (t.outputPerSampleMiB ?? 0) * first;
  if (runtime === "native" && t.nativeChunkable === false && first > 1) {
    const written = (t.arenaPerSampleMiB ?? 0) - (t.nativeUnwrittenPerSampleMiB ?? 0);
    const curve = t.nativeWorkspaceByBatchMiB ?? [];
    mib += written * (first - 1) + workspaceAt(curve, first) - workspaceAt(curve, 1);
  }
  return mib;
}

/**
 * memlane-rt's worker (rt/tasks_infer.cc) writes its timed requests' outputs into the eval
 * frames it returns where a frame holds the largest batch with the batch first: a buffer of
 * their own then holds only the outputs whose batch is another axis, or every output where the
 * eval set is smaller than the largest batch. One request of the largest batch, MiB.
 */
export function nativeOutputBufferMiB(t: Pick<ModelTerms, "outputPerSampleMiB" | "outputNotBatchFirstPerSampleMiB">, run: Pick<RunShape, "maxBatch" | "evalSamples">): number {
  const perSample = run.evalSamples >= run.maxBatch ? t.outputNotBatchFirstPerSampleMiB : t.outputPerSampleMiB;
  return (perSample ?? 0) * run.maxBatch;
}

/** The held blocks' sets an arena estimate is taken over: every alike run's, else the median run's alone; null where unknown. */
function heldPieceSets(load: OrtLoadTerms): (readonly FreePieces[])[] | null {
  if (load.freePiecesAlike && load.freePiecesAlike.length > 0) return load.freePiecesAlike;
  return load.freePieces ? [load.freePieces] : null;
}

/**
 * What ORT's CPU arena leaves resident after the run's first request and after all of them
 * (ort-arena.ts), MiB; null without a trace (the pattern times the largest batch stands in).
 * `holdEvalOutputs`: the eval pass keeps its outputs in the arena until it ends (python-ort;
 * ort-arena.ts EvalPass). `pieceSets`: the load's held blocks, where the regions and tables
 * that fit cost nothing beyond heldMiB (ort-heap-reuse.ts), as the probe's alike runs left them:
 * the run whose resident figure is the median counts, so one process's draw of blocks does not
 * move the estimate; null: every written page counts. `before`: blocks malloc'd ahead of the
 * arena's, which take held blocks first (`beforeServedMiB`: how much of them held blocks took).
 * `loadRoomMiB`: the room the load left unwritten in the arena (ort-load.ts untouchedMiB).
 * `heldLeft`: the held blocks that run's arena left (node-ort's dead outputs take them first).
 */
function ortArenaMiB(t: ModelTerms, run: RunShape, holdEvalOutputs: boolean, pieceSets: readonly (readonly FreePieces[])[] | null, before: readonly number[], loadRoomMiB: number): { firstRequestMiB: number; residentMiB: number; beforeServedMiB: number; heldLeft: FreePieces[] | null } | null {
  if (!t.ortTracePerSample) return null;
  const batches = run.batchSizes ?? [...new Set([1, run.maxBatch])];
  const dims = t.ortInputDims;
  const key = dims ? (batch: number) => ortPatternKey(dims, batch) : undefined;
  const evalPass = { chunks: evalChunks(run.evalSamples, Math.max(...batches)), holdOutputs: holdEvalOutputs };
  const replay = replayOrtArena(t.ortTracePerSample, batches, key, evalPass, loadRoomMiB * MIB);
  const each = (pieceSets ?? [null]).map((pieces) => arenaResidentBeyondHeld(replay, pieces, before)).sort((a, b) => a.residentBytes - b.residentBytes);
  const beyondHeld = each[(each.length - 1) >> 1]!;
  return { firstRequestMiB: beyondHeld.firstRequestBytes / MIB, residentMiB: beyondHeld.residentBytes / MIB, beforeServedMiB: beyondHeld.beforeServedBytes / MIB, heldLeft: beyondHeld.heldLeft };
}
