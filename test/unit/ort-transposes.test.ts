// ORT's transpose optimizer as the memory-pattern replay models it (src/estimate/ort-transposes.ts):
// which Transposes move, cancel, are absorbed by a ReorderInput, or stay where they are.
import { describe, expect, it } from "vitest";
import type { LNode } from "../../src/compiler/ir.ts";
import { MADE_TRANSPOSE, ortPushTransposes, ortShapesBeforeTransposes } from "../../src/estimate/ort-transposes.ts";

const node = (op: string, inputs: string[], output: string, attrs: LNode["attrs"] = {}): LNode => ({ op, name: output, inputs, outputs: [output], attrs });
const toNchw = (x: string, y: string) => node("Transpose", [x], y, { perm: [0, 3, 1, 2] });
const toNhwc = (x: string, y: string) => node("Transpose", [x], y, { perm: [0, 2, 3, 1] });
const isConst = (n: string) => n.startsWith("w");
const ops = (ns: readonly LNode[]) => ns.map((n) => `${n.op}(${n.inputs.join(",")})`);

describe("ORT's transposes, moved for the memory pattern", () => {
  it("moves a block's closing Transpose through the layer scale and a residual transposed alike, and cancels it at the next LayerNorm's", () => {
    // stem LN (channels-last) -> to NCHW = r; block: mlp(r') -> to NCHW -> * scale -> + r -> to NHWC -> LN
    const nodes = [
      toNchw("ln0", "r"),
      node("ort:ReorderInput", ["r"], "r#in"),
      node("Relu", ["r#in"], "mlp"),
      toNchw("mlp", "t"),
      node("Mul", ["wscale", "t"], "m"),
      node("Add", ["m", "r"], "a"),
      toNhwc("a", "a_nhwc"),
      node("LayerNormalization", ["a_nhwc", "wg", "wb"], "y"),
    ];
    const r = ortPushTransposes(nodes, ["y"], isConst);
    expect(ops(r.nodes)).toEqual([
      "ort:ReorderInput(ln0)", // absorbed: it reads channels-last itself
      "Relu(r#in)",
      "Mul(wscale,mlp)",
      "Add(m#before-transpose,ln0)",
      "LayerNormalization(a#before-transpose,wg,wb)", // the two Transposes cancelled
    ]);
    expect(r.transposed.get("a#before-transpose")).toEqual({ of: "a", perm: [0, 3, 1, 2] });
  });

  it("stops at an Add whose other input is plain, materializing the Transpose after the ops it moved past", () => {
    const nodes = [
      node("Relu", ["x"], "mlp"),
      toNchw("mlp", "t"),
      node("Mul", ["wscale", "t"], "m"),
      node("Add", ["m", "plain"], "a"),
      toNhwc("a", "a_nhwc"),
      node("LayerNormalization", ["a_nhwc"], "y"),
    ];
    expect(ops(ortPushTransposes(nodes, ["y"], isConst).nodes)).toEqual([
      "Relu(x)", "Mul(wscale,mlp)", "Transpose(m#before-transpose)", "Add(m,plain)", "Transpose(a)", "LayerNormalization(a_nhwc)",
    ]);
  });

  it("leaves a Transpose in place where no other Transpose follows its elementwise readers (the last stage)", () => {
    const nodes = [
      node("Relu", ["x"], "mlp"),
      toNchw("mlp", "t"),
      node("Relu", ["q"], "other"), // runs between the Transpose and its reader: the Transpose stays before it
      node("Mul", ["wscale", "t"], "m"),
      node("Add", ["m", "other"], "a"),
      node("GlobalAveragePool", ["a"], "y"),
    ];
    const r = ortPushTransposes(nodes, ["y"], isConst);
    expect(ops(r.nodes)).toEqual(["Relu(x)", "Transpose(mlp)", "Relu(q)", "Mul(wscale,t)", "Add(m,other)", "GlobalAveragePool(a)"]);
    expect(r.transposed.size).toBe(0);
  });

  it("changes nothing in a graph without 4-D layout transposes to move (attention's head transposes feed MatMuls)", () => {
    const nodes = [
      node("Transpose", ["q"], "qt", { perm: [0, 2, 1, 3] }),
      node("Transpose", ["k"], "kt", { perm: [0, 2, 3, 1] }),
      node("MatMul", ["qt", "kt"], "s"),
      node("Softmax", ["s"], "y"),
    ];
    expect(ortPushTransposes(nodes, ["y"], isConst).nodes).toEqual(nodes);
  });

  it("moves a permute of a fused q, k, v projection after each Gather of one index, less the axis it takes", () => {
    const gather = (i: string, out: string) => node("Gather", ["t", i], out, { axis: 0 });
    const nodes = [
      node("Transpose", ["qkv5"], "t", { perm: [2, 0, 3, 1, 4] }),
      gather("i0", "q"), gather("i1", "k"), gather("i2", "v"),
      node("MatMul", ["q", "k"], "s"),
      node("MatMul", ["s", "v"], "y"),
    ];
    const facts = { constDims: (n: string) => (n.startsWith("i") ? [] : undefined) };
    const r = ortPushTransposes(nodes, ["y"], isConst, [], facts);
    // Each Gather reads the projection itself, along the axis the permute had put first.
    expect(r.nodes.filter((n) => n.op === "Gather").map((n) => [n.inputs[0], n.attrs.axis])).toEqual([["qkv5", 2], ["qkv5", 2], ["qkv5", 2]]);
    // A Transpose ORT makes follows each, [batch, tokens, heads, size] to [batch, heads, tokens, size].
    const made = r.nodes.filter((n) => n.name.endsWith(MADE_TRANSPOSE));
    expect(made.map((n) => [n.outputs[0], n.attrs.perm])).toEqual([["q", [0, 2, 1, 3]], ["k", [0, 2, 1, 3]], ["v", [0, 2, 1, 3]]]);
    expect(r.transposed.get("q#before-transpose")).toEqual({ of: "q", perm: [0, 2, 1, 3] });
    // Each moved Gather stands for the file's (ORT keeps its number); a placed Transpose for none.
    expect(r.nodes.filter((n) => n.op === "Gather").map((n) => r.origin.get(n))).toEqual([nodes[1], nodes[2], nodes[3]]);
    expect(made.map((n) => r.origin.get(n))).toEqual([undefined, undefined, undefined]);
    // A reader that is no such Gather (or an index that is no scalar) keeps the permute where it is.
    expect(ops(ortPushTransposes([...nodes, node("Relu", ["t"], "r")], ["y", "r"], isConst, [], facts).nodes)).toEqual(ops([...nodes, node("Relu", ["t"], "r")]));
    expect(ops(ortPushTransposes(nodes, ["y"], isConst, [], { constDims: () => [1] }).nodes)).toEqual(ops(nodes));
  });

  it("moves a Transpose through a Softmax over the axis it maps to, and cancels it with the next (talking heads)", () => {
    const nodes = [
      node("MatMul", ["s_nhwc", "wl"], "l"),
      toNchw("l", "t"),
      node("Softmax", ["t"], "p", { axis: 3 }),
      toNhwc("p", "p_nhwc"),
      node("MatMul", ["p_nhwc", "ww"], "y"),
    ];
    const r = ortPushTransposes(nodes, ["y"], isConst, [], { opset: 13 });
    expect(ops(r.nodes)).toEqual(["MatMul(s_nhwc,wl)", "Softmax(l)", "MatMul(p#before-transpose,ww)"]);
    // Axis 3 of the channels-first value is axis 2 of the channels-last one it reads.
    expect(r.nodes[1]!.attrs.axis).toBe(2);
    expect(r.transposed.get("p#before-transpose")).toEqual({ of: "p", perm: [0, 3, 1, 2] });
    // Before opset 13 the Softmax flattens its axis and those after it: the Transposes stay.
    expect(ops(ortPushTransposes(nodes, ["y"], isConst, [], { opset: 12 }).nodes)).toEqual(ops(nodes));
  });
});

describe("ORT's transpose optimizer on a Shape", () => {
  it("makes Shape(Transpose(x)) a Gather of Shape(x) by the permutation: two new nodes, x read instead", () => {
    const nodes = [node("Transpose", ["x"], "t", { perm: [0, 2, 1] }), node("Shape", ["t"], "s"), node("Gather", ["s", "w0"], "b")];
    const r = ortShapesBeforeTransposes(nodes);
    expect(ops(r.nodes)).toEqual(["Transpose(x)", "Shape(x)", "Gather(s#before-transpose)", "Gather(s,w0)"]);
    expect(r.created.map((n) => n.outputs[0])).toEqual(["s#before-transpose", "s"]);
    expect([...r.newShapes]).toEqual([["s#before-transpose", 3]]);
    // a Shape of anything else, or one taking a slice of the dims, stays
    const plain = [node("Relu", ["x"], "t"), node("Shape", ["t"], "s")];
    expect(ortShapesBeforeTransposes(plain).created).toEqual([]);
    expect(ortShapesBeforeTransposes([nodes[0]!, node("Shape", ["t"], "s", { start: 1 })]).created).toEqual([]);
  });
});
