/**
 * What ONNX Runtime's CPU kernels ask its arena for while they run, outside the memory pattern
 * and in every request, freed before they return (docs/memory.md, "LSTMs, the eval pass and
 * kernel scratch"). The replay (ort-pattern.ts, ort-arena.ts) takes them as `scratch` events of
 * a node's step. The kernels modelled are those whose scratch grows with the batch in the
 * models memlane meets:
 *
 * - LSTM (ort-lstm.ts) and GRU (ort-gru.ts): their input projections for every step and the
 *   per-batch states, after their outputs are allocated.
 * - Where (providers/cpu/tensor/where_op.cc): it selects in two passes, `cond ? X : 0` and
 *   `cond ? 0 : Y`, each into a tensor of its own of the broadcast shape of the condition and
 *   that input, then merges both into the output, which it allocates last. A transformer's
 *   attention mask (`Where(mask [N, 1, S, S], 0, -inf)`) takes two more tensors of the mask's
 *   size: the small BERT export at batch 64, seq 128 has three 4 MiB tensors where the replay
 *   without them had one, and its steady RSS was estimated 4.8 % under.
 * - Attention (an ORT-optimized transformer's): projections, probabilities and context.
 * - The quantized kernels (ort-scratch-quantized.ts): a QLinearConv's int32 sums, im2col and
 *   indirection buffers, the int32 sums of QGemm and QLinearMatMul, DynamicQuantizeMatMul's
 *   8-bit copy of its input.
 * - BiasGelu, and FastGelu with a bias (contrib_ops/cpu/bert/bias_gelu.cc): the sum of the
 *   input and the bias, halved, in a tensor of the output's size from the temp-space
 *   allocator, after its output. A ConvNeXt's or Swin's MLP at
 *   batch 8 (224 px): 12.25 MiB, whose first request (tensor by tensor) took a third region of
 *   that size where the replay without it took two; their python-ort steady RSS at batches 1,64
 *   was estimated 10 % under.
 * - Einsum (ort-einsum.ts): its operands' copies in one axis order, the MatMul's result and
 *   its transpose to the output's order.
 */
import { broadcastDims } from "../compiler/fold-math.ts";
import { type ConstTensor, DTYPE_BYTES, type DType, type LNode, perSample } from "../compiler/ir.ts";
import { BIAS_GELU, FAST_GELU } from "./ort-fusions-transformer.ts";
import { einsumScratch } from "./ort-einsum.ts";
import { ortGruScratchPerSample } from "./ort-gru.ts";
import { ortLstmScratchPerSample } from "./ort-lstm.ts";
import { ortQuantizedScratch } from "./ort-scratch-quantized.ts";

/** A node's scratch, bytes a sample in the order the kernel asks for it. */
export interface KernelScratch {
  sizes: number[];
  /** Per size: bytes at any batch, not a sample's (a quantized conv's buffers for one image). */
  fixed?: boolean[];
  /** Asked for before the node's outputs (Where), else after them (LSTM). */
  beforeOutputs: boolean;
  /** Asked for after the outputs besides, with `sizes` before them (an Einsum's result transposed to the output's order). */
  after?: number[];
  afterFixed?: boolean[];
  /**
   * Per size: freed once the size at this index is taken, not when the kernel returns (an
   * Einsum of three or more operands frees one pair's copies before the next pair's).
   */
  freedAfter?: (number | undefined)[];
}

/** What the replay knows of a value: its shape (-1 at the batch) and element type. */
export interface ValueInfo {
  shapeOf(name: string): readonly number[] | undefined;
  dtypeOf(name: string): DType | undefined;
  /** A constant's value (weights, zero points), undefined for a computed tensor. */
  constOf?(name: string): ConstTensor | undefined;
}

/** The scratch ORT's kernel for `n` takes, bytes a sample; null: none modelled. */
export function ortKernelScratch(n: LNode, values: ValueInfo): KernelScratch | null {
  if (n.op === "LSTM" || n.op === "GRU") {
    const sizes = n.op === "LSTM" ? ortLstmScratchPerSample(n) : ortGruScratchPerSample(n);
    return sizes.length ? { sizes, beforeOutputs: false } : null;
  }
  if (n.op === "Where") return whereScratch(n, values);
  if ((n.op === BIAS_GELU || n.op === FAST_GELU) && n.inputs[1]) return biasGeluScratch(n, values);
  if (n.op === "Attention") return attentionScratch(n, values);
  if (n.op === "Einsum") return einsumScratch(n, values);
  return ortQuantizedScratch(n, values);
}

function biasGeluScratch(n: LNode, values: ValueInfo): KernelScratch | null {
  const out = n.outputs[0];
  const s = out ? values.shapeOf(out) : undefined;
  // A tensor without the batch is not the batch's: too small to matter here.
  if (!s || !s.some((d) => d < 0)) return null;
  // memlane's compiler plans float32 only: the output's size (float16's twice its elements never reaches here)
  return { sizes: [perSample(s) * DTYPE_BYTES[values.dtypeOf(out!) ?? "float32"]], beforeOutputs: false };
}

/**
 * com.microsoft's Attention (an ORT-optimized transformer's; contrib_ops/cpu/bert/attention.cc,
 * attention_cpu_base.h): its query, key and value projections in one buffer, the attention
 * probabilities [N, heads, S, S], and the context [N, heads, S, head size] before its transpose
 * into the output, taken in that order and held to the end. No mask buffer: ORT 1.32's malloc
 * trace of an optimized BERT and XLM-RoBERTa, whose masks are a 1-D index of lengths, has these
 * three a layer and nothing of [N, S, S].
 */
function attentionScratch(n: LNode, values: ValueInfo): KernelScratch | null {
  const x = n.inputs[0] ? values.shapeOf(n.inputs[0]) : undefined;
  const y = n.outputs[0] ? values.shapeOf(n.outputs[0]) : undefined;
  const w = n.inputs[1] ? values.shapeOf(n.inputs[1]) : undefined;
  if (!x || !y || !w || x.length !== 3 || x[0]! >= 0) return null; // batch first, as ORT's kernel takes it
  const s = x[1]!;
  const heads = typeof n.attrs.num_heads === "number" ? n.attrs.num_heads : 1;
  return { sizes: [s * w[1]! * 4, heads * s * s * 4, s * y[2]! * 4], beforeOutputs: false };
}

function whereScratch(n: LNode, values: ValueInfo): KernelScratch | null {
  const [cond, x, y] = n.inputs;
  const c = cond ? values.shapeOf(cond) : undefined;
  if (!c || !x || !y) return null;
  const dtype = values.dtypeOf(x) ?? values.dtypeOf(y) ?? "float32";
  const sizes: number[] = [];
  for (const v of [x, y]) {
    const s = broadcastDims(c, values.shapeOf(v) ?? []);
    // A selection without the batch is not the batch's: too small to matter here.
    if (!s || !s.some((d) => d < 0)) continue;
    sizes.push(perSample(s) * DTYPE_BYTES[dtype]);
  }
  return sizes.length ? { sizes, beforeOutputs: true } : null;
}
