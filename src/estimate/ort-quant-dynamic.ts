/**
 * ONNX Runtime's rewrite of a dynamically quantized model (onnxruntime.quantization's
 * quantize_dynamic: the usual way a BERT is made int8 for a CPU), as the memory-pattern replay
 * (ort-pattern.ts) needs it. The file computes each MatMul as DynamicQuantizeLinear(X) ->
 * MatMulInteger -> Cast to float -> Mul by the product of the two scales -> Add of the bias: an
 * 8-bit copy of X, an int32 product and three float tensors of the output's size. ORT's level-2
 * fusions (matmul_integer_to_float.cc, dynamic_quantize_matmul_fusion.cc) run it as one node:
 *
 * - MatMulInteger -> Cast -> Mul(scale) [-> Add(bias)] is one MatMulIntegerToFloat, writing the
 *   float output directly (no int32 product, no scaled copy);
 * - a DynamicQuantizeLinear whose three outputs only that MatMulIntegerToFloat reads, its B a
 *   constant, goes into it: one DynamicQuantizeMatMul from the float input, which quantizes
 *   it in scratch of its own (ort-scratch-quantized.ts). One read by several (a BERT's query,
 *   key and value projections share their input's) stays, with its 8-bit tensor.
 *
 * Seen in ORT's optimized graph of a dynamically quantized DistilBERT: 6 MatMulIntegerToFloat
 * (query, key, value), 6 DynamicQuantizeMatMul, 2 DynamicQuantizeLinear, no MatMulInteger.
 */
import type { DType, LNode } from "../compiler/ir.ts";
import { readersOf } from "./ort-fusions.ts";

/** The one reader of `tensor` if it is of `op`, else undefined. */
function onlyReader(readers: Map<string, LNode[]>, tensor: string | undefined, op: string): LNode | undefined {
  const r = tensor ? (readers.get(tensor) ?? []) : [];
  return r.length === 1 && r[0]!.op === op ? r[0] : undefined;
}

/** MatMulInteger -> Cast -> Mul(scale) [-> Add(bias)] as MatMulIntegerToFloat (A, B, a_scale, b_scale, a_zp, b_zp, bias). */
function fuseMatMulIntegerToFloat(nodes: readonly LNode[], outs: ReadonlySet<string>, isConst: (name: string) => boolean, dtypeOf: (name: string) => DType | undefined): LNode[] {
  const readers = readersOf(nodes, outs);
  const producer = new Map<string, LNode>();
  for (const n of nodes) for (const o of n.outputs) if (o) producer.set(o, n);
  const gone = new Set<LNode>();
  const replaced = new Map<LNode, LNode>();
  for (const n of nodes) {
    if (n.op !== "MatMulInteger") continue;
    const cast = onlyReader(readers, n.outputs[0], "Cast");
    if (!cast || dtypeOf(cast.outputs[0] ?? "") !== "float32") continue;
    const mul = onlyReader(readers, cast.outputs[0], "Mul");
    const scale = mul?.inputs.find((i) => i !== cast.outputs[0]);
    const scales = scale ? producer.get(scale) : undefined;
    if (!mul || !scales || scales.op !== "Mul" || scales.inputs.length !== 2) continue;
    const bScaleAt = scales.inputs.findIndex(isConst);
    if (bScaleAt < 0) continue;
    const add = onlyReader(readers, mul.outputs[0], "Add");
    const bias = add?.inputs.find((i) => i !== mul.outputs[0]);
    const withBias = add && bias && isConst(bias) ? { add, bias } : undefined;
    const [a, b, aZero, bZero] = n.inputs;
    const inputs = [a ?? "", b ?? "", scales.inputs[1 - bScaleAt]!, scales.inputs[bScaleAt]!, aZero ?? "", bZero ?? "", ...(withBias ? [withBias.bias] : [])];
    const last = withBias?.add ?? mul;
    replaced.set(last, { op: "MatMulIntegerToFloat", name: n.name, inputs, outputs: [...last.outputs], attrs: {} });
    gone.add(n).add(cast);
    if (withBias) gone.add(mul);
    if ((readers.get(scale!) ?? []).length === 1) gone.add(scales);
  }
  return nodes.filter((n) => !gone.has(n)).map((n) => replaced.get(n) ?? n);
}

/** DynamicQuantizeLinear read by one MatMulIntegerToFloat alone (B constant) -> DynamicQuantizeMatMul (A, B, b_scale, b_zp, bias). */
function fuseDynamicQuantizeMatMul(nodes: readonly LNode[], outs: ReadonlySet<string>, isConst: (name: string) => boolean): LNode[] {
  const readers = readersOf(nodes, outs);
  const gone = new Set<LNode>();
  const replaced = new Map<LNode, LNode>();
  for (const q of nodes) {
    if (q.op !== "DynamicQuantizeLinear" || q.outputs.length !== 3) continue;
    const f = onlyReader(readers, q.outputs[0], "MatMulIntegerToFloat");
    if (!f || f.inputs[0] !== q.outputs[0] || !isConst(f.inputs[1] ?? "")) continue;
    if (!q.outputs.slice(1).every((o) => onlyReader(readers, o, "MatMulIntegerToFloat") === f)) continue;
    const [, b, , bScale, , bZero, bias] = f.inputs;
    replaced.set(f, { ...f, op: "DynamicQuantizeMatMul", inputs: [q.inputs[0]!, b!, bScale!, bZero ?? "", bias ?? ""], outputs: [...f.outputs] });
    gone.add(q);
  }
  return nodes.filter((n) => !gone.has(n)).map((n) => replaced.get(n) ?? n);
}

/** The two fusions, in ORT's order; the graph unchanged without a MatMulInteger. */
export function ortDynamicQuantFusions(nodes: readonly LNode[], graphOutputs: readonly string[], isConst: (name: string) => boolean, dtypeOf: (name: string) => DType | undefined): LNode[] {
  if (!nodes.some((n) => n.op === "MatMulInteger")) return [...nodes];
  const outs = new Set(graphOutputs);
  return fuseDynamicQuantizeMatMul(fuseMatMulIntegerToFloat(nodes, outs, isConst, dtypeOf), outs, isConst);
}
