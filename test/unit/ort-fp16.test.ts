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
      `Conv(${C}x,w,${C}b)->c1`,
      `Clip(c1,${C}lo1,${C}hi1)->r1`,
      // The Identity is gone: its reader reads b, so b has two readers and is cast.
      `Conv(r1,w2,${C}b)->c2`,
      `Clip(c2,${C}lo2,${C}hi2)->${C}y`,
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
