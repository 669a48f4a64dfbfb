/**
 * Graph inputs -> plan shapes and dtypes. The batch is the one symbolic dimension of each
 * input (or the first, when every dimension is fixed); `inputShapes` (the full model shape
 * with -1 at the batch axis, docs/plan-format.md "Shapes") fixes every other dimension.
 */
import { CompileError } from "./errors.ts";
import { BATCH, type DType, type Graph, fmtShape } from "./ir.ts";

/** ONNX TensorProto element types a plan v2 tensor may have, and float16 (ORT's replay only: a plan refuses it, build.ts). */
const ONNX_DTYPES: Partial<Record<number, DType>> = { 1: "float32", 7: "int64", 6: "int32", 9: "bool", 10: "float16" };
const ONNX_NAMES: Record<number, string> = { 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 10: "float16", 11: "double", 12: "uint32", 13: "uint64", 16: "bfloat16" };

export function dtypeOfOnnx(elemType: number): DType | undefined {
  return ONNX_DTYPES[elemType];
}

export interface ResolvedInput {
  name: string;
  shape: number[];
  dtype: DType;
}

/** `float16Inputs`: take float16 graph inputs (ORT's replay of a half-precision model); a plan takes none. */
export function resolveInputs(g: Graph, inputShapes: Record<string, number[]>, warn: (m: string) => void, float16Inputs = false): ResolvedInput[] {
  const known = new Set(g.inputs.map((i) => i.name));
  for (const name of Object.keys(inputShapes)) {
    if (!known.has(name)) throw new CompileError(`options.inputShapes: "${name}" is not a graph input of ${g.file} (inputs: ${[...known].join(", ")})`, "option", { input: name });
  }
  return g.inputs.map((inp) => {
    const dtype = dtypeOfOnnx(inp.elemType);
    if (!dtype || (dtype === "float16" && !float16Inputs)) {
      const t = ONNX_NAMES[inp.elemType] ?? `element type ${inp.elemType}`;
      throw new CompileError(`${g.file}: graph input "${inp.name}" is ${t}; plan v2 takes float32, int64, int32 and bool inputs`, "invalid-model", { input: inp.name });
    }
    const given = inputShapes[inp.name];
    if (given) return { name: inp.name, dtype, shape: fromGiven(g.file, inp.name, inp.dims, given) };
    if (inp.dims.length < 1) throw new CompileError(`${g.file}: graph input "${inp.name}" has no shape; give it with options.inputShapes (-1 at the batch axis)`, "shape", { input: inp.name });
    const symbolic = inp.dims.flatMap((d, i) => (typeof d === "number" ? [] : [i]));
    if (symbolic.length > 1) {
      const i = symbolic[1]!;
      throw new CompileError(
        `${g.file}: graph input "${inp.name}" dimension ${i} is "${inp.dims[i] ?? "unknown"}" and dimension ${symbolic[0]} is "${inp.dims[symbolic[0]!] ?? "unknown"}"; only the batch may stay symbolic: give the others with options.inputShapes (e.g. { "${inp.name}": [-1, 128] })`,
        "shape", { input: inp.name, dim: i },
      );
    }
    const axis = symbolic[0] ?? 0;
    if (symbolic.length === 0) warn(`input "${inp.name}" has a fixed first dimension ${inp.dims[0]}; it is planned as the (variable) batch`);
    return { name: inp.name, dtype, shape: inp.dims.map((d, i) => (i === axis ? BATCH : (d as number))) };
  });
}

function fromGiven(file: string, name: string, dims: (number | string | undefined)[], given: number[]): number[] {
  const bad = (why: string) => new CompileError(`options.inputShapes["${name}"]: ${why} (the model's ${file} has [${dims.map((d) => d ?? "?").join(", ")}])`, "option", { input: name });
  if (!Array.isArray(given) || given.some((d) => !Number.isInteger(d))) throw bad(`expected a list of integers, received ${JSON.stringify(given)}`);
  if (given.length !== dims.length) throw bad(`expected ${dims.length} dimensions, received ${given.length}`);
  if (given.filter((d) => d === -1).length !== 1) throw bad(`expected exactly one -1 (the batch axis), received ${fmtShape(given)}`);
  given.forEach((d, i) => {
    if (d !== -1 && d < 1) throw bad(`dimension ${i} must be >= 1 or -1, received ${d}`);
    const m = dims[i];
    if (typeof m === "number" && d !== -1 && m !== d) throw bad(`dimension ${i} is fixed to ${m} in the model, received ${d}`);
  });
  return [...given];
}
