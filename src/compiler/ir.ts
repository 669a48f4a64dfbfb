/**
 * The compiler's in-memory graph: ONNX nodes with decoded attributes, constants as typed
 * arrays, and per-tensor shapes with the batch as -1.
 */

/**
 * Element types of plan v2 tensors (docs/plan-format.md); bool is stored as one byte. The
 * quantized integer types (QuantType) and float16 exist only in the estimate's replay of ONNX
 * Runtime: a quantized model's, and a half-precision model's inputs and outputs (ORT's CPU runs
 * what is between them in float32, src/estimate/ort-fp16.ts).
 */
export type DType = "float32" | "int64" | "int32" | "bool" | "float16" | QuantType;
/** A quantized model's integer types: 8-bit, and the 16-bit activations onnxruntime.quantization also writes (QUInt16, QInt16). */
export type QuantType = "uint8" | "int8" | "uint16" | "int16";
export const isQuantType = (d: string): d is QuantType => d === "uint8" || d === "int8" || d === "uint16" || d === "int16";
/** The types only the estimate's replay of ONNX Runtime has (a quantized or half-precision model's); no plan holds one. */
export const isReplayOnlyType = (d: string): d is QuantType | "float16" => isQuantType(d) || d === "float16";

export const DTYPE_BYTES: Readonly<Record<DType, number>> = Object.freeze({ float32: 4, int64: 8, int32: 4, bool: 1, float16: 2, uint8: 1, int8: 1, uint16: 2, int16: 2 });

/**
 * A constant tensor. Floats are kept as float32 (what the plan stores); integers (shape
 * arithmetic) as float64, exact up to 2^53. The symbolic batch folds as the number
 * SYM_BATCH (see below), so `Shape -> Gather -> Mul/Concat -> Reshape` chains fold to linear
 * forms k·batch; `sym` marks a tensor that may hold such values.
 */
export interface ConstTensor {
  isFloat: boolean;
  dims: number[];
  data: Float32Array | Float64Array;
  /** The element type the plan stores it as; default float32 (isFloat) or int64. */
  dtype?: DType;
  /** Derived from the shape of a run-time tensor: values may be multiples of SYM_BATCH. */
  sym?: boolean;
  /**
   * The ONNX element type (TensorProto.DataType) the file stores it as, for an initializer; the
   * plan's dtype widens it (int8 -> int64). The estimate reads it: a quantized model's weights
   * take one byte an element, and its zero points give ORT's tensors their type.
   */
  fileType?: number;
  /**
   * Where an initializer stored outside the model file lies (its external data: the location
   * relative to the model's directory, byte offset and length). The estimate reads it: ONNX
   * Runtime maps that file and reads the initializers it does not pre-pack in place
   * (src/estimate/ort-mapped.ts).
   */
  external?: { location: string; offset: number; length: number };
}

/**
 * The value the batch takes while folding shape arithmetic: a prime above 2^32, so k·batch
 * stays exact in a double for k < 2^20, k·batch ± c (c != 0) or batch / m is recognisably
 * not a multiple, and no real dimension is ever mistaken for it.
 */
export const SYM_BATCH = 4294967311;

/**
 * A folded value as a plan dimension: a fixed d >= 0, -k for k·batch, or undefined when it
 * mixes the batch non-linearly (batch + 1, batch², batch / 3).
 */
export function symDim(v: number): number | undefined {
  if (Math.abs(v) < 2 ** 31) return v;
  const k = v / SYM_BATCH;
  return Number.isInteger(k) && k >= 1 && k < 2 ** 20 ? -k : undefined;
}

/** The folding value of a plan dimension (inverse of symDim). */
export function symValue(d: number): number {
  return d < 0 ? -d * SYM_BATCH : d;
}

export function defaultDtype(c: ConstTensor): DType {
  return c.dtype ?? (c.isFloat ? "float32" : "int64");
}

export type NodeAttr = number | number[] | string | string[] | ConstTensor;

export interface Node {
  opType: string;
  name: string;
  /** "" = absent optional input, as in ONNX. */
  inputs: string[];
  outputs: string[];
  attrs: Map<string, NodeAttr>;
  /** A domain other than ONNX's own (com.microsoft), as the file names it; only graphs loaded for ORT's replay keep such nodes. */
  domain?: string;
  /** A control-flow node's graph attributes by name (If's then_branch and else_branch). */
  branches?: Record<string, SubGraph>;
}

/** A graph attribute: its nodes (which may read the outer graph's values), outputs and initializers. */
export interface SubGraph {
  nodes: Node[];
  outputs: string[];
  consts: Map<string, ConstTensor>;
}

export interface GraphInput {
  name: string;
  /** ONNX dims: a number, or a symbolic name; undefined when unknown. */
  dims: (number | string | undefined)[];
  elemType: number;
}

export interface Graph {
  /** File name of the source model (for messages and the plan's `source`). */
  file: string;
  opset: number;
  nodes: Node[];
  consts: Map<string, ConstTensor>;
  inputs: GraphInput[];
  outputs: string[];
  /** The ONNX element type the file declares for each output (0: none); absent for graphs built in memory. */
  outputElemTypes?: Map<string, number>;
  /**
   * The shapes the file declares for intermediate values (`graph.value_info`: dims a number, a
   * symbolic name, or undefined when unknown). The compiler infers its own; ONNX Runtime plans
   * its buffers from these (src/estimate/ort-pattern.ts). Absent where the file has none.
   */
  declaredShapes?: Map<string, (number | string | undefined)[]>;
}

export const BATCH = -1;

export function numel(dims: readonly number[]): number {
  let n = 1;
  for (const d of dims) n *= d;
  return n;
}

/**
 * Elements per sample of an activation shape: a dimension -k (k·batch) counts k, so a batch
 * of n holds n × perSample elements wherever the batch sits.
 */
export function perSample(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= Math.abs(d);
  return n;
}

/** The extent of several axes merged into one (a Reshape's): their product, -k (k·batch) when one is the batch. */
export function mergedDim(dims: readonly number[]): number {
  return dims.some((d) => d < 0) ? -perSample(dims) : perSample(dims);
}

/** Index of the (single) batch dimension of an activation shape, -1 if none. */
export function batchAxis(shape: readonly number[]): number {
  return shape.findIndex((d) => d < 0);
}

/** One dimension for messages: "batch", "3·batch", or the number (never NaN). */
export function fmtDim(d: number): string {
  if (Number.isNaN(d)) return "?";
  if (d === BATCH) return "batch";
  if (d < 0) return `${-d}·batch`;
  const s = symDim(d);
  return s === undefined ? `(non-linear in batch)` : s < 0 ? fmtDim(s) : String(d);
}

export function fmtShape(shape: readonly number[]): string {
  return `[${shape.map(fmtDim).join(", ")}]`;
}

export function describeNode(n: Node): string {
  return `${n.opType} node "${n.name}"`;
}

/** A node after folding and shape inference: plan op name and resolved attributes. */
export interface LNode {
  op: string;
  name: string;
  /** Tensor names; "" = absent optional input. */
  inputs: string[];
  outputs: string[];
  attrs: Record<string, number | string | number[]>;
}
