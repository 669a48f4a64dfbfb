/**
 * The benchmark executor: one runtime, one fresh process (python-torch, python-ort and native
 * are workers; node-ort a child Node process). Held-out inputs travel as tensor frames (to
 * node-ort, as a file); outputs come back and are kept for the numerics, computed for every
 * runtime in one place (numerics.ts).
 */
import type { PhaseMarkInput } from "../memory/phases.ts";
import type { LatencyTable } from "../report/schema.ts";
import { runNodeOrt } from "../workers/node-ort.ts";
import { withProcessTmpdir } from "../workers/process-tmpdir.ts";
import type { ExportResult, StageMeta, TrainResult } from "./exec-model.ts";
import { pythonWorker } from "./exec-model.ts";
import type { RunSession, WorkerRun } from "./session.ts";
import { memlaneRtBinary, workerSpecs } from "../workers/specs.ts";
import { ErrorCode } from "../transport/protocol.ts";
import type { BenchmarkResult, HeldOut, OutputTensor, StageDef, UnavailableRuntime } from "./stages.ts";
import type { ModelIo } from "./inputs/shapes.ts";
import { firstAsFloat32, outputsOf } from "./worker-outputs.ts";
import { profileFromTask, type RuntimeProfile } from "../report/profile.ts";
import { resolveProfile } from "./profile-option.ts";

/** What a python-torch row's profile says (docs/profiling.md). */
export const TORCH_NO_PROFILE = "python-torch has no per-op profiler";

type BenchStage = Extract<StageDef, { kind: "benchmark" }>;

const PHASE_COUNT = 5; // import, runtime-create, model-load, first-inference, steady-inference

interface Measured {
  pid: number;
  kind: "python" | "memlane-rt" | "node";
  command: string[];
  versions: Record<string, string>;
  device: string;
  marks: PhaseMarkInput[];
  latencyMs: LatencyTable;
  throughputPerS: number;
  /** Pipelined samples/s (memlane-rt and python-torch on CUDA); null where not measured (ORT, node-ort, the CPU). */
  pipelinedThroughputPerS: number | null;
  /** memlane-rt's backendNotes; null when the runtime has none or they are empty. */
  backendNotes: string | null;
  outputSet: OutputTensor[];
  plan?: BenchmarkResult["plan"];
  /** The task's raw per-op profile (benchmark option `profile`). */
  profile?: unknown;
}

function source(s: RunSession, stage: BenchStage): TrainResult | ExportResult {
  const r = s.results.get(stage.opts.from!) as TrainResult | ExportResult | undefined;
  if (!r) throw new Error(`benchmark needs the result of stage "${stage.opts.from}", which did not run`);
  return r;
}

function needOnnx(stage: BenchStage, r: TrainResult | ExportResult): string {
  if (!("onnx" in r)) throw new Error(`runtime ${stage.runtime} needs an ONNX model: "from" must name an export stage`);
  return r.onnx;
}

function fromWorker(run: WorkerRun, kind: Measured["kind"], io: ModelIo | null, legacyName: string, plan?: Measured["plan"]): Measured {
  // pipelinedThroughputPerS comes from infer.native and (on CUDA) infer.torch, backendNotes from
  // infer.native (docs/worker-tasks.md, "Pipelined timing"); a worker without them measured none.
  const v = run.result.value as {
    latencyMs: LatencyTable; throughputPerS: number; device?: string; pipelinedThroughputPerS?: unknown; backendNotes?: unknown;
  };
  return {
    pid: run.pid,
    kind,
    command: run.command,
    versions: run.versions,
    device: v.device ?? "cpu",
    marks: run.result.phases,
    latencyMs: v.latencyMs,
    throughputPerS: v.throughputPerS,
    pipelinedThroughputPerS: typeof v.pipelinedThroughputPerS === "number" && Number.isFinite(v.pipelinedThroughputPerS) ? v.pipelinedThroughputPerS : null,
    backendNotes: typeof v.backendNotes === "string" && v.backendNotes.trim() !== "" ? v.backendNotes.trim() : null,
    outputSet: outputsOf(run.result.tensors, io, legacyName),
    ...(plan ? { plan } : {}),
    ...((run.result.value as { profile?: unknown }).profile !== undefined ? { profile: (run.result.value as { profile?: unknown }).profile } : {}),
  };
}

/**
 * The message limit of a benchmark's worker: the eval set's outputs come back in one message,
 * and a decoder LM's logits over 256 samples pass the default limit (RunSession.messageLimitFor).
 * Sized from the exported graph at the shapes the run feeds; a source without one (a trained
 * checkpoint for python-torch) keeps the run's limit.
 */
async function evalSetMessageLimit(s: RunSession, stage: BenchStage, src: TrainResult | ExportResult, held: HeldOut): Promise<number> {
  const nEval = held.model?.nEval ?? held.shape[0] ?? 0;
  let bytes: number | null = null;
  if ("onnx" in src) {
    // Every benchmark of the run reads the same graph: parsed once (a large model's file is GBs).
    bytes = s.evalSetBytes.get(src.onnx) ?? null;
    if (!s.evalSetBytes.has(src.onnx)) {
      const { evalSetMessageBytes } = await import("../estimate/model-terms.ts");
      const io = held.model?.io;
      bytes = evalSetMessageBytes(src.onnx, io ? Object.fromEntries(io.inputs.map((i) => [i.name, i.shape])) : undefined, nEval);
      s.evalSetBytes.set(src.onnx, bytes);
    }
  }
  return s.messageLimitFor(bytes, `stage "${stage.name}"`);
}

export async function runBenchmark(
  s: RunSession,
  stage: BenchStage,
  signal: AbortSignal,
  meta: StageMeta,
): Promise<BenchmarkResult | UnavailableRuntime> {
  const o = stage.opts;
  const held: HeldOut | null = s.heldout;
  if (!held) throw new Error("no eval inputs: the pipeline needs a train stage or a zoo export before benchmarks");
  const common = {
    batchSizes: o.batchSizes ?? [...s.options.batchSizes],
    iterations: o.iterations ?? s.options.iterations,
    warmup: o.warmup ?? s.options.warmup,
    threads: o.threads ?? s.options.threads,
  };
  let phasesSeen = 0;
  const onPhase = (m: { name: string; mark: string }): void => {
    if (m.mark === "end") s.progress.update(stage.name, ++phasesSeen, PHASE_COUNT, `${m.name} done`);
  };
  const onWorker = (w: { pid: number | undefined }): void => void (meta.pid = w.pid ?? null);
  const src = source(s, stage);
  // An existing ONNX model's eval set goes in the multi-input form (docs/worker-tasks.md,
  // "Several inputs and outputs"); a trained or zoo model's single float32 set as "inputs".
  const io = held.model?.io ?? null;
  const legacyName = held.model?.io.outputs[0]?.name ?? "outputs";
  if (held.model?.staticBatch != null) {
    const b = held.model.staticBatch;
    if (common.batchSizes.some((n) => n !== b)) {
      const note = `the model's batch is fixed at ${b}: batch size ${b} only (asked for ${common.batchSizes.join(", ")})`;
      if (!s.notes.includes(note)) s.notes.push(note);
      common.batchSizes = [b];
    }
  }
  const tensors = io ? s.evalTensors(held) : { inputs: s.evalTensor(held) };
  const messageLimit = await evalSetMessageLimit(s, stage, src, held);
  const ioArgs = io ? { io } : {};
  // Per-op profile after the timed calls (docs/profiling.md); python-torch has none, and its
  // row says so (as the CUDA backend's does) rather than dropping the asked-for profile.
  const profile = resolveProfile(o, common.batchSizes, common.iterations, stage.name);
  const profileArgs = profile && stage.runtime !== "python-torch" ? { profile: true, profileBatch: profile.batch, profileIterations: profile.iterations } : {};
  let m: Measured;
  switch (stage.runtime) {
    case "python-torch": {
      meta.kind = "infer.torch";
      meta.worker = "python";
      const model = "checkpoint" in src && src.checkpoint ? { checkpoint: src.checkpoint } : { seed: (src as ExportResult).seed ?? 0 };
      const run = await s.runTask(pythonWorker(stage.runtime, common.threads), "infer.torch", { arch: src.arch, ...model, ...common, ...ioArgs, device: o.device ?? s.options.device }, { signal, onWorker, onPhase, tensors, messageLimit });
      m = fromWorker(run, "python", io, legacyName);
      break;
    }
    case "python-ort": {
      meta.kind = "infer.ort";
      meta.worker = "python";
      const args = { model: needOnnx(stage, src), ...common, ...ioArgs, ...profileArgs, device: o.device ?? s.options.device, ...(o.ort ? { ort: o.ort } : {}) };
      const run = await s.runTask(pythonWorker(stage.runtime, common.threads), "infer.ort", args, { signal, onWorker, onPhase, tensors, messageLimit });
      m = fromWorker(run, "python", io, legacyName);
      break;
    }
    case "node-ort": {
      meta.kind = "infer.node-ort";
      meta.worker = "node";
      const marks: PhaseMarkInput[] = [];
      const feeds = held.model ? { io: held.model.io, feeds: held.model.inputs.map((i) => ({ name: i.spec.name, ...i.tensor })) } : {};
      const { outputs, outputShape, outputSet, ...r } = await withProcessTmpdir(s.tmpDir, () =>
        runNodeOrt(
          { model: needOnnx(stage, src), inputs: held.inputs, shape: held.shape, ...common, ...feeds, ...(o.ort ? { ort: o.ort } : {}), ...(profile ? { profile } : {}) },
          { signal, onPhase: (p) => (marks.push(p), onPhase(p)), onProcess: (p) => (meta.pid = p.pid, s.trackProcess(p.pid, stage.name, p.exited)) },
        ),
      );
      m = {
        ...r, kind: "node", marks, pipelinedThroughputPerS: null, backendNotes: null,
        outputSet: outputSet ?? [{ name: legacyName, dtype: "float32", shape: outputShape, data: outputs }],
      };
      break;
    }
    case "native": {
      meta.kind = "infer.native";
      meta.worker = "memlane-rt";
      const unavailable = (reason: string, code?: number): UnavailableRuntime => {
        meta.summary = `unavailable: ${reason}`;
        const u: UnavailableRuntime = { runtime: stage.runtime, available: false, reason, ...(code !== undefined ? { code } : {}) };
        s.unavailable.push(u);
        return u;
      };
      try {
        memlaneRtBinary();
      } catch (err) {
        return unavailable((err as Error).message);
      }
      const { compileOnnx } = await import("../compiler/compile.ts");
      const onnx = needOnnx(stage, src);
      const planPath = s.artifact(`${src.arch}.mlplan`);
      // The plan is compiled for the shapes every runtime is fed (plan v2: non-batch dims fixed,
      // the batch free), and memlane-rt gets the same named inputs as the other runtimes.
      const nativeIo = io ?? null;
      const compileOpts = io ? { inputShapes: Object.fromEntries(io.inputs.map((i) => [i.name, i.shape])) } : undefined;
      let c: Awaited<ReturnType<typeof compileOnnx>>;
      try {
        c = await compileOnnx(onnx, planPath, compileOpts);
      } catch (err) {
        // An op memlane-rt lacks: the model still runs on the other runtimes, whose rows a
        // user comparing it wants; any other compile error is a failure.
        if ((err as { code?: unknown }).code === ErrorCode.UNSUPPORTED_OP) return unavailable((err as Error).message, ErrorCode.UNSUPPORTED_OP);
        throw err;
      }
      const plan = { path: planPath, arenaBytesPerSample: c.arenaBytesPerSample, lowerBoundPerSample: c.lowerBoundPerSample };
      const spec = workerSpecs.memlaneRt({ name: stage.runtime, args: ["--threads", String(common.threads)] });
      const device = o.device ?? s.options.device;
      const run = await s.runTask(spec, "infer.native", { model: planPath, ...common, ...(nativeIo ? { io: nativeIo } : {}), ...profileArgs, device }, { signal, onWorker, onPhase, tensors, messageLimit });
      m = fromWorker(run, "memlane-rt", nativeIo, legacyName, plan);
      break;
    }
  }
  const opProfile: RuntimeProfile | undefined = !profile ? undefined
    : stage.runtime === "python-torch" ? profileFromTask({ batch: profile.batch, unavailable: TORCH_NO_PROFILE }, "pytorch", `${stage.name} (${meta.kind})`)
    : m.profile !== undefined ? profileFromTask(m.profile, stage.runtime === "native" ? "memlane-rt" : "onnxruntime", `${stage.name} (${meta.kind})`)
    : undefined;
  s.runtimes.push({
    name: stage.runtime,
    process: { pid: m.pid, kind: m.kind, command: m.command },
    device: m.device,
    versions: m.versions,
    marks: m.marks,
    latencyMs: m.latencyMs,
    throughputPerS: m.throughputPerS,
    pipelinedThroughputPerS: m.pipelinedThroughputPerS,
    backendNotes: m.backendNotes,
    accuracy: null, // filled in by numerics.ts once every runtime has run
    maxAbsDiff: null,
    ...(opProfile ? { profile: opProfile } : {}),
  });
  const outputs = firstAsFloat32(m.outputSet);
  await s.writeArtifact(`outputs-${stage.runtime}.f32`, new Uint8Array(outputs.buffer, outputs.byteOffset, outputs.byteLength));
  const b1 = m.latencyMs[`batch${common.batchSizes[0]!}`];
  meta.summary = `p50 ${b1 ? b1.p50.toFixed(3) : "?"} ms at batch ${common.batchSizes[0]}, ${Math.round(m.throughputPerS)}/s` +
    (m.pipelinedThroughputPerS !== null ? `, pipelined ${Math.round(m.pipelinedThroughputPerS)}/s` : "");
  const result: BenchmarkResult = {
    runtime: stage.runtime,
    available: true,
    pid: m.pid,
    device: m.device,
    latencyMs: m.latencyMs,
    throughputPerS: m.throughputPerS,
    outputs,
    outputShape: m.outputSet[0]?.shape ?? [],
    outputSet: m.outputSet,
    accuracy: null,
    maxAbsDiff: null,
    outputDiffs: null,
    ...(m.plan ? { plan: m.plan } : {}),
  };
  s.benchmarks.set(stage.runtime, result);
  return result;
}
