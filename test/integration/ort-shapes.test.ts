// The shape rules ORT's replay uses for ops memlane-rt does not run (src/estimate/ort-shapes.ts),
// against ONNX Runtime itself: each small model is inferred (ortGraphIo: -k at the batch) and
// run by onnxruntime-node at batch 3, and every output's dims and dtype must be ORT's.
import { rmSync } from "node:fs";
import { afterAll, describe, expect, it } from "vitest";
import * as ort from "onnxruntime-node";
import { loadOnnx } from "../../src/compiler/load.ts";
import { ortGraphIo } from "../../src/estimate/ort-pattern.ts";
import { ortSession } from "../fixtures/ort-session.ts";
import { init, type ModelSpec, node, tempDir, writeModel } from "../unit/compiler-onnx-builder.ts";

const dir = tempDir();
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const img: ModelSpec["inputs"] = [["x", ["N", 8, 6, 6]]];
const seq: ModelSpec["inputs"] = [["x", [5, "N", 4]]];
const CASES: [string, ModelSpec][] = [
  ["DepthToSpace and SpaceToDepth", { inputs: img, outputs: ["d", "s"], nodes: [node("DepthToSpace", ["x"], ["d"], { blocksize: 2 }), node("SpaceToDepth", ["x"], ["s"], { blocksize: 3 })] }],
  ["ReduceMin, ReduceProd, ReduceLogSumExp, ArgMin", {
    inputs: img, outputs: ["a", "b", "c", "i"], outputTypes: { i: 7 }, opset: 13,
    nodes: [node("ReduceMin", ["x"], ["a"], { axes: [1, 3], keepdims: 0 }), node("ReduceProd", ["x"], ["b"], { axes: [2] }), node("ReduceLogSumExp", ["x"], ["c"], { axes: [-1], keepdims: 0 }), node("ArgMin", ["x"], ["i"], { axis: 2, keepdims: 0 })],
  }],
  ["elementwise: Elu, Celu, Round, Trilu, IsInf, Hardmax, Mish", {
    inputs: img, outputs: ["e", "c", "r", "t", "f", "h", "m"], outputTypes: { f: 9 }, opset: 18,
    nodes: [node("Elu", ["x"], ["e"]), node("Celu", ["x"], ["c"]), node("Round", ["x"], ["r"]), node("Trilu", ["x"], ["t"]), node("IsInf", ["x"], ["f"]), node("Hardmax", ["x"], ["h"]), node("Mish", ["x"], ["m"])],
  }],
  ["ConvTranspose with pads, output_padding, dilations and groups", {
    inputs: img, outputs: ["y"], inits: [init("w", [8, 3, 3, 3])],
    nodes: [node("ConvTranspose", ["x", "w"], ["y"], { strides: [2, 3], pads: [1, 0, 2, 1], output_padding: [1, 2], dilations: [2, 1], group: 2 })],
  }],
  ["Conv, MaxPool (ceil_mode) and AveragePool over three spatial axes (a video net's Conv3d)", {
    inputs: [["x", ["N", 4, 5, 9, 7]]], outputs: ["c", "m", "a", "s"], inits: [init("w", [6, 2, 3, 3, 2]), init("b", [6])],
    nodes: [
      node("Conv", ["x", "w", "b"], ["c"], { strides: [1, 2, 2], pads: [1, 1, 0, 1, 1, 1], dilations: [1, 1, 2], group: 2 }),
      node("MaxPool", ["c"], ["m"], { kernel_shape: [2, 2, 2], strides: [2, 2, 2], ceil_mode: 1 }),
      node("AveragePool", ["x"], ["a"], { kernel_shape: [1, 3, 3], strides: [1, 2, 2], pads: [0, 1, 1, 0, 1, 1] }),
      node("Conv", ["x", "w"], ["s"], { auto_pad: "SAME_UPPER", strides: [2, 2, 3], group: 2 }),
    ],
  }],
  ["GlobalLpPool, GlobalMaxPool", { inputs: img, outputs: ["p", "q"], nodes: [node("GlobalLpPool", ["x"], ["p"]), node("GlobalMaxPool", ["x"], ["q"])] }],
  // XLNet: its int64 ids transposed time-major, a one-hot of its segment ids, an identity mask.
  ["Transpose of int64, OneHot (two axes), EyeLike of a named dtype", {
    inputs: img, outputs: ["t", "h", "h1", "e"], outputTypes: { t: 7, e: 7 },
    inits: [init("depth", [1], [3], "int64"), init("onoff", [2], [0, 1]), init("hw", [2], [2, 3], "int64")],
    nodes: [
      node("Cast", ["x"], ["xi"], { to: 7 }), node("Transpose", ["xi"], ["t"], { perm: [1, 0, 3, 2] }),
      node("OneHot", ["xi", "depth", "onoff"], ["h"]), node("OneHot", ["xi", "depth", "onoff"], ["h1"], { axis: 1 }),
      node("ReduceMean", ["x", "hw"], ["m"], { keepdims: 0 }), node("EyeLike", ["m"], ["e"], { dtype: 7, k: 1 }),
    ],
    opset: 18,
  }],
  // TimeSformer: its frames folded into the batch for the patch Conv, then each clip's first
  // row taken back as `x[:batch]`.
  ["frames folded into the batch: Conv and pools of [k·batch, ...], a Slice to the batch's first rows", {
    inputs: [["x", ["N", 4, 3, 8, 8]]], outputs: ["m", "g", "s"],
    inits: [init("to4d", [4], [-1, 3, 8, 8], "int64"), init("w", [6, 3, 3, 3]), init("zero", [1], [0], "int64"), init("clips", [3], [-1, 4, 6], "int64"), init("clips5", [5], [-1, 4, 6, 4, 4], "int64")],
    nodes: [
      node("Reshape", ["x", "to4d"], ["f"]), node("Conv", ["f", "w"], ["c"], { pads: [1, 1, 1, 1] }),
      node("MaxPool", ["c"], ["m4"], { kernel_shape: [2, 2], strides: [2, 2] }), node("Reshape", ["m4", "clips5"], ["m"]),
      node("GlobalAveragePool", ["c"], ["g4"]), node("Reshape", ["g4", "clips"], ["g"]),
      node("Shape", ["x"], ["sh"]), node("Gather", ["sh", "zero"], ["b"]), node("Slice", ["c", "zero", "b", "zero"], ["s"]),
    ],
  }],
  // A spatial transformer: a theta predicted from the input, its sampling grid, the resampled map.
  ["AffineGrid and GridSample", {
    inputs: [["x", ["N", 2, 6, 5]]], outputs: ["grid", "y"], opset: 20,
    inits: [init("w", [60, 6]), init("theta", [3], [-1, 2, 3], "int64"), init("zero", [1], [0], "int64"), init("one", [1], [1], "int64"), init("hw", [3], [2, 4, 7], "int64")],
    nodes: [
      node("Flatten", ["x"], ["f"]), node("MatMul", ["f", "w"], ["t"]), node("Reshape", ["t", "theta"], ["t3"]),
      node("Shape", ["x"], ["sh"]), node("Slice", ["sh", "zero", "one"], ["n"]), node("Concat", ["n", "hw"], ["size"], { axis: 0 }),
      node("AffineGrid", ["t3", "size"], ["grid"]), node("GridSample", ["x", "grid"], ["y"]),
    ],
  }],
  // torch's Squeeze of a dim it did not know the size of at export: If(size == 1, Squeeze,
  // Identity); the shapes decide it, and the taken branch is inlined.
  ["If on a dim the shapes decide: the branch it takes", {
    inputs: [["x", ["N", 1, 6]]], outputs: ["y"],
    inits: [init("one", [], [1], "int64"), init("axis", [1], [1], "int64")],
    nodes: [
      node("Relu", ["x"], ["r"]), node("Shape", ["r"], ["s"]), node("Gather", ["s", "one"], ["d"], { axis: 0 }), node("Equal", ["d", "one"], ["c"]),
      node("If", ["c"], ["y"], {
        then_branch: { graph: { nodes: [node("Squeeze", ["r", "axis"], ["sq"])], outputs: ["sq"] } },
        else_branch: { graph: { nodes: [node("Identity", ["r"], ["id"])], outputs: ["id"] } },
      }),
    ],
  }],
  ["GRU and RNN, bidirectional", {
    inputs: seq, outputs: ["y", "yh", "r"],
    inits: [init("W", [2, 18, 4]), init("R", [2, 18, 6]), init("Wr", [1, 7, 4]), init("Rr", [1, 7, 7])],
    nodes: [node("GRU", ["x", "W", "R"], ["y", "yh"], { hidden_size: 6, direction: "bidirectional" }), node("RNN", ["x", "Wr", "Rr"], ["r"], { hidden_size: 7 })],
  }],
];

describe("ORT's shapes of the ops memlane-rt does not run", () => {
  it.each(CASES)("%s", async (name, spec) => {
    const file = writeModel(spec, name.replace(/\W+/g, "-"), dir);
    const { inputs, outputs } = ortGraphIo(loadOnnx(file));
    const sess = await ortSession(file);
    const dims = (s: number[]) => s.map((d) => (d < 0 ? -d * 3 : d));
    const feed = Object.fromEntries(sess.inputNames.map((n, k) => {
      const shape = dims(inputs[k]!.shape);
      return [n, new ort.Tensor("float32", new Float32Array(shape.reduce((a, b) => a * b, 1)).fill(0.5), shape)];
    }));
    const got = await sess.run(feed);
    const ortType = { float32: "float32", int64: "int64", bool: "bool", int32: "int32", uint8: "uint8", int8: "int8", uint16: "uint16", int16: "int16", float16: "float16" } as const;
    expect(outputs.map((o) => [dims(o.shape), ortType[o.dtype]])).toEqual(sess.outputNames.map((n) => [[...got[n]!.dims], got[n]!.type]));
  });

  // CLIP with both towers: image embeddings times text embeddings transposed, [batch, batch].
  it("follows a MatMul of two batch-carrying activations, counting its [batch, batch] output as [batch, 1]", async () => {
    const spec: ModelSpec = {
      inputs: [["img", ["N", 16]], ["txt", ["N", 16]]], outputs: ["logits", "e"], inits: [init("wi", [16, 8]), init("wt", [16, 8])],
      nodes: [node("MatMul", ["img", "wi"], ["e"]), node("MatMul", ["txt", "wt"], ["t"]), node("Transpose", ["t"], ["tt"], { perm: [1, 0] }), node("MatMul", ["e", "tt"], ["logits"])],
    };
    const file = writeModel(spec, "two-towers", dir);
    const { outputs } = ortGraphIo(loadOnnx(file));
    expect(outputs.map((o) => o.shape)).toEqual([[-1, 1], [-1, 8]]);
    const sess = await ortSession(file);
    const x = new ort.Tensor("float32", new Float32Array(3 * 16).fill(0.5), [3, 16]);
    expect([...(await sess.run({ img: x, txt: x })).logits!.dims]).toEqual([3, 3]); // what ORT makes
  });

  it("refuses a GRU of layout 1, as ORT's CPU kernel does, naming it", () => {
    const spec: ModelSpec = { inputs: [["x", ["N", 5, 4]]], outputs: ["y"], inits: [init("W", [1, 18, 4]), init("R", [1, 18, 6])], nodes: [node("GRU", ["x", "W", "R"], ["y"], { hidden_size: 6, layout: 1 })] };
    expect(() => ortGraphIo(loadOnnx(writeModel(spec, "gru-layout1", dir)))).toThrow(/GRU node .*layout 1: ONNX Runtime's CPU kernel runs layout 0 only/);
  });
});
