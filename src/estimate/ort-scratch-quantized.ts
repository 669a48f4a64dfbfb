/**
 * What ONNX Runtime's quantized CPU kernels ask its arena for while they run (ort-scratch.ts
 * takes these as a node's scratch). Read from the kernels (providers/cpu/quantization
 * qlinearconv.cc, quantize_linear_matmul.cc; contrib_ops/cpu/quantization quant_gemm.cc,
 * dynamic_quantize_matmul.cc, qlinear_pool.cc) and checked against the arena's extensions of a
 * QDQ mobilenet_v2 and resnet18 (ORT 1.32, AVX-512):
 *
 * - QLinearConv works image by image. Off its symmetric path it sums into an int32 buffer of one
 *   image's output (resnet18's first conv: 64 x 112 x 112 x 4 = 3211264 bytes, at batch 1 and
 *   at batch 8 alike) and unfolds the input into an im2col buffer of one image (147 x 112 x 112
 *   = 1843968) unless the conv is pointwise. A depthwise conv, or one on the symmetric path that
 *   is not pointwise, reads through an indirection buffer of a pointer per kernel tap and output
 *   pixel; on the symmetric path in ORT's channels-last layout it covers the whole batch at once
 *   (mobilenet_v2's 32-channel depthwise conv at batch 64: 64 x 9 x 12544 x 8 = 57802752, the
 *   region its arena took).
 *   The symmetric path, on x86-64 with AVX-512: uint8 activations, int8 weights whose zero
 *   points are all 0, and a depthwise conv of a multiple of 16 channels or a plain one of 16 or
 *   more output channels, a multiple of 4 of them and of input channels. A QOperator file's int8
 *   activations take the other path: its mobilenet_v2's 16 -> 96 pointwise conv asked ORT 1.32
 *   for 96 x 112 x 112 x 4 = 4816896 bytes of int32 sums, and no depthwise conv for a pointer
 *   table of the whole batch.
 * - QGemm with a quantized output and QLinearMatMul sum into an int32 buffer of the output's
 *   elements (QGemm's transposed copy of A, for transA, is never met: the replay's Gemm has none).
 * - DynamicQuantizeMatMul quantizes its whole input into an 8-bit copy of it.
 * - QLinearAveragePool (not a global one) dequantizes its whole input to float.
 * The others (QLinearAdd, QLinearMul, QLinearConcat, QLinearGlobalAveragePool,
 * MatMulIntegerToFloat, DynamicQuantizeLinear) take nothing from the arena.
 */
import { type LNode, numel, perSample } from "../compiler/ir.ts";
import { fileQuantType } from "../compiler/tensor-data.ts";
import type { KernelScratch, ValueInfo } from "./ort-scratch.ts";

const POINTER_BYTES = 8;

/** Bytes a sample of a computed value's elements at `bytesPerElement`; 0 for one without the batch. */
function perSampleBytes(values: ValueInfo, name: string | undefined, bytesPerElement: number): number {
  const s = name ? values.shapeOf(name) : undefined;
  return s && s.some((d) => d < 0) ? perSample(s) * bytesPerElement : 0;
}

const ints = (v: unknown): number[] | undefined => (Array.isArray(v) && v.every((x) => typeof x === "number") ? v : undefined);

/** QLinearConv: x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B. */
function qlinearConvScratch(n: LNode, values: ValueInfo): KernelScratch | null {
  const w = values.constOf?.(n.inputs[3] ?? "");
  const y = values.shapeOf(n.outputs[0] ?? "");
  if (!w || w.dims.length < 3 || !y || y.length !== w.dims.length) return null;
  const group = typeof n.attrs.group === "number" ? n.attrs.group : 1;
  const [m, perGroup] = [w.dims[0]!, w.dims[1]!];
  const inChannels = perGroup * group;
  const kernel = ints(n.attrs.kernel) ?? w.dims.slice(2);
  const taps = numel(kernel);
  const outImage = numel(y.slice(2));
  const strides = ints(n.attrs.strides) ?? [];
  const pads = ints(n.attrs.pads) ?? [];
  const pointwise = taps === 1 && strides.every((s) => s === 1) && pads.every((p) => p === 0);
  const depthwise = group > 1 && perGroup === 1 && m === group;
  const zeroPoint = values.constOf?.(n.inputs[5] ?? "");
  const symmetricWeights = fileQuantType(w) === "int8" && (!zeroPoint || Array.from(zeroPoint.data).every((z) => z === 0));
  // MLAS's symmetric kernels on x86-64 take uint8 activations only (ConvSymU8S8Dispatch).
  const unsignedActivations = values.dtypeOf(n.inputs[0] ?? "") !== "int8";
  const symmetric = symmetricWeights && unsignedActivations && (depthwise ? group % 16 === 0 : group === 1 && m >= 16 && m % 4 === 0 && inChannels % 4 === 0);
  const sizes: number[] = [];
  const fixed: boolean[] = [];
  const take = (bytes: number, wholeBatch = false) => {
    sizes.push(bytes);
    fixed.push(!wholeBatch);
  };
  if (!symmetric) take(4 * m * outImage);
  if (symmetric && !pointwise) take(POINTER_BYTES * taps * outImage, true); // per sample: the whole batch's
  else if (depthwise) take(POINTER_BYTES * taps * outImage);
  else if (!pointwise) take(perGroup * taps * outImage * (kernel.length > 2 ? group : 1));
  return sizes.length ? { sizes, fixed, beforeOutputs: false } : null;
}

/** The scratch of ORT's quantized kernel for `n`, null where it takes none (or `n` is no quantized op). */
export function ortQuantizedScratch(n: LNode, values: ValueInfo): KernelScratch | null {
  const out = n.outputs[0];
  switch (n.op) {
    case "QLinearConv":
      return qlinearConvScratch(n, values);
    case "QLinearMatMul": {
      const bytes = perSampleBytes(values, out, 4);
      return bytes ? { sizes: [bytes], beforeOutputs: false } : null;
    }
    case "QGemm": {
      // A quantized output (y_scale given) is summed in int32 first; a float one is written directly.
      const bytes = n.inputs[7] ? perSampleBytes(values, out, 4) : 0;
      return bytes ? { sizes: [bytes], beforeOutputs: false } : null;
    }
    case "DynamicQuantizeMatMul": {
      const bytes = perSampleBytes(values, n.inputs[0], 1);
      return bytes ? { sizes: [bytes], beforeOutputs: false } : null;
    }
    case "QLinearAveragePool": {
      const bytes = perSampleBytes(values, n.inputs[0], 4);
      return bytes ? { sizes: [bytes], beforeOutputs: false } : null;
    }
    default:
      return null;
  }
}
