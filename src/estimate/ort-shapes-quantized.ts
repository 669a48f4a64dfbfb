/**
 * Output shapes and element types of the quantized ops ONNX Runtime runs (ONNX's QuantizeLinear,
 * DequantizeLinear, QLinearConv, QLinearMatMul, ConvInteger, MatMulInteger,
 * DynamicQuantizeLinear; com.microsoft's QLinearAdd, QLinearMul, QLinearGlobalAveragePool,
 * QLinearAveragePool, QLinearConcat, QLinearSigmoid, QLinearLeakyRelu, QLinearSoftmax, QGemm,
 * MatMulIntegerToFloat, DynamicQuantizeMatMul), for the estimate's replay of ORT's run
 * (ort-pattern.ts). memlane-rt runs none of them, so without these a quantized model (a QDQ
 * export, or onnxruntime.quantization's QOperator and dynamic forms) had no activation or
 * eval-set terms at all: a QDQ mobilenet_v2 at compare's batches 1,64 was estimated 82 % under.
 *
 * The shape arithmetic is the float op's (the compiler's Conv, MatMul, Gemm, pool and Concat
 * lowerings, read through the quantized op's input positions); the element type is the zero
 * point's (uint8 where none is given), so a quantized activation takes a byte an element.
 */
import { attrInt } from "../compiler/attrs.ts";
import { type DType, fmtShape, isQuantType, isReplayOnlyType } from "../compiler/ir.ts";
import { type Lowered, type Lowering, type OpCtx, shapeError } from "../compiler/op-ctx.ts";
import { AveragePool, Conv, MaxPool } from "../compiler/ops-conv.ts";
import { Concat } from "../compiler/ops-cnn.ts";
import { Binary, Gather } from "../compiler/ops-data.ts";
import { LOWERINGS } from "../compiler/infer.ts";
import { Gemm } from "../compiler/ops-tensor.ts";
import { MatMul } from "../compiler/ops-transformer.ts";
import { fileQuantType, quantTypeOfOnnx } from "../compiler/tensor-data.ts";

/**
 * The quantized node seen as its float op: input i of the view is input map[i] of the node (-1:
 * absent), activations read as float32 with the batch anywhere. Only shapes are taken from it.
 */
function floatView(c: OpCtx, map: readonly number[]): OpCtx {
  const at = (i: number) => map[i] ?? -1;
  const name = (i: number) => (at(i) >= 0 ? (c.node.inputs[at(i)] ?? "") : "");
  return {
    ...c,
    node: { ...c.node, inputs: map.map((_, i) => name(i)) },
    act: (i) => c.actAny(at(i)),
    actAny: (i) => c.actAny(at(i)),
    dtype: (i) => (!name(i) ? undefined : c.weight(at(i)) ? c.dtype(at(i)) : "float32"),
    weight: (i) => (name(i) ? c.weight(at(i)) : undefined),
    constAs: (i) => name(i),
  };
}

/** The output shape a lowering gives, after the reshapes it adds around a 1-D window. */
const finalShape = (low: Lowered): number[] => low.then?.shape ?? low.chain?.at(-1)?.shape ?? low.shapes[0]!;

/** The integer type of a zero point (input i): its file type for a constant, its dtype for a computed one; uint8 where absent. */
function zeroPointType(c: OpCtx, i: number): DType {
  if (!c.node.inputs[i]) return "uint8";
  const w = c.weight(i);
  if (w) return fileQuantType(w) ?? "uint8";
  const d = c.dtype(i);
  return d && isQuantType(d) ? d : "uint8";
}

/** A quantized op whose shape and attributes are `float`'s over inputs `map`, its output typed `dtype(c)`. */
const quantized = (float: Lowering, map: readonly number[], dtype: (c: OpCtx) => DType): Lowering => (c) => {
  const low = float(floatView(c, map));
  // The float op's attributes (a conv's kernel, strides, pads, group), which the kernel's scratch depends on.
  return { shapes: [finalShape(low)], dtypes: [dtype(c)], attrs: low.attrs };
};

/** Input `from`'s shape (an activation's or a constant's). */
const shapeAt = (c: OpCtx, from: number): number[] => c.weight(from)?.dims.slice() ?? c.actAny(from);

/** The same shape as input `from`, typed `dtype(c)`. */
const sameShape = (from: number, dtype: (c: OpCtx) => DType): Lowering => (c) => ({ shapes: [shapeAt(c, from)], dtypes: [dtype(c)], attrs: {} });

/** com.microsoft's QLinearAdd / QLinearMul: A (input 0) and B (input 3) broadcast, typed as C's zero point (input 7). */
const binary: Lowering = (c) => {
  const shapes = [shapeAt(c, 0), shapeAt(c, 3)];
  const rank = Math.max(...shapes.map((s) => s.length));
  const out = Array.from({ length: rank }, (_, k) => {
    const dims = shapes.map((s) => s[s.length - rank + k] ?? 1).filter((d) => d !== 1);
    return dims.find((d) => d < 0) ?? dims[0] ?? 1;
  });
  return { shapes: [out], dtypes: [zeroPointType(c, 7)], attrs: {} };
};

/**
 * Add, Sub, Mul, Div where no input has the batch: the compiler refuses a computed tensor without
 * it, but a dynamically quantized MatMul multiplies its run-time input scale (a scalar
 * DynamicQuantizeLinear computes from the data) by the weight's. Any other case is the float op's.
 */
const batchlessArithmetic = (float: Lowering): Lowering => (c) => {
  const shapes = c.node.inputs.map((_, i) => shapeAt(c, i));
  if (shapes.some((s) => s.some((d) => d < 0))) return float(c);
  const rank = Math.max(...shapes.map((s) => s.length));
  const out = Array.from({ length: rank }, (_, k) => Math.max(...shapes.map((s) => s[s.length - rank + k] ?? 1)));
  return { shapes: [out], dtypes: [c.dtype(0) ?? "float32"], attrs: {} };
};

/** Gather from an 8-bit table (a dynamically quantized embedding): the rows stay 8-bit, a byte an element. */
const gatherQuantized: Lowering = (c) => {
  const low = Gather(c);
  const w = c.weight(0);
  const q = w ? fileQuantType(w) : undefined;
  return q ? { ...low, dtypes: [q] } : low;
};

/**
 * Ops that move or pick values, on quantized integer tensors (a QOperator model's attention reshapes and
 * transposes its uint8 projections; ORT runs them on 8-bit values as they are) or float16 ones
 * (a half-precision model's, ort-fp16.ts): the compiler's shape rule, which takes float32 only,
 * read through a float view; the input's type out.
 */
const MOVES_QUANTIZED = ["Transpose", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Slice", "Expand", "Resize", "Concat", "Pad"];
const movesQuantized = (op: string): Lowering => (c) => {
  const float = LOWERINGS[op]!;
  const dtype = c.dtype(0);
  if (!dtype || !isReplayOnlyType(dtype)) return float(c);
  const low = float(floatView(c, c.node.inputs.map((_, i) => i)));
  const shapes = low.shapes.length > 1 ? low.shapes : [finalShape(low)];
  return { shapes, dtypes: shapes.map(() => dtype), attrs: low.attrs };
};

/** QLinearGlobalAveragePool: [N, C, 1, 1], or [N, 1, 1, C] with channels_last; X's type. */
const globalAveragePool: Lowering = (c) => {
  const x = c.actAny(0);
  if (x.length < 3) throw shapeError(c, `X must have rank 3 or more, found ${fmtShape(x)}`);
  const last = attrInt(c.node, "channels_last", 0) === 1;
  const out = x.map((d, i) => (i === 0 || (last ? i === x.length - 1 : i === 1) ? d : 1));
  return { shapes: [out], dtypes: [c.dtype(0) ?? "uint8"], attrs: {} };
};

/** A channels-first pool; the NHWC form (channels_last) is ORT's own rewrite, not replayed from a file. */
const channelsFirst = (pool: Lowering): Lowering => (c) => {
  if (attrInt(c.node, "channels_last", 0) === 1) throw shapeError(c, "channels_last pooling is not replayed");
  return pool(c);
};

/** QuantizeLinear: X's shape, typed as its zero point, or opset 21's output_dtype, else uint8. */
const quantizeLinear: Lowering = (c) => {
  const dtype: DType = quantTypeOfOnnx(attrInt(c.node, "output_dtype", 0)) ?? zeroPointType(c, 2);
  return { shapes: [shapeAt(c, 0)], dtypes: [dtype], attrs: {} };
};

/** QLinearConcat: Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) per input. */
const concat: Lowering = (c) => {
  const xs = c.node.inputs.map((_, i) => i).filter((i) => i >= 2 && (i - 2) % 3 === 0);
  return { shapes: [finalShape(Concat(floatView(c, xs)))], dtypes: [zeroPointType(c, 1)], attrs: {} };
};

const FLOAT: (c: OpCtx) => DType = () => "float32";
const INT32: (c: OpCtx) => DType = () => "int32";
const zeroPointAt = (i: number) => (c: OpCtx): DType => zeroPointType(c, i);

/** Shape lowerings of the quantized ops, keyed by op name (merged into ORT_SHAPE_LOWERINGS). */
export const ORT_QUANTIZED_SHAPE_LOWERINGS: Readonly<Record<string, Lowering>> = {
  ...Object.fromEntries(MOVES_QUANTIZED.filter((op) => LOWERINGS[op]).map((op) => [op, movesQuantized(op)])),
  QuantizeLinear: quantizeLinear,
  DequantizeLinear: sameShape(0, FLOAT),
  DynamicQuantizeLinear: (c) => ({ shapes: [shapeAt(c, 0), [], []], dtypes: ["uint8", "float32", "uint8"], attrs: {} }),
  QLinearConv: quantized(Conv, [0, 3, 8], zeroPointAt(7)),
  ConvInteger: quantized(Conv, [0, 1], INT32),
  QLinearMatMul: quantized(MatMul, [0, 3], zeroPointAt(7)),
  MatMulInteger: quantized(MatMul, [0, 1], INT32),
  MatMulIntegerToFloat: quantized(MatMul, [0, 1], FLOAT),
  DynamicQuantizeMatMul: quantized(MatMul, [0, 1], FLOAT),
  // QGemm: A, a_scale, a_zp, B, b_scale, b_zp, C, y_scale, y_zp; float out without y_scale.
  QGemm: quantized(Gemm, [0, 3, 6], (c) => (c.node.inputs[7] ? zeroPointType(c, 8) : "float32")),
  Add: batchlessArithmetic(Binary), Sub: batchlessArithmetic(Binary), Mul: batchlessArithmetic(Binary), Div: batchlessArithmetic(Binary),
  Gather: gatherQuantized,
  QLinearAdd: binary,
  QLinearMul: binary,
  QLinearGlobalAveragePool: globalAveragePool,
  QLinearAveragePool: channelsFirst(quantized(AveragePool, [0], zeroPointAt(4))),
  // ORT runs a MaxPool on quantized values as it is (a QOperator model's, or one a QDQ group left).
  MaxPool: (c) => (c.dtype(0) === "float32" ? MaxPool(c) : quantized(MaxPool, [0], (q) => q.dtype(0) ?? "uint8")(c)),
  QLinearConcat: concat,
  QLinearSigmoid: sameShape(0, zeroPointAt(4)),
  QLinearLeakyRelu: sameShape(0, zeroPointAt(4)),
  QLinearSoftmax: sameShape(0, zeroPointAt(4)),
};
