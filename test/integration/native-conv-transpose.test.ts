/**
 * ConvTranspose on memlane-rt (ops-conv-transpose.ts, cpu/conv_transpose.cc) against ONNX
 * Runtime, one graph a form models use: a U-Net decoder's k2 s2, FCN / DCGAN's k4 s2 p1, a
 * k3 s2 p1 with output_padding 1 (torch's output_size), grouped and depthwise, dilated,
 * without bias, 1-D (a vocoder's upsampler), output_shape (split as ORT splits an odd total,
 * and a row beyond the window: negative pads; ORT 1.32 refuses a stride or more), auto_pad
 * SAME_UPPER / SAME_LOWER / VALID, and a kernel_shape given.
 * torch's own exports of both exporters run in native-cnn-ops.test.ts (unet-decoder).
 */
import { type GraphCase, describeGraphCases } from "../fixtures/graph-vs-ort.ts";
import { type Attr, init, node } from "../unit/compiler-onnx-builder.ts";

/** x [N, C, ...spatial] through ConvTranspose(W [C, M/group, ...kernel], bias [M] unless `bias` is false). */
function ct(spatial: number[], c: number, mg: number, kernel: number[], attrs: Record<string, Attr>, bias = true): GraphCase {
  const group = typeof attrs["group"] === "number" ? attrs["group"] : 1;
  return {
    inputs: [["x", ["N", c, ...spatial]]],
    inits: [init("w", [c, mg, ...kernel]), ...(bias ? [init("b", [mg * group])] : [])],
    nodes: [node("ConvTranspose", ["x", "w", ...(bias ? ["b"] : [])], ["y"], attrs)],
    ops: { ConvTranspose: 1 },
  };
}

const CASES: Record<string, GraphCase> = {
  "U-Net decoder: k2 s2": ct([5, 6], 8, 4, [2, 2], { strides: [2, 2] }),
  "FCN / DCGAN: k4 s2 p1": ct([4, 5], 6, 3, [4, 4], { strides: [2, 2], pads: [1, 1, 1, 1] }),
  "k3 s2 p1, output_padding 1": ct([5, 4], 4, 5, [3, 3], { strides: [2, 2], pads: [1, 1, 1, 1], output_padding: [1, 1] }),
  "stride 1 (a transposed 3x3)": ct([6, 7], 3, 4, [3, 3], { pads: [1, 1, 1, 1] }),
  "strides 3 and 2, uneven pads": ct([4, 5], 2, 3, [3, 2], { strides: [3, 2], pads: [1, 0, 2, 1] }),
  "grouped: 2 groups": ct([5, 5], 6, 2, [3, 3], { strides: [2, 2], group: 2 }),
  "depthwise": ct([5, 6], 4, 1, [4, 4], { strides: [2, 2], pads: [1, 1, 1, 1], group: 4 }),
  "dilated": ct([5, 5], 3, 2, [3, 3], { dilations: [2, 2], strides: [2, 1] }),
  "without bias": ct([5, 5], 3, 4, [3, 3], { strides: [2, 2] }, false),
  "1-D: a vocoder's upsampler (k16 s8 p4)": ct([11], 6, 3, [16], { strides: [8], pads: [4, 4] }),
  "1-D with output_padding": ct([9], 3, 2, [3], { strides: [2], pads: [1, 1], output_padding: [1] }),
  "output_shape, odd total padding": ct([5, 5], 2, 3, [3, 3], { strides: [2, 2], output_shape: [10, 10] }),
  "output_shape, SAME_UPPER": ct([5, 5], 2, 3, [3, 3], { strides: [2, 2], output_shape: [10, 9], auto_pad: "SAME_UPPER" }),
  "output_shape beyond the window": ct([5, 5], 2, 3, [3, 3], { strides: [2, 2], output_shape: [12, 12] }),
  "auto_pad SAME_UPPER": ct([5, 6], 3, 2, [3, 3], { strides: [2, 2], auto_pad: "SAME_UPPER" }),
  "auto_pad SAME_LOWER": ct([5, 6], 3, 2, [3, 3], { strides: [2, 2], auto_pad: "SAME_LOWER" }),
  "auto_pad VALID": ct([5, 6], 3, 2, [3, 3], { strides: [2, 2], auto_pad: "VALID" }),
  "kernel_shape given": ct([4, 4], 2, 2, [3, 3], { kernel_shape: [3, 3], strides: [2, 2] }),
};

describeGraphCases("native-conv-transpose", "ConvTranspose on memlane-rt matches ONNX Runtime", CASES, 2);
