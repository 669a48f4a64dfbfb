// ORT's fusions as the pattern replay applies them (src/estimate/ort-fusions.ts): each rule
// fuses its pair, and none fuses away a tensor the caller gets as a graph output.
import { describe, expect, it } from "vitest";
import type { LNode } from "../../src/compiler/ir.ts";
import { CONV_SUM, ortFusions } from "../../src/estimate/ort-fusions.ts";
import { BIAS_GELU, FAST_GELU, FUSED_MATMUL, GELU, LAYER_NORM, SIMPLIFIED_LAYER_NORM } from "../../src/estimate/ort-fusions-transformer.ts";

const node = (op: string, inputs: string[], outputs: string[]): LNode => ({ op, name: outputs[0]!, inputs, outputs, attrs: {} });
const ops = (ns: LNode[]) => ns.map((n) => `${n.op}->${n.outputs.join(",")}`);

describe("ORT's fusions in the pattern replay", () => {
  it("folds an activation into its Conv, a residual Add into the Conv, and x * Sigmoid(x) into one node", () => {
    expect(ops(ortFusions([node("Conv", ["x", "w"], ["c"]), node("HardSwish", ["c"], ["y"])], ["y"]))).toEqual(["Conv->y"]);
    expect(ops(ortFusions([node("Conv", ["x", "w"], ["c"]), node("Add", ["c", "r"], ["y"])], ["y"]))).toEqual([`${CONV_SUM}->y`]);
    expect(ops(ortFusions([node("Sigmoid", ["x"], ["s"]), node("Mul", ["x", "s"], ["y"])], ["y"]))).toEqual(["ort:QuickGelu->y"]);
  });

  it("folds a Gemm's activation into it from ORT's own list for Gemms (FusedGemm), where the Gemm's output has no other reader", () => {
    const gemm = (act: string, outs = ["y"]) => ortFusions([node("Gemm", ["x", "w", "b"], ["g"]), node(act, ["g"], ["y"])], outs);
    expect(ops(gemm("Relu"))).toEqual(["Gemm->y"]);
    expect(ops(gemm("Softplus"))).toEqual(["Gemm->y"]);
    expect(ops(gemm("HardSwish"))).toEqual(["Gemm->g", "HardSwish->y"]); // a Conv's, not a Gemm's
    expect(ops(gemm("Relu", ["y", "g"]))).toEqual(["Gemm->g", "Relu->y"]);
  });

  it("folds a Clip into its Conv only where its bounds are constants (a float16 model's are Casts that run in every request)", () => {
    const clip = [node("Conv", ["x", "w"], ["c"]), node("Clip", ["c", "lo", "hi"], ["y"])];
    expect(ops(ortFusions(clip, ["y"], (n) => n === "lo" || n === "hi"))).toEqual(["Conv->y"]);
    expect(ops(ortFusions(clip, ["y"], (n) => n === "lo"))).toEqual(["Conv->c", "Clip->y"]);
    expect(ops(ortFusions([node("Conv", ["x", "w"], ["c"]), node("Clip", ["c"], ["y"])], ["y"]))).toEqual(["Conv->y"]);
  });

  it("folds x * Sigmoid(alpha * x) (CLIP's quick_gelu) into one QuickGelu of x where alpha is a scalar constant", () => {
    const quick = [node("Mul", ["x", "c_alpha"], ["ax"]), node("Sigmoid", ["ax"], ["s"]), node("Mul", ["x", "s"], ["y"])];
    for (const dims of [[], [1]]) {
      const fused = ortFusions(quick, ["y"], (n) => n.startsWith("c"), (n) => (n === "c_alpha" ? dims : undefined));
      expect(ops(fused)).toEqual(["ort:QuickGelu->y"]);
      expect(fused[0]!.inputs).toEqual(["x"]);
    }
    // a per-channel alpha is no scalar; the scaled input read elsewhere stays a tensor
    expect(ops(ortFusions(quick, ["y"], (n) => n.startsWith("c"), () => [8]))).toEqual(["Mul->ax", "Sigmoid->s", "Mul->y"]);
    expect(ops(ortFusions(quick, ["y", "ax"], (n) => n.startsWith("c"), () => []))).toEqual(["Mul->ax", "Sigmoid->s", "Mul->y"]);
  });

  it("fuses nothing whose intermediate tensor is a graph output", () => {
    expect(ops(ortFusions([node("Conv", ["x", "w"], ["c"]), node("HardSwish", ["c"], ["y"])], ["c", "y"]))).toEqual(["Conv->c", "HardSwish->y"]);
    expect(ops(ortFusions([node("Conv", ["x", "w"], ["c"]), node("Add", ["c", "r"], ["y"])], ["y", "c"]))).toEqual(["Conv->c", "Add->y"]);
    expect(ops(ortFusions([node("Sigmoid", ["x"], ["s"]), node("Mul", ["x", "s"], ["y"])], ["s", "y"]))).toEqual(["Sigmoid->s", "Mul->y"]);
  });

  // The chains as torch's legacy exporter writes them (bert, gpt2, convnext; names shortened).
  const isConst = (n: string) => n.startsWith("c");
  const erfGelu = (x: string, y: string) => [
    node("Div", [x, "c_sqrt2"], ["d"]), node("Erf", ["d"], ["e"]), node("Add", ["e", "c_one"], ["a"]),
    node("Mul", [x, "a"], ["m"]), node("Mul", ["m", "c_half"], [y]),
  ];
  const tanhGelu = [
    node("Mul", ["x", "c_half"], ["h"]), node("Pow", ["x", "c_three"], ["p"]), node("Mul", ["p", "c_k"], ["pk"]),
    node("Add", ["x", "pk"], ["u"]), node("Mul", ["u", "c_s"], ["us"]), node("Tanh", ["us"], ["t"]),
    node("Add", ["t", "c_one"], ["t1"]), node("Mul", ["h", "t1"], ["y"]),
  ];

  it("fuses transformers' Gelu chains (erf and tanh forms), a bias Add before a Gelu, and a MatMul's constant scale, as ORT does", () => {
    expect(ops(ortFusions(erfGelu("x", "y"), ["y"], isConst))).toEqual([`${GELU}->y`]);
    const biased = [node("MatMul", ["in", "cw"], ["mm"]), node("Add", ["c_bias", "mm"], ["x"]), ...erfGelu("x", "y")];
    const fused = ortFusions(biased, ["y"], isConst);
    expect(ops(fused)).toEqual(["MatMul->mm", `${BIAS_GELU}->y`]);
    expect(fused[1]!.inputs).toEqual(["mm", "c_bias"]);
    expect(ops(ortFusions(tanhGelu, ["y"], isConst))).toEqual([`${FAST_GELU}->y`]);
    expect(ortFusions(tanhGelu, ["y"], isConst)[0]!.inputs).toEqual(["x"]);
    expect(ops(ortFusions([node("MatMul", ["q", "k"], ["s"]), node("Div", ["s", "c_d"], ["z"]), node("Softmax", ["z"], ["y"])], ["y"], isConst)))
      .toEqual([`${FUSED_MATMUL}->z`, "Softmax->y"]);
  });

  it("reads a MatMul's input before a Transpose of its last two axes, and drops the Transpose where only such MatMuls read it", () => {
    const t = (x: string, y: string, perm: number[]) => ({ ...node("Transpose", [x], [y]), attrs: { perm } });
    const scores = [t("q", "qt", [0, 1, 3, 2]), node("MatMul", ["qt", "k"], ["s"]), node("Div", ["s", "c_d"], ["z"])];
    const fused = ortFusions(scores, ["z"], isConst);
    expect(ops(fused)).toEqual([`${FUSED_MATMUL}->z`]);
    expect(fused[0]!.inputs).toEqual(["q", "k"]);
    // read by something else too: the Transpose stays, the MatMul still reads q
    const shared = ortFusions([...scores, node("Relu", ["qt"], ["r"])], ["z", "r"], isConst);
    expect(ops(shared)).toEqual(["Transpose->qt", `${FUSED_MATMUL}->z`, "Relu->r"]);
    // a Transpose that moves a batch axis is no transposed operand
    expect(ops(ortFusions([t("q", "qt", [1, 0, 2, 3]), node("MatMul", ["qt", "k"], ["s"])], ["s"], isConst))).toEqual(["Transpose->qt", "MatMul->s"]);
  });

  it("folds a scalar scale of a MatMul input into the FusedMatMul (ORT's alpha), not a scale read elsewhere or of many elements", () => {
    const scaled = [node("Mul", ["q", "c_s"], ["qs"]), node("MatMul", ["qs", "k"], ["z"])];
    const scalar = (n: string) => n === "c_s";
    const fused = ortFusions(scaled, ["z"], isConst, (n) => (scalar(n) ? [] : undefined));
    expect(ops(fused)).toEqual([`${FUSED_MATMUL}->z`]);
    expect(fused[0]!.inputs).toEqual(["q", "k"]);
    expect(ops(ortFusions(scaled, ["z"], isConst, (n) => (scalar(n) ? [32] : undefined)))).toEqual(["Mul->qs", "MatMul->z"]);
    expect(ops(ortFusions([...scaled, node("Relu", ["qs"], ["r"])], ["z", "r"], isConst, () => []))).toEqual(["Mul->qs", "MatMul->z", "Relu->r"]);
    // a Div by the scale: the FusedMatMul reads the dividend
    const divided = ortFusions([node("Div", ["q", "c_s"], ["qs"]), node("MatMul", ["k", "qs"], ["z"])], ["z"], isConst, (n) => (scalar(n) ? [1] : undefined));
    expect(divided.map((n) => `${n.op}(${n.inputs.join(",")})`)).toEqual([`${FUSED_MATMUL}(k,q)`]);
  });

  it("leaves a chain whole where an intermediate is read elsewhere, or its operands are not constants", () => {
    expect(ops(ortFusions(erfGelu("x", "y"), ["y", "e"], isConst))).toHaveLength(5);
    expect(ops(ortFusions([...erfGelu("x", "y"), node("Relu", ["a"], ["r"])], ["y", "r"], isConst))).toHaveLength(6);
    expect(ops(ortFusions([node("MatMul", ["q", "k"], ["s"]), node("Div", ["s", "v"], ["z"])], ["z"], isConst))).toEqual(["MatMul->s", "Div->z"]);
    // Without knowing the constants (the default) nothing transformer-shaped is fused.
    expect(ops(ortFusions(erfGelu("x", "y"), ["y"]))).toHaveLength(5);
  });

  // LayerNorm as torch exports it before opset 17 and as I-BERT writes it by hand: x [N, S, 128].
  const withAttrs = (n: LNode, attrs: LNode["attrs"]): LNode => ({ ...n, attrs });
  const layerNorm = (axes: number[], opts: { dupSub?: boolean } = {}) => [
    withAttrs(node("ReduceMean", ["x"], ["m"]), { axes, keepdims: 1 }),
    node("Sub", ["x", "m"], ["d"]),
    ...(opts.dupSub ? [node("Sub", ["x", "m"], ["d2"])] : []),
    withAttrs(node("Pow", ["d"], ["p"]), { exponent: 2 }),
    withAttrs(node("ReduceMean", ["p"], ["v"]), { axes, keepdims: 1 }),
    node("Add", ["v", "c_eps"], ["ve"]), node("Sqrt", ["ve"], ["s"]),
    node("Div", [opts.dupSub ? "d2" : "d", "s"], ["n"]),
    node("Mul", ["n", "c_gamma"], ["g"]), node("Add", ["g", "c_beta"], ["y"]),
  ];
  const dims = (n: string) => (n === "c_gamma" || n === "c_beta" ? [128] : n === "c_eps" ? [] : undefined);
  const rank = (n: string) => (n === "x" ? 3 : undefined);

  it("fuses a LayerNorm written out (mean, difference, variance, root, quotient, scale, bias) into one LayerNormalization, as ORT does", () => {
    for (const axes of [[-1], [2]]) {
      const fused = ortFusions(layerNorm(axes), ["y"], isConst, dims, rank);
      expect(ops(fused)).toEqual([`${LAYER_NORM}->y`]);
      expect(fused[0]!.inputs).toEqual(["x", "c_gamma", "c_beta"]);
    }
    // older torch exports subtract the mean twice
    expect(ops(ortFusions(layerNorm([-1], { dupSub: true }), ["y"], isConst, dims, rank))).toEqual([`${LAYER_NORM}->y`]);
  });

  it("leaves a written-out LayerNorm whole over a leading axis, with a read intermediate, or a scale that is no 1-D constant", () => {
    expect(ops(ortFusions(layerNorm([1]), ["y"], isConst, dims, rank))).toHaveLength(9);
    expect(ops(ortFusions(layerNorm([2]), ["y"], isConst, dims))).toHaveLength(9); // a positive axis without the rank
    expect(ops(ortFusions(layerNorm([-1]), ["y", "n"], isConst, dims, rank))).toHaveLength(9);
    expect(ops(ortFusions(layerNorm([-1]), ["y"], isConst, (n) => (n === "c_gamma" ? [4, 128] : dims(n)), rank))).toHaveLength(9);
  });

  it("fuses x / Sqrt(mean(x^2) + eps) * scale into one SimplifiedLayerNormalization, not the Rsqrt form Llama exports", () => {
    const rms = [
      withAttrs(node("Pow", ["x"], ["p"]), { exponent: 2 }), withAttrs(node("ReduceMean", ["p"], ["v"]), { axes: [-1], keepdims: 1 }),
      node("Add", ["v", "c_eps"], ["ve"]), node("Sqrt", ["ve"], ["s"]), node("Div", ["x", "s"], ["n"]), node("Mul", ["n", "c_gamma"], ["y"]),
    ];
    expect(ops(ortFusions(rms, ["y"], isConst, dims, rank))).toEqual([`${SIMPLIFIED_LAYER_NORM}->y`]);
    const rsqrt = [...rms.slice(0, 4), node("Div", ["c_one", "s"], ["r"]), node("Mul", ["x", "r"], ["n"]), node("Mul", ["n", "c_gamma"], ["y"])];
    expect(ops(ortFusions(rsqrt, ["y"], isConst, dims, rank))).toHaveLength(7);
  });
});
