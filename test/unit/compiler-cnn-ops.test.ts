/** Lowerings of the CNN ops and LSTM, the SiLU fusion and the batch_first LSTM rewrite. */
import { rmSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { CompileError, compileOnnx, readPlan } from "../../src/compiler/index.ts";
import { resizeMatrix } from "../../src/compiler/ops-resize.ts";
import { type ModelSpec, init, node, tempDir, writeModel } from "./compiler-onnx-builder.ts";

const dir = tempDir();
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let count = 0;

async function plan(spec: ModelSpec) {
  const name = `m${count++}`;
  const p = join(dir, `${name}.mlplan`);
  await compileOnnx(writeModel(spec, name, dir), p);
  const h = readPlan(p).header;
  const shape = (id: number) => h.tensors[id]!.shape;
  return { h, ops: h.ops.map((o) => ({ ...o, inShapes: o.inputs.map((i) => (i < 0 ? [] : shape(i))), outShapes: o.outputs.map(shape) })) };
}

async function failure(spec: ModelSpec): Promise<string> {
  const name = `f${count++}`;
  const err = await compileOnnx(writeModel(spec, name, dir), join(dir, `${name}.mlplan`)).then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(CompileError);
  return (err as Error).message;
}

const i64 = (name: string, data: number[]) => init(name, [data.length], data, "int64");
const x4: ModelSpec["inputs"] = [["x", ["N", 4, 5, 6]]];

describe("Clip, HardSigmoid, HardSwish", () => {
  it("takes Clip bounds from constant inputs (opset 11+), omitting an absent one", async () => {
    const { ops } = await plan({
      inputs: x4, outputs: ["z"], inits: [init("lo", [], [0]), init("hi", [], [6])],
      nodes: [node("Clip", ["x", "lo", "hi"], ["y"]), node("Clip", ["y", "", "hi"], ["z"])],
    });
    expect(ops.map((o) => [o.op, o.attrs, o.inputs.length])).toEqual([["Clip", { min: 0, max: 6 }, 1], ["Clip", { max: 6 }, 1]]);
  });

  it("takes Clip bounds from attributes before opset 11", async () => {
    const { ops } = await plan({ opset: 6, inputs: x4, outputs: ["y"], nodes: [node("Clip", ["x"], ["y"], { min: { f: -1 }, max: { f: 1 } })] });
    expect(ops[0]!.attrs).toEqual({ min: -1, max: 1 });
  });

  it("refuses a Clip bound computed at run time, naming the input", async () => {
    const msg = await failure({ inputs: [...x4, ["m", ["N", 4, 5, 6]]], outputs: ["y"], nodes: [node("Clip", ["x", "m"], ["y"])] });
    expect(msg).toMatch(/Clip min \(input 1, "m"\) is computed at run time/);
  });

  it("resolves HardSigmoid's defaults and keeps HardSwish", async () => {
    const { ops } = await plan({ inputs: x4, outputs: ["z"], nodes: [node("HardSigmoid", ["x"], ["y"]), node("HardSwish", ["y"], ["z"])] });
    expect(ops.map((o) => [o.op, o.attrs])).toEqual([["HardSigmoid", { alpha: 0.2, beta: 0.5 }], ["HardSwish", {}]]);
  });
});

describe("SiLU fusion", () => {
  it("fuses Mul(x, Sigmoid(x)) in either operand order", async () => {
    const { ops } = await plan({
      inputs: x4, outputs: ["z"],
      nodes: [node("Sigmoid", ["x"], ["s"]), node("Mul", ["x", "s"], ["y"]), node("Sigmoid", ["y"], ["t"]), node("Mul", ["t", "y"], ["z"])],
    });
    expect(ops.map((o) => o.op)).toEqual(["SiLU", "SiLU"]);
    expect(ops[1]!.outShapes[0]).toEqual([-1, 4, 5, 6]);
  });

  it("keeps Sigmoid and Mul when the Sigmoid's output is read elsewhere, or multiplies another tensor", async () => {
    const { ops } = await plan({
      inputs: [...x4, ["w", ["N", 4, 5, 6]]], outputs: ["y", "s", "v"],
      nodes: [node("Sigmoid", ["x"], ["s"]), node("Mul", ["x", "s"], ["y"]), node("Sigmoid", ["x"], ["u"]), node("Mul", ["w", "u"], ["v"])],
    });
    expect(ops.map((o) => o.op)).toEqual(["Sigmoid", "Mul", "Sigmoid", "Mul"]);
  });
});

describe("1-D convolution and pooling", () => {
  const w = (dims: number[]) => init("w", dims, Array.from({ length: dims.reduce((a, d) => a * d, 1) }, (_, i) => i / 10));
  it("runs a 1-D Conv and pools as 2-D ones over [N, C, 1, L], between Reshapes", async () => {
    const { ops } = await plan({
      inputs: [["x", ["N", 4, 20]]], outputs: ["z"], inits: [w([6, 2, 3])],
      nodes: [
        node("Conv", ["x", "w"], ["y"], { kernel_shape: [3], strides: [2], pads: [1, 2], dilations: [2], group: 2 }),
        node("MaxPool", ["y"], ["p"], { kernel_shape: [2], strides: [2] }),
        node("AveragePool", ["p"], ["z"], { kernel_shape: [3], pads: [1, 1], count_include_pad: 1 }),
      ],
    });
    expect(ops.map((o) => o.op)).toEqual(["Reshape", "Conv", "Reshape", "Reshape", "MaxPool", "Reshape", "Reshape", "AveragePool", "Reshape"]);
    const conv = ops[1]!;
    // L 20, pads 1 + 2, dilated kernel 5, stride 2: (23 - 5) / 2 + 1 = 10 outputs
    expect(conv.inShapes.slice(0, 2)).toEqual([[-1, 4, 1, 20], [6, 2, 1, 3]]);
    expect(conv.outShapes).toEqual([[-1, 6, 1, 10]]);
    expect(conv.attrs).toMatchObject({ kernel: [1, 3], strides: [1, 2], pads: [0, 1, 0, 2], dilations: [1, 2], group: 2 });
    expect(ops[2]!.outShapes).toEqual([[-1, 6, 10]]);
    expect(ops[4]!.attrs).toMatchObject({ kernel: [1, 2], strides: [1, 2] });
    expect(ops.at(-2)!.attrs).toMatchObject({ kernel: [1, 3], pads: [0, 1, 0, 1], countIncludePad: 1 });
    expect(ops.at(-1)!.outShapes).toEqual([[-1, 6, 5]]);
  });

  it("refuses 1-D attributes of the wrong length and 3-D windows, naming the node", async () => {
    const bad = await failure({ inputs: [["x", ["N", 4, 20]]], outputs: ["y"], inits: [w([6, 4, 3])], nodes: [node("Conv", ["x", "w"], ["y"], { pads: [1, 1, 1, 1] })] });
    expect(bad).toMatch(/Conv node .*: a 1-D window's pads must have 2 entries, found \[1,1,1,1\]/);
    const three = await failure({ inputs: [["x", ["N", 4, 5, 6, 7]]], outputs: ["y"], inits: [w([6, 4, 3, 3, 3])], nodes: [node("Conv", ["x", "w"], ["y"])] });
    expect(three).toMatch(/1-D or 2-D convolution: \[N, C, L\] or \[N, C, H, W\]\) must have rank 4/);
  });
});

describe("Resize (rewritten into MatMuls by interpolation matrices)", () => {
  const f32 = (name: string, data: number[]) => init(name, [data.length], data);
  it("writes each resized axis as a MatMul, the row axis between Transposes", async () => {
    const { ops } = await plan({
      inputs: [["x", ["N", 3, 4, 5]]], outputs: ["y"], inits: [f32("scales", [1, 1, 2, 3])],
      nodes: [node("Resize", ["x", "", "scales"], ["y"], { mode: "linear" })],
    });
    expect(ops.map((o) => o.op)).toEqual(["MatMul", "Transpose", "MatMul", "Transpose"]);
    expect(ops.map((o) => o.outShapes[0])).toEqual([[-1, 3, 4, 15], [-1, 3, 15, 4], [-1, 3, 15, 8], [-1, 3, 8, 15]]);
    expect(ops[0]!.inShapes[1]).toEqual([5, 15]);
    expect(ops[2]!.inShapes[1]).toEqual([4, 8]);
  });

  it("builds ONNX's coordinate transforms and roundings into the matrices", () => {
    const col = (m: Float32Array, nOut: number, j: number) => Array.from({ length: m.length / nOut }, (_, i) => m[i * nOut + j]);
    const half = (j: number, _i: number, _o: number, s: number) => (j + 0.5) / s - 0.5;
    // linear, half_pixel, 4 -> 8: output 0 sits at -0.25, clamped to input 0; output 3 at 1.25
    const lin = resizeMatrix(4, 8, 2, "linear", half, (x) => Math.round(x));
    expect(col(lin, 8, 0)).toEqual([1, 0, 0, 0]);
    expect(col(lin, 8, 3)).toEqual([0, 0.75, 0.25, 0]);
    expect(col(lin, 8, 7)).toEqual([0, 0, 0, 1]); // 3.25 clamped to the last input
    // align_corners, 3 -> 5: outputs at 0, 0.5, 1, 1.5, 2
    const ac = resizeMatrix(3, 5, 5 / 3, "linear", (j, i, o) => (j * (i - 1)) / (o - 1), (x) => x);
    expect(col(ac, 5, 1)).toEqual([0.5, 0.5, 0]);
    expect(col(ac, 5, 4)).toEqual([0, 0, 1]);
    // nearest, asymmetric, 4 -> 2 with round_prefer_ceil: sources 0 and 2
    const near = resizeMatrix(4, 2, 0.5, "nearest", (j, _i, _o, s) => j / s, (x) => Math.ceil(x));
    expect([col(near, 2, 0), col(near, 2, 1)]).toEqual([[1, 0, 0, 0], [0, 0, 1, 0]]);
  });

  it("refuses what it cannot rewrite, saying why", async () => {
    const area = await failure({ inputs: [["x", ["N", 3, 4, 5]]], outputs: ["y"], inits: [f32("s", [1, 1, 2, 2])], nodes: [node("Resize", ["x", "", "s"], ["y"], { mode: "area" })] });
    expect(area).toMatch(/Resize node .*: mode "area" is not supported \(nearest, linear and cubic are\)/);
    const antialias = await failure({ inputs: [["x", ["N", 3, 4, 5]]], outputs: ["y"], inits: [f32("s", [1, 1, 0.5, 0.5])], nodes: [node("Resize", ["x", "", "s"], ["y"], { mode: "cubic", antialias: 1 })], opset: 18 });
    expect(antialias).toMatch(/antialias is not supported/);
    const channels = await failure({ inputs: [["x", ["N", 3, 4, 5]]], outputs: ["y"], inits: [f32("s", [1, 2, 1, 1])], nodes: [node("Resize", ["x", "", "s"], ["y"])] });
    expect(channels).toMatch(/only the last two \(spatial\) axes may be resized/);
    const runtime = await failure({ inputs: [["x", ["N", 3, 4, 5]], ["s", [4]]], outputs: ["y"], nodes: [node("Resize", ["x", "", "s"], ["y"])] });
    expect(runtime).toMatch(/computed at run time; only constant scales and sizes are supported/);
  });
});

describe("ReduceL2, ReduceSumSquare, ReduceL1", () => {
  it("run as a ReduceSum of x² (then a Sqrt for L2) or of |x|, on the node's axes", async () => {
    const x: ModelSpec["inputs"] = [["x", ["N", 6, 6, 8]]];
    const l2 = await plan({ inputs: x, outputs: ["y"], nodes: [node("ReduceL2", ["x"], ["y"], { axes: [1, 2], keepdims: 1 })] });
    expect(l2.ops.map((o) => [o.op, o.attrs])).toEqual([["Pow", { exponent: 2 }], ["ReduceSum", { axes: [1, 2], keepdims: 1 }], ["Sqrt", {}]]);
    expect(l2.ops.at(-1)!.outShapes).toEqual([[-1, 1, 1, 8]]);
    const sq = await plan({ inputs: x, outputs: ["y"], nodes: [node("ReduceSumSquare", ["x"], ["y"], { axes: [-1], keepdims: 0 })] });
    expect(sq.ops.map((o) => o.op)).toEqual(["Pow", "ReduceSum"]);
    const l1 = await plan({ opset: 18, inputs: x, outputs: ["y"], inits: [i64("axes", [3])], nodes: [node("ReduceL1", ["x", "axes"], ["y"])] });
    expect(l1.ops.map((o) => [o.op, o.outShapes[0]])).toEqual([["Abs", [-1, 6, 6, 8]], ["ReduceSum", [-1, 6, 6, 1]]]);
  });
});

describe("Pad", () => {
  it("pads from a constant input, in full rank, with mode and value", async () => {
    const { ops } = await plan({
      inputs: x4, outputs: ["y"], inits: [i64("p", [0, 0, 1, 2, 0, 0, 3, 4]), init("v", [], [0.5])],
      nodes: [node("Pad", ["x", "p", "v"], ["y"], { mode: "reflect" })],
    });
    expect(ops[0]!.attrs).toEqual({ pads: [0, 0, 1, 2, 0, 0, 3, 4], mode: "reflect", value: 0.5 });
    expect(ops[0]!.inputs.length).toBe(1);
    expect(ops[0]!.outShapes[0]).toEqual([-1, 4, 9, 12]);
  });

  it("places opset-18 axes pads and takes the attribute form before opset 11", async () => {
    const a = await plan({ opset: 18, inputs: x4, outputs: ["y"], inits: [i64("p", [1, 2, 3, 4]), i64("ax", [-1, 1])], nodes: [node("Pad", ["x", "p", "", "ax"], ["y"], { mode: "edge" })] });
    expect(a.ops[0]!.attrs.pads).toEqual([0, 2, 0, 1, 0, 4, 0, 3]);
    const b = await plan({ opset: 10, inputs: [["x", ["N", 3, 5]]], outputs: ["y"], nodes: [node("Pad", ["x"], ["y"], { pads: [0, 0, 2, 0, 0, 1], value: { f: 1.5 } })] });
    expect(b.ops[0]!.attrs).toEqual({ pads: [0, 0, 2, 0, 0, 1], mode: "constant", value: 1.5 });
    expect(b.ops[0]!.outShapes[0]).toEqual([-1, 3, 8]);
  });

  it("refuses padding the batch, wrap mode and reflect pads as large as the dimension", async () => {
    expect(await failure({ inputs: x4, outputs: ["y"], inits: [i64("p", [1, 0, 0, 0, 0, 0, 0, 0])], nodes: [node("Pad", ["x", "p"], ["y"])] })).toMatch(/pad the batch/);
    expect(await failure({ opset: 19, inputs: x4, outputs: ["y"], inits: [i64("p", [0, 0, 1, 1, 0, 0, 1, 1])], nodes: [node("Pad", ["x", "p"], ["y"], { mode: "wrap" })] })).toMatch(/mode "wrap"/);
    expect(await failure({ inputs: x4, outputs: ["y"], inits: [i64("p", [0, 0, 5, 0, 0, 0, 0, 0])], nodes: [node("Pad", ["x", "p"], ["y"], { mode: "reflect" })] })).toMatch(/smaller than/);
  });
});

describe("Split", () => {
  it("splits by a constant sizes input (opset 13+) and by the attribute before", async () => {
    const a = await plan({ inputs: x4, outputs: ["a", "b"], inits: [i64("s", [1, 3])], nodes: [node("Split", ["x", "s"], ["a", "b"], { axis: 1 })] });
    expect(a.ops[0]!.attrs).toEqual({ axis: 1, split: [1, 3] });
    expect(a.ops[0]!.outShapes).toEqual([[-1, 1, 5, 6], [-1, 3, 5, 6]]);
    const b = await plan({ opset: 11, inputs: x4, outputs: ["a", "b"], nodes: [node("Split", ["x"], ["a", "b"], { axis: -1, split: [2, 4] })] });
    expect(b.ops[0]!.attrs).toEqual({ axis: 3, split: [2, 4] });
  });

  it("splits equally: num_outputs (opset 18, last part smaller) or evenly by the output count", async () => {
    const a = await plan({ opset: 18, inputs: [["x", ["N", 7]]], outputs: ["a", "b", "c"], nodes: [node("Split", ["x"], ["a", "b", "c"], { axis: 1, num_outputs: 3 })] });
    expect(a.ops[0]!.attrs.split).toEqual([3, 3, 1]);
    const b = await plan({ inputs: x4, outputs: ["a", "b"], nodes: [node("Split", ["x"], ["a", "b"], { axis: 1 })] });
    expect(b.ops[0]!.attrs.split).toEqual([2, 2]);
  });

  it("splits a tensor whose batch a Transpose moved (timm's fused q, k and v) with the batch brought first and each part moved back", async () => {
    // [N, 4, 3, 2, 5] -> [3, N, 2, 4, 5], unbound along axis 0 into three [1, N, 2, 4, 5].
    const { ops } = await plan({
      inputs: [["x", ["N", 4, 3, 2, 5]]], outputs: ["q", "k", "v"], inits: [i64("s", [1, 1, 1])],
      nodes: [node("Transpose", ["x"], ["t"], { perm: [2, 0, 3, 1, 4] }), node("Split", ["t", "s"], ["q", "k", "v"], { axis: 0 })],
    });
    expect(ops.map((o) => o.op)).toEqual(["Transpose", "Transpose", "Split", "Transpose", "Transpose", "Transpose"]);
    expect(ops[1]!.attrs.perm).toEqual([1, 0, 2, 3, 4]);
    expect(ops[1]!.outShapes[0]).toEqual([-1, 3, 2, 4, 5]);
    expect(ops[2]!.attrs).toEqual({ axis: 1, split: [1, 1, 1] });
    expect(ops.slice(3).map((o) => o.outShapes[0])).toEqual([[1, -1, 2, 4, 5], [1, -1, 2, 4, 5], [1, -1, 2, 4, 5]]);
    // Along the moved batch itself it is still refused.
    expect(await failure({ inputs: [["x", ["N", 4]]], outputs: ["a", "b"], nodes: [node("Transpose", ["x"], ["t"], { perm: [1, 0] }), node("Split", ["t"], ["a", "b"], { axis: 1 })] })).toMatch(/batch/);
  });

  it("refuses splitting the batch and sizes that do not add up", async () => {
    expect(await failure({ inputs: x4, outputs: ["a", "b"], nodes: [node("Split", ["x"], ["a", "b"], { axis: 0 })] })).toMatch(/batch/);
    expect(await failure({ inputs: x4, outputs: ["a", "b"], inits: [i64("s", [1, 2])], nodes: [node("Split", ["x", "s"], ["a", "b"], { axis: 1 })] })).toMatch(/does not divide/);
  });
});

describe("Concat with constants", () => {
  it("keeps a [1, ...] constant as a weight input, repeated over the batch", async () => {
    const { h, ops } = await plan({
      inputs: [["x", ["N", 3, 4]]], outputs: ["y"], inits: [init("tok", [1, 1, 4])],
      nodes: [node("Concat", ["tok", "x"], ["y"], { axis: 1 })],
    });
    expect(ops[0]!.outShapes[0]).toEqual([-1, 4, 4]);
    expect(h.tensors[ops[0]!.inputs[0]!]!.kind).toBe("weight");
  });

  it("refuses a constant whose first dimension is not 1", async () => {
    const msg = await failure({ inputs: [["x", ["N", 3, 4]]], outputs: ["y"], inits: [init("tok", [2, 1, 4])], nodes: [node("Concat", ["tok", "x"], ["y"], { axis: 1 })] });
    expect(msg).toMatch(/leading 1/);
  });
});

describe("LSTM", () => {
  const H = 3, I = 2, D = 2;
  const weights = [init("W", [D, 4 * H, I]), init("R", [D, 4 * H, H]), init("B", [D, 8 * H])];
  /** torch's batch_first=True export: X [N, S, I] transposed to [S, N, I], zero states from the batch size. */
  const batchFirst = (outputs: string[], extraNodes: ModelSpec["nodes"] = []): ModelSpec => ({
    inputs: [["x", ["N", 5, I]]], outputs, inits: [...weights, i64("dh", [D]), i64("hh", [H]), i64("idx", [0]), i64("shape", [0, 0, -1])],
    nodes: [
      node("Shape", ["x"], ["xs"]), node("Gather", ["xs", "idx"], ["n"], { axis: 0 }),
      node("Concat", ["dh", "n", "hh"], ["hshape"], { axis: 0 }), node("ConstantOfShape", ["hshape"], ["h0"]),
      node("Transpose", ["x"], ["xt"], { perm: [1, 0, 2] }),
      node("LSTM", ["xt", "W", "R", "B", "", "h0", "h0"], ["Y", "Yh", "Yc"], { hidden_size: H, direction: "bidirectional" }),
      node("Transpose", ["Y"], ["Yt"], { perm: [0, 2, 1, 3] }), node("Reshape", ["Yt", "shape"], ["Yr"]),
      node("Transpose", ["Yr"], ["y"], { perm: [1, 0, 2] }), ...extraNodes,
    ],
  });

  it("rewrites the batch_first pattern into a batch-first LSTM and one Reshape", async () => {
    const { ops } = await plan(batchFirst(["y"]));
    expect(ops.map((o) => o.op)).toEqual(["LSTM", "Reshape"]);
    expect(ops[0]!.attrs).toEqual({ hiddenSize: H, direction: "bidirectional", layout: 1 });
    expect(ops[0]!.inShapes.slice(0, 2)).toEqual([[-1, 5, I], [D, 4 * H, I]]);
    expect(ops[0]!.outShapes).toEqual([[-1, 5, D, H], [-1, D, H], [-1, D, H]]);
    expect(ops[1]!.outShapes[0]).toEqual([-1, 5, D * H]);
  });

  it("keeps h_n and c_n in layout 0 ([D, batch, H]) by a Transpose of the batch-first states", async () => {
    const { ops } = await plan(batchFirst(["y", "Yh", "Yc"]));
    expect(ops.map((o) => o.op).sort()).toEqual(["LSTM", "Reshape", "Transpose", "Transpose"]);
    const back = ops.filter((o) => o.op === "Transpose");
    expect(back.map((o) => o.attrs.perm)).toEqual([[1, 0, 2], [1, 0, 2]]);
    expect(back.map((o) => o.outShapes[0])).toEqual([[D, -1, H], [D, -1, H]]);
  });

  it("rewrites a plain layout 0 LSTM (seq-first X) to Transpose -> batch-first LSTM -> Transpose back", async () => {
    const { ops } = await plan({
      inputs: [["x", [5, "N", I]]], outputs: ["Y", "Yh"], inits: weights,
      nodes: [node("LSTM", ["x", "W", "R", "B"], ["Y", "Yh"], { hidden_size: H, direction: "bidirectional" })],
    });
    expect(ops.map((o) => o.op)).toEqual(["Transpose", "LSTM", "Transpose", "Transpose"]);
    expect(ops[0]!.outShapes[0]).toEqual([-1, 5, I]);
    expect(ops[2]!.outShapes[0]).toEqual([5, D, -1, H]);
    expect(ops[3]!.outShapes[0]).toEqual([D, -1, H]);
  });

  it("gives another reader of the sequence-first Y the layout 0 Y", async () => {
    const { ops } = await plan(batchFirst(["y", "r"], [node("Relu", ["Y"], ["r"])]));
    const relu = ops.find((o) => o.op === "Relu")!;
    expect(relu.inShapes[0]).toEqual([5, D, -1, H]);
  });

  // EnCodec's residual LSTM adds its input to the merged Y while both are sequence-first: the
  // merged [S, N, D·H] is made from its batch-first twin by a Transpose [1, 0, 2] (it was refused).
  it("gives another reader of the merged sequence-first Y that Y, transposed from its twin", async () => {
    const { ops } = await plan(batchFirst(["y", "r"], [node("Relu", ["Yr"], ["r"])]));
    expect(ops.map((o) => o.op)).toEqual(["LSTM", "Reshape", "Transpose", "Relu"]);
    expect(ops[2]!.attrs.perm).toEqual([1, 0, 2]);
    expect(ops.find((o) => o.op === "Relu")!.inShapes[0]).toEqual([5, -1, D * H]);
  });

  it("refuses sequence_lens", async () => {
    const msg = await failure({
      inputs: [["x", [5, "N", I]], ["len", ["N"], 7]], outputs: ["Y"], inits: weights,
      nodes: [node("LSTM", ["x", "W", "R", "B", "len"], ["Y"], { hidden_size: H, direction: "bidirectional" })],
    });
    expect(msg).toMatch(/here sequence_lens is given/);
  });

  it("refuses a non-zero initial state and non-default activations on a layout 1 LSTM", async () => {
    const base = { inputs: [["x", ["N", 5, I]]] as ModelSpec["inputs"], outputs: ["Y"] };
    const h0 = init("h0", [1, D, H], [1, 0, 0, 0, 0, 0]);
    expect(await failure({ ...base, inits: [...weights, h0], nodes: [node("LSTM", ["x", "W", "R", "B", "", "h0"], ["Y"], { hidden_size: H, direction: "bidirectional", layout: 1 })] })).toMatch(/initial_h must be absent or zeros/);
    const acts = { hidden_size: H, layout: 1, activations: ["Tanh", "Tanh", "Tanh"] };
    const fwd = [init("W", [1, 4 * H, I]), init("R", [1, 4 * H, H])];
    expect(await failure({ ...base, inits: fwd, nodes: [node("LSTM", ["x", "W", "R"], ["Y"], acts as never)] })).toMatch(/activations/);
  });
});
