/**
 * ONNX ops the compiler rewrites into ops memlane-rt has (Lowered.expand): Einsum
 * (ops-einsum.ts), Tile (ops-layout.ts), InstanceNormalization (ops-conv.ts) and reductions of
 * a [k·batch, ...] tensor (ops-transformer.ts), and the batch merged by a Flatten into a BatchNorm. For Einsum,
 * each equation family models write (batched products in maxvit_t's
 * attention, projections by a weight on either side, ellipses, implicit outputs, labels summed
 * away, one-operand transposes and sums, opset 12's attribute axes) and each Tile form (tiled
 * axes, DeBERTa-v2's run-time repeats that follow the batch, the batch axis itself, a constant
 * one), InstanceNormalization over one and two spatial axes (wav2vec2, HuBERT), and
 * DepthToSpace / SpaceToDepth (PixelShuffle, ops-layout.ts) in each mode, OneHot of run-time
 * ids, and GlobalMaxPool as a ReduceMax (ops-conv.ts), built as
 * ONNX graphs, compiled, run through memlane-rt over real ZeroMQ at batches 1 and
 * 3, and compared with ONNX Runtime on the same graph.
 */
import { type GraphCase, describeGraphCases } from "../fixtures/graph-vs-ort.ts";
import { type NodeSpec, init, node } from "../unit/compiler-onnx-builder.ts";

const i64 = (name: string, data: number[]) => init(name, [data.length], data, "int64");

const einsum = (eq: string, ins: string[]): NodeSpec => node("Einsum", ins, ["y"], { equation: eq });

const CASES: Record<string, GraphCase> = {
  "maxvit q·kᵀ": { inputs: [["q", ["N", 2, 3, 4, 5]], ["k", ["N", 2, 3, 6, 5]]], nodes: [einsum("bghid,bghjd->bghij", ["q", "k"])], ops: { MatMul: 1, Einsum: 0 } },
  "maxvit p·v": { inputs: [["p", ["N", 2, 3, 4, 6]], ["v", ["N", 2, 3, 6, 5]]], nodes: [einsum("B G H I J, B G H J D -> B G H I D", ["p", "v"])], ops: { MatMul: 1, Transpose: 0 } },
  "batched matmul": { inputs: [["a", ["N", 4, 5]], ["b", ["N", 5, 3]]], nodes: [einsum("bij,bjk->bik", ["a", "b"])] },
  "contract the last axes of both": { inputs: [["a", ["N", 4, 5]], ["b", ["N", 3, 5]]], nodes: [einsum("bik,bjk->bij", ["a", "b"])] },
  "projection by a weight": { inputs: [["x", ["N", 4, 6]]], inits: [init("w", [6, 5])], nodes: [einsum("bsh,hd->bsd", ["x", "w"])], ops: { MatMul: 1, Reshape: 0, Transpose: 0 } },
  "weight on the left, output permuted": { inputs: [["x", ["N", 4, 6]]], inits: [init("w", [5, 6])], nodes: [einsum("dh,bsh->bds", ["w", "x"])] },
  "ellipsis by a weight": { inputs: [["x", ["N", 3, 4, 6]]], inits: [init("w", [6, 5])], nodes: [einsum("...ij,jk->...ik", ["x", "w"])] },
  "ellipsis broadcast against a weight": { inputs: [["x", ["N", 2, 3, 4]]], inits: [init("w", [1, 2, 4, 5])], nodes: [einsum("...ij,...jk->...ik", ["x", "w"])] },
  "two contracted labels by a weight": { inputs: [["x", ["N", 3, 4, 5]]], inits: [init("w", [4, 5, 6])], nodes: [einsum("bijk,jkl->bil", ["x", "w"])] },
  "a weight sharing a label with the activation": { inputs: [["x", ["N", 3, 4, 5]]], inits: [init("w", [3, 5, 2])], nodes: [einsum("bhid,hdj->bhij", ["x", "w"])] },
  "outer product": { inputs: [["a", ["N", 4]], ["b", ["N", 3]]], nodes: [einsum("bi,bj->bij", ["a", "b"])] },
  "matrix by vector": { inputs: [["a", ["N", 4, 5]], ["b", ["N", 5]]], nodes: [einsum("bij,bj->bi", ["a", "b"])] },
  "vector by matrix": { inputs: [["a", ["N", 4]], ["b", ["N", 4, 3]]], nodes: [einsum("bj,bjk->bk", ["a", "b"])] },
  "a label summed away before the product": { inputs: [["a", ["N", 3, 4]], ["b", ["N", 4, 2]]], nodes: [einsum("bij,bjk->bk", ["a", "b"])], ops: { ReduceSum: 1 } },
  "opset 12: axes as an attribute": { opset: 12, inputs: [["a", ["N", 3, 4]], ["b", ["N", 4, 2]]], nodes: [einsum("bij,bjk->bk", ["a", "b"])], ops: { ReduceSum: 1 } },
  "implicit output": { inputs: [["x", ["N", 4, 2]]], inits: [init("w", [3, 4])], nodes: [einsum("ij,bjk", ["w", "x"])] },
  "one operand: transpose": { inputs: [["x", ["N", 3, 4]]], nodes: [einsum("bij->bji", ["x"])], ops: { Transpose: 1 } },
  "one operand: sum": { inputs: [["x", ["N", 3, 4]]], nodes: [einsum("bij->bj", ["x"])], ops: { ReduceSum: 1 } },
  "Tile of inner axes": { inputs: [["x", ["N", 3, 4]]], inits: [i64("r", [1, 2, 3])], nodes: [node("Tile", ["x", "r"], ["y"])], ops: { Expand: 1, Tile: 0 } },
  "Tile of a 1-axis is an Expand": { inputs: [["x", ["N", 1, 4]]], inits: [i64("r", [1, 3, 1])], nodes: [node("Tile", ["x", "r"], ["y"])], ops: { Expand: 1, Reshape: 0 } },
  "Tile by repeats that follow the batch (DeBERTa-v2)": {
    inputs: [["x", ["N", 2, 4, 4]]],
    inits: [init("rel", [1, 4, 4]), i64("zero", [0]), i64("one", [1]), i64("two", [2]), i64("ones", [1, 1]), i64("shape4", [-1, 2, 4, 4])],
    nodes: [
      node("Shape", ["x"], ["s"]),
      node("Slice", ["s", "zero", "one"], ["b"]),
      node("Mul", ["b", "two"], ["b2"]),
      node("Concat", ["b2", "ones"], ["reps"], { axis: 0 }),
      node("Tile", ["rel", "reps"], ["t"]),
      node("Reshape", ["t", "shape4"], ["t4"]),
      node("Add", ["x", "t4"], ["y"]),
    ],
    ops: { Expand: 1, Tile: 0 },
  },
  "Tile of the batch axis": {
    inputs: [["x", ["N", 3]]], inits: [i64("r", [2, 1]), i64("s", [2, -1, 3])],
    nodes: [node("Tile", ["x", "r"], ["t"]), node("Reshape", ["t", "s"], ["t3"]), node("Transpose", ["t3"], ["y"], { perm: [1, 0, 2] })],
  },
  // PixelShuffle (ESPCN, Swin2SR's upsampler): DepthToSpace in both of ONNX's modes, and its inverse.
  "DepthToSpace, DCR": { inputs: [["x", ["N", 12, 3, 5]]], nodes: [node("DepthToSpace", ["x"], ["y"], { blocksize: 2 })], ops: { Transpose: 1, DepthToSpace: 0 } },
  "DepthToSpace, CRD (torch's PixelShuffle)": { inputs: [["x", ["N", 18, 2, 4]]], nodes: [node("DepthToSpace", ["x"], ["y"], { blocksize: 3, mode: "CRD" })], ops: { Transpose: 1 } },
  "SpaceToDepth": { inputs: [["x", ["N", 3, 4, 6]]], nodes: [node("SpaceToDepth", ["x"], ["y"], { blocksize: 2 })], ops: { Transpose: 1, SpaceToDepth: 0 } },
  // XLNet's segment ids one-hot: run-time int64 ids (here truncated from floats, some negative,
  // which ONNX counts from the end), on the last axis and on axis 1.
  "OneHot of run-time ids, last axis": {
    inputs: [["x", ["N", 5]]], inits: [init("k", [1], [2.9]), i64("depth", [4]), init("onoff", [2], [0, 1])],
    nodes: [node("Mul", ["x", "k"], ["m"]), node("Cast", ["m"], ["ids"], { to: 7 }), node("OneHot", ["ids", "depth", "onoff"], ["y"])],
    ops: { Equal: 1, Where: 1, OneHot: 0 },
  },
  "OneHot on axis 1, values -1 and 3": {
    inputs: [["x", ["N", 2, 3]]], inits: [init("k", [1], [2.9]), i64("depth", [4]), init("onoff", [2], [-1, 3])],
    nodes: [node("Mul", ["x", "k"], ["m"]), node("Cast", ["m"], ["ids"], { to: 7 }), node("OneHot", ["ids", "depth", "onoff"], ["y"], { axis: 1 })],
  },
  // int64 moves as two float words (XLNet transposes its ids time-major): batch first, and the batch moved.
  "Transpose of int64, batch first": {
    inputs: [["x", ["N", 3, 5]]], inits: [init("k", [1], [1000.5])],
    nodes: [node("Mul", ["x", "k"], ["m"]), node("Cast", ["m"], ["i"], { to: 7 }), node("Transpose", ["i"], ["t"], { perm: [0, 2, 1] }), node("Cast", ["t"], ["y"], { to: 1 })],
  },
  "Transpose of int64, the batch moved": {
    inputs: [["x", ["N", 3, 5]]], inits: [init("k", [1], [1000.5])],
    nodes: [
      node("Mul", ["x", "k"], ["m"]), node("Cast", ["m"], ["i"], { to: 7 }), node("Transpose", ["i"], ["t"], { perm: [1, 0, 2] }),
      node("Cast", ["t"], ["f"], { to: 1 }), node("Transpose", ["f"], ["y"], { perm: [1, 0, 2] }),
    ],
  },
  "Tile of a constant folds": {
    inputs: [["x", ["N", 4, 3]]], inits: [init("w", [2, 3]), i64("r", [2, 1])],
    nodes: [node("Tile", ["w", "r"], ["t"]), node("Add", ["x", "t"], ["y"])], ops: { Tile: 0, Expand: 0 },
  },
  "a reduction over [k·batch, ...] (Swin-V2's cosine attention)": {
    inputs: [["x", ["N", 2, 3, 4]]], inits: [i64("merge", [-1, 3, 4]), i64("axes", [-1]), init("eps", [], [1e-3]), i64("back", [-1, 2, 3, 1])],
    nodes: [
      node("Reshape", ["x", "merge"], ["m"]),
      node("ReduceL2", ["m", "axes"], ["n"], { keepdims: 1 }),
      node("Clip", ["n", "eps"], ["c"]),
      node("Reshape", ["c", "back"], ["y"]),
    ],
    opset: 18, ops: { ReduceSum: 1, Sqrt: 1, Clip: 1 },
  },
  "a mean over [k·batch, ...] by attribute, keepdims 0": {
    inputs: [["x", ["N", 2, 3, 4]]], inits: [i64("merge", [-1, 3, 4]), i64("back", [-1, 2, 3])],
    nodes: [node("Reshape", ["x", "merge"], ["m"]), node("ReduceMean", ["m"], ["r"], { axes: [2], keepdims: 0 }), node("Reshape", ["r", "back"], ["y"])],
  },
  "Flatten merging the batch, then BatchNorm over [k·batch, C] (LeViT)": {
    inputs: [["x", ["N", 5, 6]]], inits: [init("g", [6]), init("b", [6]), init("mu", [6]), init("var", [6], [0.5, 1, 1.5, 2, 2.5, 3]), i64("back", [-1, 5, 6])],
    nodes: [
      node("Flatten", ["x"], ["f"], { axis: 2 }),
      node("BatchNormalization", ["f", "g", "b", "mu", "var"], ["bn"]),
      node("Reshape", ["bn", "back"], ["y"]),
    ],
    ops: { Flatten: 0, Mul: 1, Add: 1 },
  },
  // torch's Squeeze of a dim whose size it did not know at export: If(size == 1, Squeeze,
  // Identity); the shapes decide it at compile time, and the plan holds the branch it takes.
  "If on a dim the shapes decide, inlined (then branch)": {
    inputs: [["x", ["N", 1, 6]]], inits: [init("one", [], [1], "int64"), i64("axis", [1]), i64("back", [-1, 6])],
    nodes: [
      node("Relu", ["x"], ["r"]), node("Shape", ["r"], ["s"]), node("Gather", ["s", "one"], ["d"], { axis: 0 }), node("Equal", ["d", "one"], ["c"]),
      node("If", ["c"], ["q"], {
        then_branch: { graph: { nodes: [node("Squeeze", ["r", "axis"], ["sq"])], outputs: ["sq"] } },
        else_branch: { graph: { nodes: [node("Identity", ["r"], ["id"])], outputs: ["id"] } },
      }),
      node("Reshape", ["q", "back"], ["y"]),
    ],
    ops: { If: 0 },
  },
  "If on a dim the shapes decide, inlined (else branch, its own initializer)": {
    inputs: [["x", ["N", 2, 6]]], inits: [init("one", [], [1], "int64"), i64("back", [-1, 12])],
    nodes: [
      node("Shape", ["x"], ["s"]), node("Gather", ["s", "one"], ["d"], { axis: 0 }), node("Equal", ["d", "one"], ["c"]),
      node("If", ["c"], ["q"], {
        then_branch: { graph: { nodes: [node("Identity", ["x"], ["id"])], outputs: ["id"] } },
        else_branch: { graph: { nodes: [node("Mul", ["x", "two"], ["m"])], outputs: ["m"], inits: [init("two", [1], [2])] } },
      }),
      node("Reshape", ["q", "back"], ["y"]),
    ],
    ops: { If: 0, Mul: 1 },
  },
  "GlobalMaxPool over two spatial axes (AdaptiveMaxPool2d(1))": {
    inputs: [["x", ["N", 3, 5, 6]]], nodes: [node("GlobalMaxPool", ["x"], ["y"])], ops: { ReduceMax: 1, GlobalMaxPool: 0 },
  },
  "GlobalMaxPool over one spatial axis": {
    inputs: [["x", ["N", 4, 9]]], nodes: [node("GlobalMaxPool", ["x"], ["y"])], ops: { ReduceMax: 1 },
  },
  "InstanceNormalization over one spatial axis": {
    inputs: [["x", ["N", 3, 37]]], inits: [init("s", [3]), init("b", [3])],
    nodes: [node("InstanceNormalization", ["x", "s", "b"], ["y"], { epsilon: { f: 1e-3 } })], ops: { LayerNormalization: 1, InstanceNormalization: 0 },
  },
  "InstanceNormalization over two spatial axes": {
    inputs: [["x", ["N", 2, 5, 6]]], inits: [init("s", [2]), init("b", [2])],
    nodes: [node("InstanceNormalization", ["x", "s", "b"], ["y"])], ops: { LayerNormalization: 1, Mul: 1, Add: 1 },
  },
};

describeGraphCases("native-rewritten-ops", "Einsum, Tile and InstanceNormalization on memlane-rt match ONNX Runtime", CASES);
