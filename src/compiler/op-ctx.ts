/** What a per-op lowering function sees: its node, input shapes/constants, and helpers. */
import { CompileError } from "./errors.ts";
import { type ConstTensor, type DType, type Node, fmtShape } from "./ir.ts";

export interface OpCtx {
  file: string;
  node: Node;
  opset: number;
  /** The graph input's fixed first dimension, when the model was exported with one. */
  staticBatch: number | undefined;
  /**
   * Shape of activation input i; fails if it is absent, a constant, not float32, or does not
   * have the batch first (the contract of the v1-era float kernels).
   */
  act(i: number): number[];
  /** Shape of activation input i with the batch anywhere (-k = k·batch), any dtype. */
  actAny(i: number): number[];
  /** Element type of input i (activation or constant); undefined when absent. */
  dtype(i: number): DType | undefined;
  /** Input i's constant stored as `dtype` (converted under a new name when it differs). */
  constAs(i: number, dtype: DType): string;
  /** The constant at input i, or undefined if the input is an activation or absent. */
  weight(i: number): ConstTensor | undefined;
  /** Register a new constant (a rewritten weight) and return its tensor name. */
  addConst(base: string, t: ConstTensor): string;
  /** A tensor name used nowhere else, for the intermediates of an `expand`. */
  freshName(base: string): string;
  warn(msg: string): void;
}

export interface Lowered {
  shapes: number[][];
  attrs: Record<string, number | string | number[]>;
  /** Replacement input names, when lowering rewrote a weight. */
  inputs?: string[];
  /** The plan op, when it differs from the ONNX op (a rewrite into a supported op). */
  op?: string;
  /** Output element types (default float32). */
  dtypes?: DType[];
  /** A second plan op applied to the first one's (single) output, e.g. a Flatten. */
  then?: { op: string; attrs: Record<string, number | string | number[]>; shape: number[] };
  /** A plan op applied to input 0 first, whose output the op then reads (a 1-D conv's Reshape to 2-D). */
  before?: { op: string; attrs: Record<string, number | string | number[]>; shape: number[] };
  /**
   * Plan ops after the first, each on the previous one's output (its input 0) and `inputs`
   * (constants registered with addConst) after it; the last writes the node's output. What a
   * node the compiler rewrites into several ops needs (Resize: MatMul, Transpose, ...). Not
   * with `then`.
   */
  chain?: { op: string; attrs: Record<string, number | string | number[]>; shape: number[]; inputs?: string[] }[];
  /**
   * ONNX nodes that replace this one (Einsum as Transposes, Reshapes and a MatMul; Tile as
   * Unsqueeze, Expand and Reshape), lowered in its place one by one with their own lowerings,
   * so constant parts fold and each op keeps its own checks. The last writes the node's
   * output; intermediates are named with freshName, new constants registered with addConst.
   * With `expand`, the other fields are ignored.
   */
  expand?: Node[];
  /**
   * The output has no elements (shapes[0] holds a 0): no plan op, no tensor. Only a Concat may
   * read it, and leaves it out; any other reader is refused, naming it.
   */
  empty?: boolean;
}

export type Lowering = (c: OpCtx) => Lowered;

export function shapeError(c: OpCtx, msg: string): CompileError {
  return new CompileError(`${c.file}: ${c.node.opType} node "${c.node.name}": ${msg}`, "shape", { node: c.node.name, opType: c.node.opType });
}

/** The constant at input i, required to be a weight (the runtime reads it from the blob). */
export function requireWeight(c: OpCtx, i: number, what: string): ConstTensor {
  const w = c.weight(i);
  if (!w) throw shapeError(c, `${what} (input ${i}, "${c.node.inputs[i]}") must be a constant weight; memlane-rt does not take it from a computed tensor`);
  return w;
}

export function requireRank(c: OpCtx, shape: number[], rank: number, what: string): void {
  if (shape.length !== rank) throw shapeError(c, `${what} must have rank ${rank}, found ${fmtShape(shape)}`);
}

/**
 * A new int64 vector constant (a Reshape's shape, a ReduceSum's axes, an Expand's target) for
 * the ONNX nodes of an `expand`; `sym` when its values hold k·batch as SYM_BATCH (ir.ts).
 */
export function addInts(c: OpCtx, base: string, values: readonly number[], sym = false): string {
  return c.addConst(base, { isFloat: false, dims: [values.length], data: Float64Array.from(values), dtype: "int64", ...(sym ? { sym: true } : {}) });
}

/** A float32 activation with the batch anywhere: for element-wise float ops, which any layout suits. */
export function floatAct(c: OpCtx, i: number): number[] {
  const s = c.actAny(i);
  if (c.dtype(i) !== "float32") throw shapeError(c, `input ${i} ("${c.node.inputs[i]}") is ${c.dtype(i)}; this op computes on float32 only`);
  return s;
}
