import { describe, expect, it } from "vitest";
import { type PlanHeader, weightData } from "../../src/compiler/index.ts";
import { compile } from "./compiler-compile-helper.ts";
import { type ModelSpec, type NodeSpec, init, node } from "./compiler-onnx-builder.ts";

const ops = (h: PlanHeader) => h.ops.map((o) => o.op);
const shapeOf = (h: PlanHeader, id: number) => h.tensors[id]!.shape;
const outShape = (h: PlanHeader) => shapeOf(h, h.outputs[0]!);
const fails = (spec: ModelSpec) => compile(spec).then(() => "compiled", (e: unknown) => (e as Error).message);

describe("compiler: transformer op lowerings", () => {
  it("LayerNormalization: normalised axis, epsilon, a broadcast scale expanded, axis 0 refused", async () => {
    const { h, plan } = await compile({
      inputs: [["x", ["N", 4, 6]]], outputs: ["y"],
      inits: [init("g", [1, 6], [1, 2, 3, 4, 5, 6]), init("b", [6])],
      nodes: [node("LayerNormalization", ["x", "g", "b"], ["y"], { axis: -1, epsilon: { f: 1e-3 } })],
    });
    expect(ops(h)).toEqual(["LayerNormalization"]);
    expect(h.ops[0]!.attrs.axis).toBe(2);
    expect(h.ops[0]!.attrs.epsilon).toBeCloseTo(1e-3, 8);
    expect(shapeOf(h, h.ops[0]!.inputs[1]!)).toEqual([6]);
    expect(Array.from(weightData(plan, h.ops[0]!.inputs[1]!))).toEqual([1, 2, 3, 4, 5, 6]);
    expect(await fails({
      inputs: [["x", ["N", 4]]], outputs: ["y"], inits: [init("g", [4])],
      nodes: [node("LayerNormalization", ["x", "g"], ["y"], { axis: 0 }, "ln0")],
    })).toMatch(/ln0.*across the batch/);
  });

  it("MatMul of two activations broadcasts the leading dims; N-D weights too; a rank mismatch is refused", async () => {
    const two = await compile({
      inputs: [["q", ["N", 2, 3, 4]], ["k", ["N", 1, 4, 5]]], outputs: ["y"],
      nodes: [node("MatMul", ["q", "k"], ["y"])],
    });
    expect(outShape(two.h)).toEqual([-1, 2, 3, 5]);
    const w = await compile({
      inputs: [["a", ["N", 2, 3, 4]]], outputs: ["y"], inits: [init("w", [2, 4, 5])],
      nodes: [node("MatMul", ["a", "w"], ["y"])],
    });
    expect(outShape(w.h)).toEqual([-1, 2, 3, 5]);
    expect(await fails({
      inputs: [["a", ["N", 3, 4]], ["b", ["N", 2, 4, 5]]], outputs: ["y"],
      nodes: [node("MatMul", ["a", "b"], ["y"], {}, "mm")],
    })).toMatch(/mm.*differ in rank/);
    expect(await fails({
      inputs: [["a", ["N", 3, 4]]], outputs: ["y"], inits: [init("w", [2, 4, 5])],
      nodes: [node("MatMul", ["a", "w"], ["y"], {}, "mmw")],
    })).toMatch(/mmw.*broadcast over the batch/);
  });

  it("Pow takes a constant scalar exponent; Sqrt/Exp/... keep the shape", async () => {
    const { h } = await compile({
      inputs: [["x", ["N", 5]]], outputs: ["y"], inits: [init("e", [], [3])],
      nodes: [node("Pow", ["x", "e"], ["p"]), node("Abs", ["p"], ["a"]), node("Sqrt", ["a"], ["s"]), node("Exp", ["s"], ["y"])],
    });
    expect(ops(h)).toEqual(["Pow", "Abs", "Sqrt", "Exp"]);
    expect(h.ops[0]!.attrs.exponent).toBe(3);
    expect(h.ops[0]!.inputs).toHaveLength(1);
    expect(await fails({
      inputs: [["x", ["N", 5]], ["e", ["N", 5]]], outputs: ["y"],
      nodes: [node("Pow", ["x", "e"], ["y"], {}, "pw")],
    })).toMatch(/pw.*constant scalar/);
  });

  it("ReduceSum/Max/Mean over non-batch axes (attribute or input), keepdims both ways; the batch is refused", async () => {
    const sum = await compile({
      opset: 13, inputs: [["x", ["N", 3, 4, 5]]], outputs: ["y"], inits: [init("axes", [2], [-1, 1], "int64")],
      nodes: [node("ReduceSum", ["x", "axes"], ["y"], { keepdims: 0 })],
    });
    expect(ops(sum.h)).toEqual(["ReduceSum"]);
    expect(sum.h.ops[0]!.attrs).toEqual({ axes: [1, 3], keepdims: 0 });
    expect(outShape(sum.h)).toEqual([-1, 4]);
    const max = await compile({
      opset: 13, inputs: [["x", ["N", 3, 4]]], outputs: ["y"],
      nodes: [node("ReduceMax", ["x"], ["y"], { axes: [2] })],
    });
    expect(outShape(max.h)).toEqual([-1, 3, 1]);
    // A mean over the channels of [N, C, H, W] is a ReduceMean; over H, W it stays GlobalAveragePool.
    const mean = await compile({
      opset: 18, inputs: [["x", ["N", 3, 4, 4]]], outputs: ["y"], inits: [init("axes", [1], [1], "int64")],
      nodes: [node("ReduceMean", ["x", "axes"], ["y"])],
    });
    expect(ops(mean.h)).toEqual(["ReduceMean"]);
    expect(outShape(mean.h)).toEqual([-1, 1, 4, 4]);
    expect(await fails({
      opset: 13, inputs: [["x", ["N", 3]]], outputs: ["y"],
      nodes: [node("ReduceMax", ["x"], ["y"], { axes: [0] }, "rm")],
    })).toMatch(/rm.*batch/);
  });
});

/** x.mean(-1), x - mean, (.)^2 or d*d, mean, + eps, sqrt, d / s or d * 1/s, * gamma, + beta. */
function layerNormNodes(square: "pow" | "mul", divide: "div" | "recip", affine = true): NodeSpec[] {
  const n: NodeSpec[] = [
    node("ReduceMean", ["x"], ["m"], { axes: [-1] }),
    node("Sub", ["x", "m"], ["d"]),
    square === "pow" ? node("Pow", ["d", "two"], ["sq"]) : node("Mul", ["d", "d"], ["sq"]),
    node("ReduceMean", ["sq"], ["v"], { axes: [-1] }),
    node("Add", ["v", "eps"], ["ve"]),
    node("Sqrt", ["ve"], ["s"]),
    ...(divide === "div" ? [node("Div", ["d", "s"], ["nrm"])] : [node("Reciprocal", ["s"], ["r"]), node("Mul", ["d", "r"], ["nrm"])]),
  ];
  if (affine) n.push(node("Mul", ["nrm", "g"], ["gm"]), node("Add", ["gm", "b"], ["y"]));
  else n.push(node("Relu", ["nrm"], ["y"]));
  return n;
}
const LN_INITS = [init("two", [], [2]), init("eps", [], [1e-5]), init("g", [8]), init("b", [8])];

describe("compiler: fusions", () => {
  it("fuses a decomposed LayerNorm (Pow or d*d, Div or Reciprocal) into one LayerNormalization", async () => {
    for (const [sq, dv] of [["pow", "div"], ["mul", "recip"]] as const) {
      const { h } = await compile({ opset: 13, inputs: [["x", ["N", 3, 8]]], outputs: ["y"], inits: LN_INITS, nodes: layerNormNodes(sq, dv) });
      expect(ops(h)).toEqual(["LayerNormalization"]);
      expect(h.ops[0]!.attrs.axis).toBe(2);
      expect(h.ops[0]!.attrs.epsilon).toBeCloseTo(1e-5, 10);
      expect(h.ops[0]!.inputs.filter((i) => i >= 0)).toHaveLength(3);
    }
    // Without gamma/beta: a scale of ones, no bias; the Relu after it stays.
    const bare = await compile({ opset: 13, inputs: [["x", ["N", 8]]], outputs: ["y"], inits: LN_INITS, nodes: layerNormNodes("pow", "div", false) });
    expect(ops(bare.h)).toEqual(["LayerNormalization", "Relu"]);
    expect(Array.from(weightData(bare.plan, bare.h.ops[0]!.inputs[1]!))).toEqual(new Array(8).fill(1));
  });

  it("does not fuse a LayerNorm whose intermediate is read elsewhere, or whose mean is not over the last axes", async () => {
    const shared = await compile({
      opset: 13, inputs: [["x", ["N", 3, 8]]], outputs: ["y", "d"], inits: LN_INITS, nodes: layerNormNodes("pow", "div"),
    });
    expect(ops(shared.h)).not.toContain("LayerNormalization");
    const mid = layerNormNodes("pow", "div").map((n) => (n.op === "ReduceMean" ? { ...n, attrs: { axes: [1] } } : n));
    const notTrailing = await compile({ opset: 13, inputs: [["x", ["N", 8, 8]]], outputs: ["y"], inits: LN_INITS, nodes: mid });
    expect(ops(notTrailing.h)).not.toContain("LayerNormalization");
  });

  it("fuses the erf Gelu in either grouping, and GPT-2's tanh form, into Gelu", async () => {
    const inits = [init("sqrt2", [], [Math.SQRT2]), init("one", [], [1]), init("half", [], [0.5])];
    const erfTail = [node("Div", ["x", "sqrt2"], ["u"]), node("Erf", ["u"], ["e"]), node("Add", ["e", "one"], ["p"])];
    const a = await compile({ inputs: [["x", ["N", 6]]], outputs: ["y"], inits, nodes: [...erfTail, node("Mul", ["x", "p"], ["xp"]), node("Mul", ["xp", "half"], ["y"])] });
    expect(ops(a.h)).toEqual(["Gelu"]);
    expect(a.h.ops[0]!.attrs.approximate).toBe("none");
    const b = await compile({ inputs: [["x", ["N", 6]]], outputs: ["y"], inits, nodes: [node("Mul", ["x", "half"], ["h"]), ...erfTail, node("Mul", ["h", "p"], ["y"])] });
    expect(ops(b.h)).toEqual(["Gelu"]);
    const tanhInits = [init("three", [], [3]), init("c", [], [0.044715]), init("k", [], [Math.sqrt(2 / Math.PI)]), init("one", [], [1]), init("half", [], [0.5])];
    const tanhNodes = (c: string) => [
      node("Mul", ["x", "half"], ["h"]), node("Pow", ["x", "three"], ["x3"]), node("Mul", ["x3", c], ["cx3"]),
      node("Add", ["x", "cx3"], ["inner"]), node("Mul", ["inner", "k"], ["ki"]), node("Tanh", ["ki"], ["t"]),
      node("Add", ["t", "one"], ["p"]), node("Mul", ["h", "p"], ["y"]),
    ];
    const t = await compile({ inputs: [["x", ["N", 6]]], outputs: ["y"], inits: tanhInits, nodes: tanhNodes("c") });
    expect(ops(t.h)).toEqual(["Gelu"]);
    expect(t.h.ops[0]!.attrs.approximate).toBe("tanh");
    // A different constant is not a Gelu: nothing fused.
    const off = await compile({ inputs: [["x", ["N", 6]]], outputs: ["y"], inits: [...tanhInits, init("c2", [], [0.05])], nodes: tanhNodes("c2") });
    expect(ops(off.h)).toContain("Tanh");
    expect(ops(off.h)).not.toContain("Gelu");
  });

  it("fuses MatMul(Q, K^T) -> scale -> + mask -> Softmax -> MatMul(., V) into Attention, unless the scores are read elsewhere", async () => {
    const spec = (outputs: string[], div = true): ModelSpec => ({
      inputs: [["q", ["N", 2, 5, 4]], ["kt", ["N", 2, 4, 5]], ["v", ["N", 2, 5, 3]]], outputs,
      inits: [init("c", [], [2]), init("mask", [1, 1, 5, 5])],
      nodes: [
        node("MatMul", ["q", "kt"], ["s"]), node(div ? "Div" : "Mul", ["s", "c"], ["sc"]), node("Add", ["sc", "mask"], ["m"]),
        node("Softmax", ["m"], ["p"], { axis: -1 }), node("MatMul", ["p", "v"], ["y"]),
      ],
    });
    const { h } = await compile(spec(["y"]));
    expect(ops(h)).toEqual(["Attention"]);
    expect(h.ops[0]!.attrs.scale).toBe(0.5);
    expect(h.ops[0]!.inputs).toHaveLength(4);
    expect(outShape(h)).toEqual([-1, 2, 5, 3]);
    const mul = await compile(spec(["y"], false));
    expect(mul.h.ops[0]!.attrs.scale).toBe(2);
    const probsOut = await compile(spec(["y", "p"]));
    expect(ops(probsOut.h)).toContain("Softmax");
    expect(ops(probsOut.h)).not.toContain("Attention");
  });

  it("sees through float32 -> float32 Casts between Softmax and the second MatMul (transformers' legacy ViT export)", async () => {
    const spec = (to: number): ModelSpec => ({
      inputs: [["q", ["N", 2, 5, 4]], ["kt", ["N", 2, 4, 5]], ["v", ["N", 2, 5, 3]]], outputs: ["y"],
      inits: [init("c", [], [0.5])],
      nodes: [
        node("MatMul", ["q", "kt"], ["s"]), node("Mul", ["s", "c"], ["sc"]), node("Softmax", ["sc"], ["p"], { axis: -1 }),
        node("Cast", ["p"], ["p1"], { to }), node("Cast", ["p1"], ["p2"], { to }), node("MatMul", ["p2", "v"], ["y"]),
      ],
    });
    const { h } = await compile(spec(1));  // 1 = FLOAT
    expect(ops(h)).toEqual(["Attention"]);
    // A Cast that changes the dtype stays (and here keeps the chain apart).
    expect(await fails(spec(7))).not.toBe("compiled");  // 7 = INT64: MatMul refuses int64 probabilities
  });
});
