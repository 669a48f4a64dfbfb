import { describe, expect, it } from "vitest";
import { CompileError, type PlanHeader, weightData } from "../../src/compiler/index.ts";
import { compile } from "./compiler-compile-helper.ts";
import { init, node } from "./compiler-onnx-builder.ts";

const ops = (h: PlanHeader) => h.ops.map((o) => o.op);
const shapeOf = (h: PlanHeader, id: number) => h.tensors[id]!.shape;

describe("compiler: rewrites", () => {
  it("removes Identity and Dropout and keeps the ONNX output name", async () => {
    const { h } = await compile({
      inputs: [["x", ["N", 4]]], outputs: ["y"],
      nodes: [node("Identity", ["x"], ["a"]), node("Relu", ["a"], ["b"]), node("Dropout", ["b"], ["c"]), node("Identity", ["c"], ["y"])],
    });
    expect(ops(h)).toEqual(["Relu"]);
    expect(h.tensors[h.outputs[0]!]!.name).toBe("y");
    expect(h.tensors[h.outputs[0]!]!.kind).toBe("output");
  });

  it("folds the exporter's Shape/Gather/Unsqueeze/Concat chain into Reshape's shape", async () => {
    const { h } = await compile({
      inputs: [["x", ["N", 4, 2, 2]]], outputs: ["y"],
      inits: [init("zero", [], [0], "int64"), init("minus1", [1], [-1], "int64"), init("axes", [1], [0], "int64")],
      nodes: [
        node("Shape", ["x"], ["s"]), node("Gather", ["s", "zero"], ["n"], { axis: 0 }), node("Unsqueeze", ["n", "axes"], ["n1"]),
        node("Concat", ["n1", "minus1"], ["target"], { axis: 0 }), node("Reshape", ["x", "target"], ["y"]),
      ],
    });
    expect(ops(h)).toEqual(["Reshape"]);
    expect(h.ops[0]!.attrs.shape).toEqual([-1, 16]);
    expect(h.ops[0]!.inputs).toHaveLength(1);
    expect(shapeOf(h, h.outputs[0]!)).toEqual([-1, 16]);
  });

  it("folds ops whose inputs are all constants into a weight", async () => {
    const { h, plan } = await compile({
      inputs: [["x", ["N", 3]]], outputs: ["y"],
      inits: [init("a", [3], [1, 2, 3]), init("b", [3], [10, 20, 30])],
      nodes: [node("Mul", ["a", "b"], ["ab"]), node("Constant", [], ["k"], { value: { t: init("kv", [], [0.5]) } }), node("Add", ["ab", "k"], ["w"]), node("Add", ["x", "w"], ["y"])],
    });
    expect(ops(h)).toEqual(["Add"]);
    const w = h.ops[0]!.inputs[1]!;
    expect(h.tensors[w]!.kind).toBe("weight");
    expect(Array.from(weightData(plan, w))).toEqual([10.5, 40.5, 90.5]);
  });

  it("folds BatchNormalization into the preceding Conv (weights and bias rewritten)", async () => {
    const g = [2, 0.5], b = [0.1, -0.2], mean = [1, -1], v = [3, 0.25], eps = 1e-5;
    const { h, plan } = await compile({
      inputs: [["x", ["N", 1, 2, 2]]], outputs: ["y"],
      inits: [init("w", [2, 1, 1, 1], [3, -4]), init("cb", [2], [0.5, 1]), init("g", [2], g), init("b", [2], b), init("m", [2], mean), init("v", [2], v)],
      nodes: [node("Conv", ["x", "w", "cb"], ["c"]), node("BatchNormalization", ["c", "g", "b", "m", "v"], ["y"], { epsilon: eps })],
    });
    expect(ops(h)).toEqual(["Conv"]);
    const s = g.map((gi, i) => gi / Math.sqrt(v[i]! + eps));
    const w = Array.from(weightData(plan, h.ops[0]!.inputs[1]!));
    const bias = Array.from(weightData(plan, h.ops[0]!.inputs[2]!));
    [3 * s[0]!, -4 * s[1]!].forEach((e, i) => expect(w[i]).toBeCloseTo(e, 5));
    [0.5, 1].map((cb, i) => (cb - mean[i]!) * s[i]! + b[i]!).forEach((e, i) => expect(bias[i]).toBeCloseTo(e, 5));
  });

  it("turns a BatchNormalization without a Conv before it into Mul + Add with per-channel weights", async () => {
    const { h, plan } = await compile({
      inputs: [["x", ["N", 2, 3, 3]]], outputs: ["y"],
      inits: [init("g", [2], [1, 2]), init("b", [2], [0, 1]), init("m", [2], [0, 0]), init("v", [2], [1, 1])],
      nodes: [node("BatchNormalization", ["x", "g", "b", "m", "v"], ["y"], { epsilon: { f: 0 } })],
    });
    expect(ops(h)).toEqual(["Mul", "Add"]);
    const scale = h.ops[0]!.inputs[1]!;
    expect(h.tensors[scale]!.shape).toEqual([2, 1, 1]);
    expect(Array.from(weightData(plan, scale))).toEqual([1, 2]);
  });

  it("fuses Relu into Conv and Gemm, but not when the Conv output has another reader", async () => {
    const fused = await compile({
      inputs: [["x", ["N", 4]]], outputs: ["y"],
      inits: [init("w", [3, 4])],
      nodes: [node("Gemm", ["x", "w"], ["g"], { transB: 1 }), node("Relu", ["g"], ["y"])],
    });
    expect(ops(fused.h)).toEqual(["Gemm"]);
    expect(fused.h.ops[0]!.attrs.activation).toBe("relu");
    const shared = await compile({
      inputs: [["x", ["N", 1, 4, 4]]], outputs: ["y"],
      inits: [init("w", [2, 1, 3, 3])],
      nodes: [node("Conv", ["x", "w"], ["c"], { pads: [1, 1, 1, 1] }), node("Relu", ["c"], ["r"]), node("Add", ["c", "r"], ["y"])],
    });
    expect(ops(shared.h)).toEqual(["Conv", "Relu", "Add"]);
    expect(shared.h.ops[0]!.attrs.activation).toBe("none");
    expect(shared.h.ops[0]!.inputs[2]).toBe(-1);
  });

  it("drops nodes whose results reach no output, with a warning", async () => {
    const { h, summary } = await compile({
      inputs: [["x", ["N", 4]]], outputs: ["y"],
      nodes: [node("Relu", ["x"], ["y"]), node("Tanh", ["x"], ["unused"], {}, "dead_tanh")],
    });
    expect(ops(h)).toEqual(["Relu"]);
    expect(summary.warnings.join()).toMatch(/dead_tanh/);
  });

  it("turns ReduceMean over the spatial axes into GlobalAveragePool (+ Flatten without keepdims)", async () => {
    const { h } = await compile({
      opset: 18,
      inputs: [["x", ["N", 3, 4, 4]]], outputs: ["y"],
      inits: [init("axes", [2], [-1, 2], "int64")],
      nodes: [node("ReduceMean", ["x", "axes"], ["y"], { keepdims: 0 })],
    });
    expect(ops(h)).toEqual(["GlobalAveragePool", "Flatten"]);
    expect(shapeOf(h, h.ops[0]!.outputs[0]!)).toEqual([-1, 3, 1, 1]);
    expect(shapeOf(h, h.outputs[0]!)).toEqual([-1, 3]);
    expect(h.tensors[h.outputs[0]!]!.name).toBe("y");
    // Any other axes are a plain ReduceMean (compiler-transformer.test.ts).
    const other = await compile({
      opset: 18, inputs: [["x", ["N", 3, 4, 4]]], outputs: ["y"],
      inits: [init("axes", [1], [1], "int64")],
      nodes: [node("ReduceMean", ["x", "axes"], ["y"], {}, "mean_c")],
    });
    expect(ops(other.h)).toEqual(["ReduceMean"]);
  });

  it("orders nodes topologically when the file lists them out of order", async () => {
    const { h } = await compile({
      inputs: [["x", ["N", 4]]], outputs: ["y"],
      nodes: [node("Sigmoid", ["b"], ["y"]), node("Tanh", ["a"], ["b"]), node("Relu", ["x"], ["a"])],
    });
    expect(ops(h)).toEqual(["Relu", "Tanh", "Sigmoid"]);
  });
});

describe("compiler: shapes and attributes", () => {
  it("resolves auto_pad SAME_UPPER, ceil_mode pooling, strides and dilations", async () => {
    const { h } = await compile({
      inputs: [["x", ["N", 2, 7, 7]]], outputs: ["y"],
      inits: [init("w", [4, 2, 3, 3])],
      nodes: [
        node("Conv", ["x", "w"], ["c"], { auto_pad: "SAME_UPPER", strides: [2, 2] }),
        node("MaxPool", ["c"], ["y"], { kernel_shape: [2, 2], strides: [2, 2], ceil_mode: 1 }),
      ],
    });
    expect(h.ops[0]!.attrs).toMatchObject({ kernel: [3, 3], strides: [2, 2], pads: [1, 1, 1, 1], dilations: [1, 1], group: 1 });
    expect(shapeOf(h, h.ops[0]!.outputs[0]!)).toEqual([-1, 4, 4, 4]);
    expect(h.ops[1]!.attrs).toMatchObject({ pads: [0, 0, 0, 0], dilations: [1, 1], ceilMode: 1 });
    expect(shapeOf(h, h.outputs[0]!)).toEqual([-1, 4, 2, 2]);
  });

  it("normalises Softmax/Concat axes, Gemm's C, and resolves LeakyRelu/Gelu defaults (opset 20)", async () => {
    const { h } = await compile({
      opset: 20,
      inputs: [["x", ["N", 3]]], outputs: ["y"],
      inits: [init("w", [3, 5]), init("c", [1, 5])],
      nodes: [
        node("Gemm", ["x", "w", "c"], ["g"], { alpha: { f: 0.5 } }), node("LeakyRelu", ["g"], ["l"]), node("Gelu", ["l"], ["e"]),
        node("Concat", ["e", "g"], ["cat"], { axis: -1 }), node("Softmax", ["cat"], ["y"]),
      ],
    });
    expect(h.ops[0]!.attrs).toMatchObject({ alpha: 0.5, beta: 1, transA: 0, transB: 0 });
    expect(h.tensors[h.ops[0]!.inputs[2]!]!.shape).toEqual([5]);
    expect(h.ops[1]!.attrs.alpha).toBeCloseTo(0.01, 6);
    expect(h.ops[2]!.attrs.approximate).toBe("none");
    expect(h.ops[3]!.attrs.axis).toBe(1);
    expect(h.ops[4]!.attrs.axis).toBe(1);
    expect(shapeOf(h, h.outputs[0]!)).toEqual([-1, 10]);
  });

  it("broadcasts Sub/Div with a weight on either side", async () => {
    const { h } = await compile({
      inputs: [["x", ["N", 3, 2, 2]]], outputs: ["y"],
      inits: [init("m", [3, 1, 1]), init("one", [], [1])],
      nodes: [node("Sub", ["x", "m"], ["a"]), node("Div", ["one", "a"], ["y"])],
    });
    expect(ops(h)).toEqual(["Sub", "Div"]);
    expect(h.tensors[h.ops[1]!.inputs[0]!]!.kind).toBe("weight");
    expect(shapeOf(h, h.outputs[0]!)).toEqual([-1, 3, 2, 2]);
  });

  it("plans a statically batched input as the batch, with a warning", async () => {
    const { summary } = await compile({ inputs: [["x", [1, 4]]], outputs: ["y"], nodes: [node("Relu", ["x"], ["y"])] });
    expect(summary.inputs[0]!.shape).toEqual([-1, 4]);
    expect(summary.warnings.join()).toMatch(/fixed first dimension 1/);
  });

  it("flattens from axis 0 or 2 as a Reshape that merges the batch ([1, 6·batch], [2·batch, 3]); an output must keep a plain batch", async () => {
    const back = init("back", [3], [-1, 2, 3], "int64");
    for (const axis of [0, 2]) {
      const { h } = await compile({ inputs: [["x", ["N", 2, 3]]], outputs: ["y"], inits: [back], nodes: [node("Flatten", ["x"], ["f"], { axis }), node("Relu", ["f"], ["r"]), node("Reshape", ["r", "back"], ["y"])] });
      expect(h.ops.map((o) => [o.op, o.attrs.shape])).toEqual([["Reshape", axis === 0 ? [1, -6] : [-2, 3]], ["Relu", undefined], ["Reshape", [-1, 2, 3]]]);
    }
    await expect(compile({ inputs: [["x", ["N", 2, 3]]], outputs: ["y"], nodes: [node("Flatten", ["x"], ["y"], { axis: 0 })] }))
      .rejects.toThrow(/graph output "y" has shape \[1, 6·batch\]; a plan output needs one plain batch dimension/);
  });

  it.each([
    ["a Transpose whose perm is no permutation", node("Transpose", ["x"], ["y"], { perm: [1, 1, 2] }), /perm \[1,1,2\] is not a permutation/],
    ["a Softmax across the batch", node("Softmax", ["x"], ["y"], { axis: 0 }), /across the batch/],
  ])("refuses %s, naming the node", async (_, n, msg) => {
    const err = await compile({ inputs: [["x", ["N", 2, 3]]], outputs: ["y"], nodes: [{ ...n, name: "bad_node" }] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CompileError);
    expect((err as Error).message).toMatch(/bad_node/);
    expect((err as Error).message).toMatch(msg);
  });
});

