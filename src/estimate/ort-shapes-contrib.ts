/**
 * Output shapes of the com.microsoft transformer ops a model carries once ONNX Runtime's
 * transformer optimizer has fused it offline (`python -m onnxruntime.transformers.optimizer`,
 * the usual way a BERT is readied for ORT): EmbedLayerNormalization, Attention,
 * SkipLayerNormalization, BiasGelu, FastGelu, Gelu, QuickGelu, FusedMatMul. memlane-rt runs
 * none of them, and without these rules the estimate's replay of ORT could not follow such a
 * graph: an optimized DistilBERT had no activation or eval-set terms at all.
 */
import { attrInt, attrInts } from "../compiler/attrs.ts";
import { type DType, fmtShape } from "../compiler/ir.ts";
import { LOWERINGS } from "../compiler/infer.ts";
import { type Lowering, type OpCtx, shapeError } from "../compiler/op-ctx.ts";
import { QUICK_GELU } from "./ort-fusions.ts";
import { BIAS_GELU, FAST_GELU, FUSED_MATMUL, GELU } from "./ort-fusions-transformer.ts";

const shapeAt = (c: OpCtx, i: number): number[] => c.weight(i)?.dims.slice() ?? c.actAny(i);
const dtypeAt = (c: OpCtx, i: number): DType => c.dtype(i) ?? "float32";

/**
 * An activation (the same shape and type as input 0), run as the replay's node for ORT's own
 * fusion of it (ort-fusions.ts, ort-fusions-transformer.ts), whose scratch rules it then shares.
 */
const activation = (replayOp: string): Lowering => (c) => ({ shapes: [shapeAt(c, 0)], dtypes: [dtypeAt(c, 0)], attrs: {}, op: replayOp });

/**
 * EmbedLayerNormalization: input_ids [B, S] -> output [B, S, hidden] (the word embedding's
 * width), mask_index [B] int32, and the optional embedding sum [B, S, hidden].
 */
const embedLayerNorm: Lowering = (c) => {
  const ids = shapeAt(c, 0);
  const table = c.weight(2)?.dims;
  if (ids.length !== 2 || !table || table.length !== 2) throw shapeError(c, `needs input_ids [B, S] and a word embedding [V, H], found ${fmtShape(ids)} and ${table ? fmtShape(table) : "a computed table"}`);
  const out = [...ids, table[1]!];
  const shapes = c.node.outputs.map((_, i) => (i === 1 ? [ids[0]!] : out));
  return { shapes, dtypes: c.node.outputs.map((_, i) => (i === 1 ? "int32" : "float32")), attrs: {} };
};

/** SkipLayerNormalization (and its simplified form): output 0 and the optional sum (3) as input 0; mean and inverse std (1, 2) [B, S, 1]. */
const skipLayerNorm: Lowering = (c) => {
  const x = shapeAt(c, 0);
  const shapes = c.node.outputs.map((_, i) => (i === 1 || i === 2 ? [...x.slice(0, -1), 1] : x));
  return { shapes, dtypes: shapes.map(() => dtypeAt(c, 0)), attrs: {} };
};

/**
 * Attention: input [B, S, D_in], weights [D_in, D_q + D_k + D_v] (qkv_hidden_sizes, else three
 * equal parts) -> output [B, S, D_v]; `present` (a decoder's key/value cache) is not replayed.
 */
const attention: Lowering = (c) => {
  const x = shapeAt(c, 0);
  const w = c.weight(1)?.dims ?? (c.node.inputs[1] ? shapeAt(c, 1) : undefined);
  if (x.length !== 3 || !w || w.length !== 2) throw shapeError(c, `needs input [B, S, D] and weights [D, 3 x D'], found ${fmtShape(x)} and ${w ? fmtShape(w) : "none"}`);
  if (c.node.outputs[1]) throw shapeError(c, "the present (key/value cache) output is not replayed");
  const sizes = attrInts(c.node, "qkv_hidden_sizes") ?? [w[1]! / 3, w[1]! / 3, w[1]! / 3];
  return { shapes: [[x[0]!, x[1]!, sizes[2]!]], dtypes: [dtypeAt(c, 0)], attrs: { num_heads: attrInt(c.node, "num_heads", 1) } };
};

/** FusedMatMul: a MatMul with either operand's last two axes transposed (transA / transB). */
const fusedMatMul: Lowering = (c) => {
  const [a, b] = [shapeAt(c, 0), shapeAt(c, 1)];
  if (a.length < 2 || b.length < 2) throw shapeError(c, `1-D operands ${fmtShape(a)} x ${fmtShape(b)} are not replayed`);
  const m = attrInt(c.node, "transA", 0) ? a.at(-1)! : a.at(-2)!;
  const n = attrInt(c.node, "transB", 0) ? b.at(-2)! : b.at(-1)!;
  const rank = Math.max(a.length, b.length);
  const lead = Array.from({ length: rank - 2 }, (_, k) => {
    const da = a[a.length - rank + k] ?? 1;
    const db = b[b.length - rank + k] ?? 1;
    return da === 1 ? db : da;
  });
  return { shapes: [[...lead, m, n]], dtypes: [dtypeAt(c, 0)], attrs: {} };
};

/** Shape rules of the transformer optimizer's com.microsoft ops (merged into ORT_SHAPE_LOWERINGS). */
export const ORT_CONTRIB_SHAPE_LOWERINGS: Readonly<Record<string, Lowering>> = {
  EmbedLayerNormalization: embedLayerNorm,
  Attention: attention,
  SkipLayerNormalization: skipLayerNorm,
  SkipSimplifiedLayerNormalization: skipLayerNorm,
  BiasGelu: activation(BIAS_GELU),
  FastGelu: activation(FAST_GELU),
  // ONNX's own Gelu (opset 20) keeps the compiler's rule, which ORT's fusions read.
  Gelu: (c) => (c.node.domain ? activation(GELU)(c) : LOWERINGS.Gelu!(c)),
  QuickGelu: activation(QUICK_GELU),
  FusedMatMul: (c) => ({ ...fusedMatMul(c), op: FUSED_MATMUL }),
};
