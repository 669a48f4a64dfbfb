/**
 * The eval set of an existing ONNX model (`memlane compare`, `.export({ onnx })`): every
 * graph input in its own dtype and shape, generated (generate.ts) or read from `--inputs`,
 * batch first as the infer tasks receive them, and every graph output's IoSpec.
 */
import type { Tensor } from "../../transport/codec.ts";
import { generateInput } from "./generate.ts";
import { type InputArray, readInputFile } from "./files.ts";
import { indexBounds } from "./index-bounds.ts";
import { type OnnxIo, readOnnxIo } from "./onnx-io.ts";
import { InputSpecError, type IoSpec, type ModelIo, resolveModelIo, type ShapeOverrides } from "./shapes.ts";
import { moveAxisToFront } from "./tensor-data.ts";

export interface EvalInput {
  spec: IoSpec;
  /** Batch first, `nEval` rows (an input without batch: as the model takes it). */
  tensor: Tensor;
  /** Where the values come from, for the report. */
  values: string;
}

export interface EvalSet {
  io: ModelIo;
  inputs: EvalInput[];
  nEval: number;
  /** The model's fixed batch size when it has no free batch dimension (then only that batch runs). */
  staticBatch: number | null;
}

export interface EvalSetOptions {
  shapes?: ShapeOverrides;
  seq?: number;
  /** An .npz or .safetensors file with one array per input (the model's layout). */
  inputsFile?: string;
  /** Generated rows (default 256; a file gives its own count). */
  nEval?: number;
  seed?: number;
}

const fmt = (s: readonly number[]) => `[${s.map((d) => (d < 0 ? "N" : String(d))).join(", ")}]`;

/**
 * The shape of every input's array in an `--inputs` file (resolveModelIo's `fromFile`), each
 * checked to exist with the input's dtype: what the eval set reads, and what the estimate
 * plans at (src/estimate/model-terms.ts).
 */
export function inputFileShapes(file: string, io: OnnxIo, arrays: Map<string, InputArray> = readInputFile(file)): Record<string, number[]> {
  const shapes: Record<string, number[]> = {};
  for (const i of io.inputs) {
    const a = arrays.get(i.name);
    if (!a) throw new InputSpecError(`--inputs: ${file} has no array "${i.name}" for input "${i.name}" (its arrays: ${[...arrays.keys()].join(", ") || "none"})`, "--inputs");
    if ("foreign" in a || a.dtype !== i.dtype)
      throw new InputSpecError(`--inputs: array "${i.name}" in ${file} is ${"foreign" in a ? a.foreign : a.dtype}, input "${i.name}" takes ${i.dtype ?? i.elemTypeName}`, "--inputs");
    shapes[i.name] = a.shape;
  }
  return shapes;
}

function fromFile(file: string, io: OnnxIo, opts: EvalSetOptions): EvalSet {
  const arrays = readInputFile(file);
  const r = resolveModelIo(io, { ...opts, fromFile: inputFileShapes(file, io, arrays) });
  let nEval: number | null = null;
  const inputs = r.inputs.map((spec): EvalInput => {
    const a = arrays.get(spec.name) as Tensor;
    const ok = a.shape.length === spec.shape.length && spec.shape.every((d, k) => k === spec.batchAxis || d === a.shape[k]);
    if (!ok) throw new InputSpecError(`--inputs: array "${spec.name}" has shape ${fmt(a.shape)}, input "${spec.name}" takes ${fmt(spec.shape)}`, "--inputs");
    if (spec.batchAxis >= 0) {
      const n = a.shape[spec.batchAxis]!;
      if (nEval !== null && n !== nEval)
        throw new InputSpecError(`--inputs: array "${spec.name}" has ${n} rows on its batch axis ${spec.batchAxis}, the arrays before it ${nEval}`, "--inputs");
      nEval = n;
    }
    const moved = moveAxisToFront(a.dtype, a.data, a.shape, spec.batchAxis);
    return { spec, tensor: { dtype: a.dtype, shape: moved.shape, data: moved.data }, values: `from ${file}` };
  });
  return { io: { inputs: r.inputs, outputs: r.outputs }, inputs, nEval: nEval ?? 1, staticBatch: r.staticBatch };
}

/** Throws InputSpecError naming the option or the input for anything the user must fix. */
export function prepareEvalSet(onnxFile: string, opts: EvalSetOptions = {}): EvalSet {
  const io = readOnnxIo(onnxFile);
  if (opts.inputsFile !== undefined) return fromFile(opts.inputsFile, io, opts);
  const r = resolveModelIo(io, opts);
  const bounds = indexBounds(io);
  const nEval = opts.nEval ?? 256;
  const seed = opts.seed ?? 0;
  const inputs = r.inputs.map((spec, k) => ({ spec, ...generateInput(spec, nEval, seed + 1 + k, bounds.get(spec.name)) }));
  return { io: { inputs: r.inputs, outputs: r.outputs }, inputs, nEval, staticBatch: r.staticBatch };
}
