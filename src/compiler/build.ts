/** Inferred graph + arena -> plan header and weights blob (docs/plan-format.md, "Header"). */
import type { Arena } from "./arena.ts";
import { CompileError } from "./errors.ts";
import type { Inferred } from "./infer.ts";
import { type ConstTensor, DTYPE_BYTES, type DType, defaultDtype, fmtShape, isReplayOnlyType, perSample } from "./ir.ts";
import { PLAN_ALIGNMENT, type PlanDType, type PlanHeader, type PlanTensor, alignUp } from "./plan-format.ts";

export interface Built {
  header: PlanHeader;
  /** Weights in blob order with their blob offsets (little-endian element bytes). */
  weights: { offset: number; data: Uint8Array }[];
  blobBytes: number;
}

/** Ops with an optional trailing input always list it (-1 when absent): a fixed arity. */
const ARITY: Record<string, number> = { Conv: 3, Gemm: 3 };

function withArity(op: string, inputs: string[]): string[] {
  const n = ARITY[op] ?? inputs.length;
  return [...inputs, ...new Array<string>(Math.max(0, n - inputs.length)).fill("")];
}

/** A tensor's plan dtype; the quantized integer types and float16 exist only in the estimate's replay of ONNX Runtime. */
function planDtype(dtype: DType, name: string, source: string): PlanDType {
  if (isReplayOnlyType(dtype)) throw new CompileError(`${source}: tensor "${name}" is ${dtype}; memlane-rt plans float32, int64, int32 and bool tensors`, "unsupported-op", { tensor: name });
  return dtype;
}

/** `concatInPlace`: the arena lays Concat inputs in their output (concat-in-place.ts); the header says so. */
export function buildPlan(inf: Inferred, arena: Arena, producer: string, source: string, concatInPlace = false): Built {
  const tensors: PlanTensor[] = [];
  const ids = new Map<string, number>();
  const weights: Built["weights"] = [];
  let blob = 0;
  const inputs = new Set(inf.inputs), outputs = new Set(inf.outputs);

  const idOf = (name: string): number => {
    if (!name) return -1;
    const known = ids.get(name);
    if (known !== undefined) return known;
    const c = inf.consts.get(name);
    let t: PlanTensor;
    if (c) {
      if (c.sym && Array.from(c.data).some((v) => Math.abs(v) >= 2 ** 31)) {
        throw new CompileError(`${source}: constant "${name}" ${fmtShape(Array.from(c.data))} depends on the batch size; memlane-rt needs it as a run-time computation it does not have`, "shape", { tensor: name });
      }
      const dtype = planDtype(defaultDtype(c), name, source);
      const data = weightBytes(c, dtype);
      const bytes = data.length;
      t = { name, dtype, shape: [...c.dims], kind: "weight", offset: blob, bytes };
      weights.push({ offset: blob, data });
      blob = alignUp(blob + bytes, PLAN_ALIGNMENT);
    } else {
      const shape = inf.shapes.get(name)!;
      const kind = inputs.has(name) ? "input" : outputs.has(name) ? "output" : "activation";
      const dtype = planDtype(inf.dtypes.get(name) ?? "float32", name, source);
      t = { name: inf.outputNames.get(name) ?? name, dtype, shape: [...shape], kind, offset: arena.offsets.get(name)!, bytes: perSample(shape) * DTYPE_BYTES[dtype] };
    }
    ids.set(name, tensors.length);
    tensors.push(t);
    return tensors.length - 1;
  };

  const inputIds = inf.inputs.map(idOf);
  const ops = inf.nodes.map((n) => ({ op: n.op, name: n.name, inputs: withArity(n.op, n.inputs).map(idOf), outputs: n.outputs.map(idOf), attrs: n.attrs }));
  const outputIds = inf.outputs.map(idOf);
  const header: PlanHeader = {
    producer,
    source,
    tensors,
    inputs: inputIds,
    outputs: outputIds,
    ops,
    arena: { bytesPerSample: arena.bytesPerSample, lowerBoundPerSample: arena.lowerBoundPerSample, alignment: PLAN_ALIGNMENT, ...(concatInPlace ? { concatInPlace } : {}) },
  };
  return { header, weights, blobBytes: blob };
}

/** A constant's elements in the plan's little-endian storage of `dtype`. */
export function weightBytes(c: ConstTensor, dtype: DType): Uint8Array {
  const n = c.data.length;
  const out = new Uint8Array(n * DTYPE_BYTES[dtype]);
  const dv = new DataView(out.buffer);
  for (let i = 0; i < n; i++) {
    const v = c.data[i]!;
    if (dtype === "float32") dv.setFloat32(i * 4, v, true);
    // Clamped: INT64_MAX ("to the end" in Slice) arrives as the double 2^63.
    else if (dtype === "int64") dv.setBigInt64(i * 8, BigInt(Math.trunc(Math.min(Math.max(v, -(2 ** 63)), 2 ** 63 - 1024))), true);
    else if (dtype === "int32") dv.setInt32(i * 4, Math.trunc(Math.min(Math.max(v, -(2 ** 31)), 2 ** 31 - 1)), true);
    else out[i] = v ? 1 : 0;
  }
  return out;
}
