/**
 * The compiler's in-memory graph: ONNX nodes with decoded attributes, constants as typed
 * arrays, and per-tensor shapes with the batch as -1.
 */

/**
 * A constant tensor. Floats are kept as float32 (what the plan stores); integers (shape
 * arithmetic) as float64, exact up to 2^53, with NaN standing for the symbolic batch size
 * so that `Shape -> Gather -> Concat -> Reshape` chains fold to "batch, then fixed dims"
 * and any arithmetic that mixes the batch into another dimension stays visibly unknown.
 */
export interface ConstTensor {
  isFloat: boolean;
  dims: number[];
  data: Float32Array | Float64Array;
}

export type NodeAttr = number | number[] | string | string[] | ConstTensor;

export interface Node {
  opType: string;
  name: string;
  /** "" = absent optional input, as in ONNX. */
  inputs: string[];
  outputs: string[];
  attrs: Map<string, NodeAttr>;
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
}

export const BATCH = -1;

export function numel(dims: readonly number[]): number {
  let n = 1;
  for (const d of dims) n *= d;
  return n;
}

/** Elements per sample of an activation shape (batch first). */
export function perSample(shape: readonly number[]): number {
  return numel(shape.slice(1));
}

export function fmtShape(shape: readonly number[]): string {
  return `[${shape.map((d) => (d === BATCH ? "N" : String(d))).join(", ")}]`;
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
