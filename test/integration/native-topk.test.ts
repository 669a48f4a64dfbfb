/**
 * TopK on memlane-rt (ops-topk.ts, cpu/topk.cc) against ONNX Runtime: a classifier's top-5 on
 * the last axis, the smallest, a middle axis, ties (the lower index first), an int64 input, and
 * opset 9's k attribute. Values and indices both checked: the graph's output joins the values
 * and the indices cast to float.
 */
import { type GraphCase, describeGraphCases } from "../fixtures/graph-vs-ort.ts";
import { type Attr, type Init, type NodeSpec, init, node } from "../unit/compiler-onnx-builder.ts";

/**
 * x through `pre` into "p", TopK(p) along `axis`, and y = Concat(values, float(indices)) there.
 * `k`: the K input (opset 10 on), or the attribute at opset 9.
 */
function topk(dims: (number | string)[], k: number, attrs: Record<string, Attr>, { pre = [] as NodeSpec[], inits = [] as Init[], opset = 17, int64 = false } = {}): GraphCase {
  const p = pre.length ? "p" : "x";
  const axis = typeof attrs["axis"] === "number" ? attrs["axis"] : -1;
  const nodes: NodeSpec[] = [...pre];
  let src = p;
  if (int64) {
    nodes.push(node("Cast", [p], ["pi"], { to: 7 }));
    src = "pi";
  }
  nodes.push(opset >= 10 ? node("TopK", [src, "k"], ["v", "i"], attrs) : node("TopK", [src], ["v", "i"], { ...attrs, k }));
  nodes.push(node("Cast", ["i"], ["fi"], { to: 1 }));
  const values = int64 ? "fv" : "v";
  if (int64) nodes.push(node("Cast", ["v"], ["fv"], { to: 1 }));
  nodes.push(node("Concat", [values, "fi"], ["y"], { axis }));
  return { inputs: [["x", dims]], opset, nodes, ops: { TopK: 1 }, inits: [...inits, ...(opset >= 10 ? [init("k", [1], [k], "int64")] : [])] };
}

/** x scaled by 3 and floored through an int64 Cast: many equal values in every row. */
const TIES = { pre: [node("Mul", ["x", "three"], ["m"]), node("Cast", ["m"], ["mi"], { to: 7 }), node("Cast", ["mi"], ["p"], { to: 1 })], inits: [init("three", [1], [3])] };

const CASES: Record<string, GraphCase> = {
  "a classifier's top-5 (last axis)": topk(["N", 20], 5, {}),
  "the 3 smallest": topk(["N", 12], 3, { largest: 0 }),
  "a middle axis": topk(["N", 7, 4], 2, { axis: 1 }),
  "ties: the lower index first": topk(["N", 16], 6, {}, TIES),
  "ties, the smallest": topk(["N", 16], 6, { largest: 0 }, TIES),
  "int64 values": topk(["N", 10], 4, {}, { ...TIES, int64: true }),
  "opset 9: k as an attribute": topk(["N", 9], 2, {}, { opset: 9 }),
  "k = the whole axis": topk(["N", 3, 5], 5, { axis: 2 }),
};

describeGraphCases("native-topk", "TopK on memlane-rt matches ONNX Runtime", CASES, 2);
