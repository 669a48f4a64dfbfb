// A float16 model's graph as ONNX Runtime's CPU runs it (src/estimate/ort-fp16.ts), built in
// memory: which values ORT casts in every request, where it numbers those Casts, and what it
// leaves alone. Checked against ORT's own block in test/integration/ort-half.test.ts.
import { describe, expect, it } from "vitest";
import type { ConstTensor, Graph, Node } from "../../src/compiler/ir.ts";
import { asOrtRunsHalfPrecision, isHalfPrecision, isOrtInsertedCast } from "../../src/estimate/ort-fp16.ts";

const half = (dims: number[], values: number[]): ConstTensor => ({ isFloat: true, dims, data: Float32Array.from(values), fileType: 10 });
const node = (opType: string, inputs: string[], outputs: string[], attrs: Record<string, number | ConstTensor> = {}): Node =>
  ({ opType, name: outputs[0]!, inputs, outputs, attrs: new Map(Object.entries(attrs)) });

/** x -> Conv(w, b) -> Clip(0, 6) -> Conv(w2, b') -> Clip(0, 6) -> y, float16 throughout; b' an Identity of b (torch's copy of an equal initializer). */
function halfCnn(): Graph {
  return {
    file: "half.onnx", opset: 17,
    inputs: [{ name: "x", dims: ["N", 4, 8, 8], elemType: 10 }],
    outputs: ["y"], outputElemTypes: new Map([["y", 10]]),
    consts: new Map([["w", half([4, 4, 1, 1], new Array(16).fill(0.5))], ["w2", half([4, 4, 1, 1], new Array(16).fill(0.25))], ["b", half([4], [0, 0, 0, 0])]]),
    nodes: [
      node("Identity", ["b"], ["b2"]),
      node("Conv", ["x", "w", "b"], ["c1"]),
      node("Constant", [], ["lo1"], { value: half([], [0]) }),
      node("Constant", [], ["hi1"], { value: half([], [6]) }),
      node("Clip", ["c1", "lo1", "hi1"], ["r1"]),
      node("Conv", ["r1", "w2", "b2"], ["c2"]),
      node("Constant", [], ["lo2"], { value: half([], [0]) }),
      node("Constant", [], ["hi2"], { value: half([], [6]) }),
      node("Clip", ["c2", "lo2", "hi2"], ["y"]),
    ],
  };
}

describe("a float16 model as ORT's CPU runs it", () => {
  it("casts its input, the initializers several nodes read (equal small ones shared) and its output; the rest runs float32", () => {
    const g = asOrtRunsHalfPrecision(halfCnn());
    const ops = g.nodes.map((n) => `${n.opType}(${n.inputs.join(",")})->${n.outputs.join(",")}`);
    const C = "InsertedPrecisionFreeCast_";
    expect(ops).toEqual([
      // Each float32 value keeps its float16 name behind ORT's prefix, as in ORT's saved graph.
      `Conv(${C}x,w,${C}b)->${C}c1`,
      `Clip(${C}c1,${C}lo1,${C}hi1)->${C}r1`,
      // The Identity is gone: its reader reads b, so b has two readers and is cast.
      `Conv(${C}r1,w2,${C}b)->${C}c2`,
      `Clip(${C}c2,${C}lo2,${C}hi2)->${C}y`,
      // Numbered after the file's nodes, in the order ORT adds them; the bounds of the second
      // Clip are the first's values (ORT's ConstantSharing makes them one: ort-cse.ts merges these Casts).
      `Cast(x)->${C}x`, `Cast(b)->${C}b`, `Cast(lo1)->${C}lo1`, `Cast(hi1)->${C}hi1`, `Cast(lo2)->${C}lo2`, `Cast(hi2)->${C}hi2`,
      `Cast(${C}y)->y`,
    ]);
    // w and w2, one reader each, are made float32 in place: constants, no Cast.
    expect(g.consts.has("w")).toBe(true);
    expect(g.nodes.filter(isOrtInsertedCast).map((n) => n.attrs.get("to"))).toEqual([1, 1, 1, 1, 1, 1, 10]);
  });

  it("makes the file's own Casts to float16 float32, and leaves a float32 model as it is", () => {
    const g: Graph = {
      file: "f.onnx", opset: 17, inputs: [{ name: "x", dims: ["N", 4], elemType: 1 }], outputs: ["z"], consts: new Map(),
      nodes: [node("Cast", ["x"], ["h"], { to: 10 }), node("Relu", ["h"], ["z"])],
    };
    expect(isHalfPrecision(g)).toBe(true);
    expect(asOrtRunsHalfPrecision(g).nodes[0]!.attrs.get("to")).toBe(1);
    const float: Graph = { ...g, nodes: [node("Relu", ["x"], ["z"])] };
    expect(isHalfPrecision(float)).toBe(false);
    expect(asOrtRunsHalfPrecision(float)).toBe(float);
  });
});

describe("HardSwish in a float16 model", () => {
  // x -> Conv(w, b) -> HardSwish -> y: ORT folds it into a conv whose bias is a constant (a conv
  // it blocks), and runs its function body, x * HardSigmoid(x), after one whose bias is a Cast
  // (mobilenet_v3_large in float16: 21 HardSigmoids and 29 Muls).
  const convSwish = (biasReaders: number): Graph => ({
    file: "swish.onnx", opset: 17,
    inputs: [{ name: "x", dims: ["N", 4, 8, 8], elemType: 10 }], outputs: ["y", ...(biasReaders > 1 ? ["z"] : [])],
    consts: new Map([["w", half([4, 4, 1, 1], new Array(16).fill(0.5))], ["b", half([4], [0, 0, 0, 0])]]),
    nodes: [
      node("Conv", ["x", "w", "b"], ["c"]), node("HardSwish", ["c"], ["y"]),
      ...(biasReaders > 1 ? [node("Add", ["c", "b"], ["z"])] : []),
    ],
  });
  const ops = (g: Graph) => g.nodes.map((n) => n.opType).filter((op) => op !== "Cast");
  it("stays one node after a conv of a constant bias, and becomes HardSigmoid and Mul after a conv of a cast one", () => {
    expect(ops(asOrtRunsHalfPrecision(convSwish(1)))).toEqual(["Conv", "HardSwish"]);
    expect(ops(asOrtRunsHalfPrecision(convSwish(2)))).toEqual(["Conv", "HardSigmoid", "Mul", "Add"]);
  });
});

describe("the float16 kernels ORT's CPU has (ops that move values, LayerNormalization)", () => {
  // x -> MatMul -> Reshape -> [Transpose] -> MatMul -> y, the weights float16 of one reader each.
  const chain = (transpose: boolean): Graph => ({
    file: "chain.onnx", opset: 17,
    inputs: [{ name: "x", dims: ["N", 4, 8], elemType: 10 }], outputs: ["y"], outputElemTypes: new Map([["y", 10]]),
    consts: new Map([["w1", half([8, 8], new Array(64).fill(0.5))], ["w2", half([8, 8], new Array(64).fill(0.25))], ["s", { isFloat: false, dims: [3], data: Float64Array.from([0, 4, 8]) }]]),
    nodes: [
      node("MatMul", ["x", "w1"], ["a"]), node("Reshape", ["a", "s"], ["r"]),
      ...(transpose ? [node("Transpose", ["r"], ["t"], {})] : []),
      node("MatMul", [transpose ? "t" : "r", "w2"], ["y"]),
    ],
  });
  const C = "InsertedPrecisionFreeCast_";
  const ops = (g: Graph) => g.nodes.map((n) => `${n.opType}(${n.inputs.join(",")})->${n.outputs.join(",")}`);
  it("keeps two of them in a row on float16 between Casts, and runs a lone one between float32 nodes in float32 (IsIsolatedFp16NodeOnCpu)", () => {
    expect(ops(asOrtRunsHalfPrecision(chain(true)))).toEqual([
      `MatMul(${C}x,w1)->${C}a`, "Reshape(a,s)->r", "Transpose(r)->t", `MatMul(${C}t,w2)->${C}y`,
      `Cast(x)->${C}x`, `Cast(${C}a)->a`, `Cast(t)->${C}t`, `Cast(${C}y)->y`,
    ]);
    expect(ops(asOrtRunsHalfPrecision(chain(false)))).toEqual([
      `MatMul(${C}x,w1)->${C}a`, `Reshape(${C}a,s)->${C}r`, `MatMul(${C}r,w2)->${C}y`, `Cast(x)->${C}x`, `Cast(${C}y)->y`,
    ]);
  });
});

describe("a float16 initializer a float16 kernel reads", () => {
  it("stays float16 (ViT's class token an Expand broadcasts before a Concat with float16 patches)", () => {
    const g: Graph = {
      file: "vit.onnx", opset: 17,
      inputs: [{ name: "p", dims: ["N", 4, 8], elemType: 10 }], outputs: ["y"], outputElemTypes: new Map([["y", 10]]),
      consts: new Map([["cls", half([1, 1, 8], new Array(8).fill(0.1))], ["s", { isFloat: false, dims: [3], data: Float64Array.from([1, 1, 8]) }]]),
      nodes: [node("Expand", ["cls", "s"], ["c"]), node("Concat", ["c", "p"], ["t"], { axis: 1 }), node("Relu", ["t"], ["y"])],
    };
    const out = asOrtRunsHalfPrecision(g);
    expect(out.consts.get("cls")!.dtype).toBe("float16");
    expect(out.consts.get("s")!.dtype).toBeUndefined();
  });
});
