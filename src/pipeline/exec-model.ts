/** Executors of the stages that make a model: train, export (trained or zoo). */
import { readFile } from "node:fs/promises";
import { basename, resolve } from "node:path";
import type { WorkerSpec } from "../workers/options.ts";
import type { RunSession } from "./session.ts";
import { workerSpecs } from "../workers/specs.ts";
import { generatedInputs } from "./inputs/generate.ts";
import type { ExportOptions, HeldOut, StageDef, TrainOptions } from "./stages.ts";

/** What an executor tells the stage report: which worker ran it, as which task. */
export interface StageMeta {
  kind: string;
  worker: string;
  pid: number | null;
  /** One line for the terminal when the stage ends. */
  summary?: string;
}

export interface TrainResult {
  arch: string;
  accuracy: number;
  epochs: number;
  checkpoint: string;
  checkpointPt: string;
  heldout: { inputs: string; labels: string; shape: number[]; dtype?: "float32" | "int64" };
  device: string;
  /** Bytes of the parameter, gradient and optimizer-state tensors the process held after its last step. */
  tensorBytes?: TensorBytes;
}

export interface TensorBytes {
  params: number;
  grads: number;
  optimizer: number;
}

export interface ExportResult {
  arch: string;
  onnx: string;
  /** Zoo models: the seed of their random weights (python-torch rebuilds them from it). */
  seed?: number;
  checkpoint?: string;
  inputShape?: number[];
  maxAbsDiff?: number;
}

/**
 * A fresh Python worker named for its stage or runtime (names appear in errors). Its OpenMP
 * pool is sized to `threads`: torch's default (one spinning thread per core) makes training
 * several times slower on a shared 2-core machine.
 */
export const pythonWorker = (name: string, threads = 1): WorkerSpec =>
  workerSpecs.python({
    name: name.replace(/[^\w.@-]/g, "-"),
    env: { OMP_NUM_THREADS: String(threads), MKL_NUM_THREADS: String(threads) },
  });

async function readTyped<T>(file: string, make: (b: ArrayBuffer) => T): Promise<T> {
  const buf = await readFile(file);
  return make(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength) as ArrayBuffer);
}

/** The train task's arguments from a train stage's options (single process and every rank alike). */
export function trainArgs(o: Readonly<TrainOptions>, s: RunSession): Record<string, unknown> {
  return {
    arch: o.arch,
    outDir: s.runDir,
    device: o.device ?? s.options.device,
    ...(o.epochs !== undefined ? { epochs: o.epochs } : {}),
    ...(o.stepsPerEpoch !== undefined ? { stepsPerEpoch: o.stepsPerEpoch } : {}),
    ...(o.seed !== undefined ? { seed: o.seed } : {}),
    ...(o.batchSize !== undefined ? { batchSize: o.batchSize } : {}),
    ...(o.lr !== undefined ? { lr: o.lr } : {}),
  };
}

export async function runTrain(
  s: RunSession,
  stage: Extract<StageDef, { kind: "train" }>,
  signal: AbortSignal,
  meta: StageMeta,
): Promise<TrainResult> {
  const o: Readonly<TrainOptions> = stage.opts;
  meta.kind = "train";
  meta.worker = "python";
  const run = await s.runTask(
    pythonWorker(stage.name, o.threads ?? s.options.threads),
    "train",
    trainArgs(o, s),
    {
      signal,
      onWorker: (w) => (meta.pid = w.pid ?? null),
      onProgress: (p) => {
        const acc = p.metrics?.accuracy;
        s.progress.update(stage.name, p.current, p.total, `${p.label}${acc !== undefined ? ` held-out acc ${acc.toFixed(3)}` : ""}`);
      },
    },
  );
  const v = run.result.value as unknown as TrainResult;
  s.training = {
    accuracy: v.accuracy,
    epochs: v.epochs,
    device: v.device,
    process: { pid: run.pid, kind: "python", command: run.command },
    marks: run.result.phases,
    ...(v.tensorBytes ? { tensorBytes: v.tensorBytes } : {}),
    stage: stage.name,
  };
  await adoptHeldout(s, v);
  meta.summary = `held-out accuracy ${v.accuracy.toFixed(4)} after ${v.epochs} epochs`;
  if (o.minAccuracy !== undefined && v.accuracy < o.minAccuracy)
    throw new Error(`held-out accuracy ${v.accuracy.toFixed(4)} is below minAccuracy ${o.minAccuracy}`);
  return v;
}

/** Reads a training's held-out set into the session (what the benchmarks evaluate on). */
export async function adoptHeldout(s: RunSession, v: Pick<TrainResult, "heldout">): Promise<void> {
  // Held-out inputs in another dtype (tiny-gpt's int64 windows) wait for the export stage,
  // which knows the graph input they feed (heldout-eval.ts).
  const dtype = v.heldout.dtype ?? "float32";
  const [inputs, labels] = await Promise.all([
    readTyped(v.heldout.inputs, (b) => (dtype === "int64" ? new BigInt64Array(b) : new Float32Array(b))),
    readTyped(v.heldout.labels, (b) => new BigInt64Array(b)),
  ]);
  s.heldout =
    inputs instanceof Float32Array
      ? { inputs, labels, shape: v.heldout.shape }
      : { inputs: new Float32Array(0), labels, shape: [v.heldout.shape[0]!], raw: { dtype: "int64", shape: v.heldout.shape, data: inputs } };
}

export { generatedInputs } from "./inputs/generate.ts";

export async function runExport(
  s: RunSession,
  stage: Extract<StageDef, { kind: "export" }>,
  signal: AbortSignal,
  meta: StageMeta,
): Promise<ExportResult> {
  const o: Readonly<ExportOptions> = stage.opts;
  meta.worker = "python";
  const onWorker = (w: { pid: number | undefined }): void => void (meta.pid = w.pid ?? null);
  if (o.onnx !== undefined) return useOnnx(s, o, o.onnx, meta);
  if (o.zoo !== undefined) {
    meta.kind = "zoo.export";
    const seed = o.seed ?? 0;
    const out = s.artifact(`${o.zoo}.onnx`);
    const run = await s.runTask(pythonWorker(stage.name), "zoo.export", { arch: o.zoo, out, seed }, { signal, onWorker });
    const v = run.result.value as { onnx: string; inputShape: number[]; inputDtype?: string; params: number };
    const nEval = o.evalSamples ?? 256;
    if ((v.inputDtype ?? "float32") !== "float32") {
      // Integer inputs (tiny-gpt's byte ids) are fed in their own dtype, within the vocabulary
      // of the Gather they index, as for an existing ONNX file: standard normal floats would
      // reach no runtime (torch's embedding refuses floats, ORT the wrong element type).
      const { prepareEvalSet } = await import("./inputs/eval-set.ts");
      const set = prepareEvalSet(v.onnx, { nEval, seed: seed + 1 });
      s.heldout ??= { inputs: new Float32Array(0), labels: null, shape: [set.nEval], model: set };
    } else {
      const shape = [nEval, ...v.inputShape.slice(1)];
      const inputs = generatedInputs(shape, seed + 1);
      await s.writeArtifact("eval-inputs.f32", new Uint8Array(inputs.buffer));
      s.heldout ??= { inputs, labels: null, shape };
    }
    meta.summary = `${o.zoo}: ${v.params} parameters (random weights, seed ${seed}) → ${v.onnx}`;
    return { arch: o.zoo, onnx: v.onnx, seed, inputShape: v.inputShape };
  }
  meta.kind = "export";
  const trained = s.results.get(o.from!) as TrainResult | undefined;
  if (!trained) throw new Error(`export needs the result of stage "${o.from}", which did not run`);
  const out = s.artifact(`${trained.arch}.onnx`);
  const run = await s.runTask(
    pythonWorker(stage.name),
    "export",
    { arch: trained.arch, checkpoint: trained.checkpoint, out, ...(o.opset !== undefined ? { opset: o.opset } : {}) },
    { signal, onWorker },
  );
  const v = run.result.value as { onnx: string; maxAbsDiff: number };
  if (s.heldout?.raw && !s.heldout.model) {
    const { heldoutEvalSet } = await import("./heldout-eval.ts");
    s.heldout.model = heldoutEvalSet(v.onnx, s.heldout.raw);
  }
  meta.summary = `${v.onnx} (ORT vs torch max abs diff ${v.maxAbsDiff.toExponential(2)})`;
  return { arch: trained.arch, onnx: v.onnx, checkpoint: trained.checkpoint, maxAbsDiff: v.maxAbsDiff };
}

/**
 * An existing ONNX file: every graph input fed in its own dtype and shape, generated
 * (inputs/generate.ts) or read from `inputs`; the single-tensor fields of the eval set hold
 * the first input when it is float32.
 */
async function useOnnx(s: RunSession, o: Readonly<ExportOptions>, file: string, meta: StageMeta): Promise<ExportResult> {
  meta.kind = "inline";
  meta.worker = "node";
  meta.pid = process.pid;
  const { prepareEvalSet } = await import("./inputs/eval-set.ts");
  const set = prepareEvalSet(file, {
    ...(o.shapes ? { shapes: o.shapes } : {}), ...(o.seq !== undefined ? { seq: o.seq } : {}),
    ...(o.inputs !== undefined ? { inputsFile: o.inputs } : {}), nEval: o.evalSamples ?? 256, seed: o.seed ?? 0,
  });
  const first = set.inputs[0];
  if (!first) throw new Error(`${file}: the model has no graph input`);
  const float = first.tensor.dtype === "float32" && first.spec.batchAxis === 0;
  s.heldout ??= {
    inputs: float ? (first.tensor.data as Float32Array) : new Float32Array(0),
    labels: null,
    shape: float ? first.tensor.shape : [set.nEval],
    model: set,
  };
  const arch = basename(file).replace(/\.onnx$/i, "");
  const shapes = set.inputs.map((i) => `"${i.spec.name}" ${i.spec.dtype} [${i.spec.shape.map((d) => (d < 0 ? "N" : d)).join(", ")}]`);
  meta.summary = `${file}: ${shapes.join(", ")}, ${set.nEval} ${o.inputs !== undefined ? "samples from the file" : "generated samples"}`;
  return { arch, onnx: resolve(file), inputShape: first.spec.batchAxis === 0 ? first.spec.shape : [-1, ...first.tensor.shape.slice(1)] };
}
