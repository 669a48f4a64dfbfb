import { describe, expect, it } from "vitest";
import { foldNode } from "../../src/compiler/fold.ts";
import { type ConstTensor, type Node, type NodeAttr, SYM_BATCH, symDim } from "../../src/compiler/ir.ts";

const n = (opType: string, attrs: Record<string, NodeAttr> = {}): Node => ({ opType, name: opType, inputs: [], outputs: ["y"], attrs: new Map(Object.entries(attrs)) });
const ints = (dims: number[], data: number[]): ConstTensor => ({ isFloat: false, dims, data: Float64Array.from(data) });
const floats = (dims: number[], data: number[]): ConstTensor => ({ isFloat: true, dims, data: Float32Array.from(data) });
const fold = (node: Node, ins: (ConstTensor | undefined)[], opset = 17) => {
  const r = foldNode(node, ins, opset)![0]!;
  return { dims: r.dims, data: Array.from(r.data), isFloat: r.isFloat };
};

describe("constant folding", () => {
  it("carries the symbolic batch (SYM_BATCH) through Shape -> Gather -> Unsqueeze -> Mul -> Concat as k·batch", () => {
    const shape = fold(n("Shape"), [ints([SYM_BATCH, 16, 4, 4], [])]);
    expect(shape.dims).toEqual([4]);
    const b = fold(n("Gather", { axis: 0 }), [ints([4], shape.data), ints([], [0])]);
    expect(b.dims).toEqual([]);
    expect(symDim(b.data[0]!)).toBe(-1);
    const u = fold(n("Unsqueeze"), [ints([], b.data), ints([1], [0])]);
    expect(u.dims).toEqual([1]);
    const m = fold(n("Mul"), [ints([1], u.data), ints([1], [16])]);
    expect(symDim(m.data[0]!)).toBe(-16);  // 16·batch: linear, a plan dimension
    const c = fold(n("Concat", { axis: 0 }), [ints([1], m.data), ints([1], [-1])]);
    expect(c.data.map((v) => symDim(v))).toEqual([-16, -1]);
    // Arithmetic that is not linear in the batch is recognisably unknown, not a wrong number.
    expect(symDim(fold(n("Add"), [ints([1], u.data), ints([1], [1])]).data[0]!)).toBeUndefined();
    expect(symDim(fold(n("Mul"), [ints([1], u.data), ints([1], u.data)]).data[0]!)).toBeUndefined();
  });

  it("handles the opset-11 attribute forms of Unsqueeze, Squeeze and Slice", () => {
    expect(fold(n("Unsqueeze", { axes: [0, 2] }), [ints([2], [5, 6])], 11).dims).toEqual([1, 2, 1]);
    expect(fold(n("Squeeze", { axes: [0] }), [ints([1, 2], [5, 6])], 11).dims).toEqual([2]);
    expect(fold(n("Slice", { starts: [1], ends: [3], axes: [0] }), [ints([4], [9, 8, 7, 6])], 9).data).toEqual([8, 7]);
  });

  it("slices with negative starts/ends, steps and huge ends (INT64_MAX)", () => {
    const x = ints([5], [0, 1, 2, 3, 4]);
    expect(fold(n("Slice"), [x, ints([1], [-3]), ints([1], [9.2e18])]).data).toEqual([2, 3, 4]);
    expect(fold(n("Slice"), [x, ints([1], [-1]), ints([1], [-9.2e18]), ints([1], [0]), ints([1], [-2])]).data).toEqual([4, 2, 0]);
  });

  it("evaluates ConstantOfShape, Range, Where, Expand, Cast and Transpose", () => {
    expect(fold(n("ConstantOfShape", { value: floats([1], [2.5]) }), [ints([1], [3])]).data).toEqual([2.5, 2.5, 2.5]);
    expect(fold(n("Range"), [ints([], [1]), ints([], [7]), ints([], [2])]).data).toEqual([1, 3, 5]);
    expect(fold(n("Where"), [ints([2], [1, 0]), ints([2], [1, 2]), ints([], [9])]).data).toEqual([1, 9]);
    expect(fold(n("Expand"), [ints([2, 1], [1, 2]), ints([2], [2, 3])]).data).toEqual([1, 1, 1, 2, 2, 2]);
    const c = fold(n("Cast", { to: 7 }), [floats([2], [1.7, -1.7])]);
    expect(c).toEqual({ dims: [2], data: [1, -1], isFloat: false });
    const t = fold(n("Transpose", { perm: [1, 0] }), [floats([2, 3], [1, 2, 3, 4, 5, 6])]);
    expect(t).toEqual({ dims: [3, 2], data: [1, 4, 2, 5, 3, 6], isFloat: true });
  });

  it("divides integers by truncation and broadcasts float math", () => {
    expect(fold(n("Div"), [ints([2], [7, -7]), ints([], [2])]).data).toEqual([3, -3]);
    expect(fold(n("Add"), [floats([2, 1], [1, 2]), floats([3], [10, 20, 30])]).data).toEqual([11, 21, 31, 12, 22, 32]);
    const erf = fold(n("Erf"), [floats([3], [0, 1, -2])]).data;
    [0, 0.8427008, -0.9953223].forEach((e, i) => expect(erf[i]).toBeCloseTo(e, 6));
  });

  it("returns undefined for ops it cannot evaluate", () => {
    expect(foldNode(n("Conv"), [floats([1], [1])], 17)).toBeUndefined();
  });
});
describe("constant folding of the subgraphs Swin and DeBERTa-v2 exports carry", () => {
  it("ScatterND writes updates' slices where indices point (Swin's shifted-window mask)", () => {
    // data [3, 2]: rows 2 and 0 replaced; a negative index counts from the end
    const r = fold(n("ScatterND"), [floats([3, 2], [0, 0, 0, 0, 0, 0]), ints([2, 1], [2, -3]), floats([2, 2], [1, 2, 3, 4])]);
    expect(r).toEqual({ dims: [3, 2], data: [3, 4, 0, 0, 1, 2], isFloat: true });
    const el = fold(n("ScatterND"), [ints([2, 2], [0, 0, 0, 0]), ints([1, 2], [1, 0]), ints([1], [7])]);
    expect(el.data).toEqual([0, 0, 7, 0]);
    expect(foldNode(n("ScatterND", { reduction: "add" }), [floats([2], [0, 0]), ints([1, 1], [0]), floats([1], [1])], 17)).toBeUndefined();
    expect(foldNode(n("ScatterND"), [floats([2], [0, 0]), ints([1, 1], [5]), floats([1], [1])], 17)).toBeUndefined(); // out of range
  });

  it("Sign, Clip (inputs or attributes) and MatMul (batched, 1-D operands)", () => {
    expect(fold(n("Sign"), [floats([3], [-2, 0, 5])]).data).toEqual([-1, 0, 1]);
    expect(fold(n("Clip"), [floats([3], [-2, 0.5, 5]), floats([], [0]), floats([], [1])]).data).toEqual([0, 0.5, 1]);
    expect(fold(n("Clip"), [floats([2], [-2, 5]), undefined, floats([], [1])]).data).toEqual([-2, 1]);
    expect(fold(n("Clip", { min: -1, max: 1 }), [floats([2], [-2, 5])], 6).data).toEqual([-1, 1]);
    const mm = fold(n("MatMul"), [floats([2, 1, 2], [1, 2, 3, 4]), floats([2, 2], [1, 0, 0, 2])]);
    expect(mm).toEqual({ dims: [2, 1, 2], data: [1, 4, 3, 8], isFloat: true });
    expect(fold(n("MatMul"), [floats([2], [1, 2]), floats([2, 3], [1, 2, 3, 4, 5, 6])]).dims).toEqual([3]);
    expect(fold(n("MatMul"), [floats([2, 3], [1, 2, 3, 4, 5, 6]), floats([3], [1, 1, 1])])).toEqual({ dims: [2], data: [6, 15], isFloat: true });
  });

  it("Tile (each axis' index taken mod the input's extent) and LayerNormalization (DeBERTa-v3's relative-position table)", () => {
    expect(fold(n("Tile"), [ints([2, 2], [1, 2, 3, 4]), ints([2], [2, 3])])).toEqual({
      dims: [4, 6], isFloat: false,
      data: [1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4, 1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4],
    });
    expect(foldNode(n("Tile"), [ints([2], [1, 2]), ints([2], [1, 1])], 17)).toBeUndefined();  // repeats of the wrong length
    const ln = fold(n("LayerNormalization", { epsilon: 0 }), [floats([2, 2], [1, 3, 10, 30]), floats([2], [1, 2]), floats([2], [0, 1])]);
    expect(ln).toEqual({ dims: [2, 2], data: [-1, 3, -1, 3], isFloat: true });
    const noBias = fold(n("LayerNormalization", { axis: 0, epsilon: 0 }), [floats([2, 2], [0, 2, 4, 6]), floats([2, 2], [1, 1, 1, 1])]);
    expect(noBias.data.map((v) => Math.round(v * 1e6) / 1e6)).toEqual([-1.341641, -0.447214, 0.447214, 1.341641]);
  });

  it("EyeLike (XLNet's identity mask over its sequence): ones on the k-th diagonal, the named dtype or the input's", () => {
    expect(fold(n("EyeLike", { k: 1 }), [floats([2, 3], [5, 5, 5, 5, 5, 5])])).toEqual({ dims: [2, 3], data: [0, 1, 0, 0, 0, 1], isFloat: true });
    expect(fold(n("EyeLike", { dtype: 7 }), [floats([2, 2], [0, 0, 0, 0])])).toEqual({ dims: [2, 2], data: [1, 0, 0, 1], isFloat: false });
    expect(foldNode(n("EyeLike", { dtype: 7 }), [floats([2, 2], [0, 0, 0, 0])], 17)![0]!.dtype).toBe("int64");
    expect(foldNode(n("EyeLike"), [floats([4], [0, 0, 0, 0])], 17)).toBeUndefined();  // not 2-D
  });

  it("OneHot of constant ids (CANINE's hash buckets): the depth inserted at the axis, negative ids from the end", () => {
    const ids = ints([2], [1, -1]);
    expect(fold(n("OneHot"), [ids, ints([], [3]), floats([2], [0, 5])])).toEqual({ dims: [2, 3], data: [0, 5, 0, 0, 0, 5], isFloat: true });
    expect(fold(n("OneHot", { axis: 0 }), [ids, ints([], [3]), floats([2], [0, 5])])).toEqual({ dims: [3, 2], data: [0, 0, 5, 0, 0, 5], isFloat: true });
    expect(foldNode(n("OneHot"), [ids, ints([], [3]), floats([3], [0, 1, 2])], 17)).toBeUndefined();  // values not [off, on]
  });

  it("Trilu (a decoder's causal mask over its past and new lengths): upper or lower, the k-th diagonal, every matrix of a batch", () => {
    const m = floats([2, 3], [1, 2, 3, 4, 5, 6]);
    expect(fold(n("Trilu"), [m])).toEqual({ dims: [2, 3], data: [1, 2, 3, 0, 5, 6], isFloat: true });
    expect(fold(n("Trilu", { upper: 0 }), [m])).toEqual({ dims: [2, 3], data: [1, 0, 0, 4, 5, 0], isFloat: true });
    // torch.triu(full((t, p + t), -inf), diagonal=p + 1): k from a second input, -inf kept above it
    const mask = fold(n("Trilu"), [floats([2, 4], new Array(8).fill(-Infinity)), ints([], [3])]);
    expect(Array.from(mask.data)).toEqual([0, 0, 0, -Infinity, 0, 0, 0, 0]);
    expect(fold(n("Trilu", { upper: 0 }), [m, ints([], [-1])]).data).toEqual([0, 0, 0, 4, 0, 0]);
    const batched = fold(n("Trilu"), [floats([2, 2, 2], [1, 1, 1, 1, 2, 2, 2, 2])]);
    expect(Array.from(batched.data)).toEqual([1, 1, 0, 1, 2, 2, 0, 2]);
    expect(foldNode(n("Trilu"), [floats([3], [1, 2, 3])], 17)).toBeUndefined();  // not a matrix
  });

  it("BatchNormalization of a constant (BiT's weight-standardised convs): training mode normalises by the tensor's own statistics and blends the running ones", () => {
    // [1, 2, 3]: channel 0 is 1, 2, 3 (mean 2, population variance 2/3), channel 1 is 3, 4, 5 (mean 4)
    const w = floats([1, 2, 3], [1, 2, 3, 3, 4, 5]);
    const [scale, bias, mean, variance] = [floats([2], [1, 2]), floats([2], [0, 1]), floats([2], [10, 10]), floats([2], [5, 5])];
    const train = { ...n("BatchNormalization", { epsilon: 0, momentum: 0.25, training_mode: 1 }), outputs: ["y", "rm", "rv"] };
    const [y, rm, rv] = foldNode(train, [w, scale, bias, mean, variance], 15)!.map((t) => Array.from(t.data));
    const k = 1 / Math.sqrt(2 / 3);
    expect(y!.map((v) => Math.round(v * 1e5) / 1e5)).toEqual([-k, 0, k, 1 - 2 * k, 1, 1 + 2 * k].map((v) => Math.round(Math.fround(v) * 1e5) / 1e5));
    expect(rm).toEqual([10 * 0.25 + 2 * 0.75, 10 * 0.25 + 4 * 0.75]);  // running * momentum + batch * (1 - momentum)
    expect(rv!.map((v) => Math.round(v * 1e6) / 1e6)).toEqual([5 * 0.25 + (2 / 3) * 0.75, 5 * 0.25 + (2 / 3) * 0.75].map((v) => Math.round(v * 1e6) / 1e6));
    // inference mode: the given statistics
    const infer = fold(n("BatchNormalization", { epsilon: 0 }), [w, scale, bias, floats([2], [2, 4]), floats([2], [1, 4])], 15);
    expect(infer.data).toEqual([-1, 0, 1, 0, 1, 2]);
    // statistics that are not one per channel: no fold
    expect(foldNode(n("BatchNormalization"), [w, floats([3], [1, 1, 1]), bias, mean, variance], 15)).toBeUndefined();
  });

  it("Split of a constant (GPT-J's sin/cos table): given sizes, equal parts, opset 18's num_outputs", () => {
    const x = floats([2, 5], [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    const parts = (node: Node, ins: (ConstTensor | undefined)[], opset: number) => foldNode(node, ins, opset)!.map((r) => ({ dims: r.dims, data: Array.from(r.data) }));
    const two = { ...n("Split", { axis: 1 }), outputs: ["a", "b"] };
    expect(parts(two, [x, ints([2], [2, 3])], 13)).toEqual([{ dims: [2, 2], data: [0, 1, 5, 6] }, { dims: [2, 3], data: [2, 3, 4, 7, 8, 9] }]);
    expect(parts({ ...n("Split", { axis: 1, split: [4, 1] }), outputs: ["a", "b"] }, [x], 11).map((p) => p.dims)).toEqual([[2, 4], [2, 1]]);
    expect(parts({ ...two, attrs: new Map([["axis", -1], ["num_outputs", 2]]) }, [x], 18).map((p) => p.data)).toEqual([[0, 1, 2, 5, 6, 7], [3, 4, 8, 9]]);
    expect(parts({ ...n("Split"), outputs: ["a", "b"] }, [x], 13)).toEqual([{ dims: [1, 5], data: [0, 1, 2, 3, 4] }, { dims: [1, 5], data: [5, 6, 7, 8, 9] }]);
    // sizes that do not add up to the axis: no fold (the compiler then names the node)
    expect(foldNode(two, [x, ints([2], [2, 2])], 13)).toBeUndefined();
  });

  it("Resize of a constant (BEiT's relative-position table) and constant reductions", () => {
    const none = undefined;
    // linear, half_pixel: [0, 4] at positions -0.25, 0.25, 0.75, 1.25, clamped to the axis
    const lin = fold(n("Resize", { mode: "linear" }), [floats([1, 1, 1, 2], [0, 4]), none, floats([4], [1, 1, 1, 2])], 13);
    expect(lin).toEqual({ dims: [1, 1, 1, 4], data: [0, 1, 3, 4], isFloat: true });
    // nearest by sizes, both spatial axes
    const near = fold(n("Resize"), [floats([1, 1, 2, 2], [1, 2, 3, 4]), none, none, ints([4], [1, 1, 4, 4])], 13);
    expect(near.data).toEqual([1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4]);
    // cubic (DINOv2's position table), half_pixel, a = -0.75: the coordinate unclamped, taps
    // outside the axis read at its ends; ONNX Runtime 1.32 gives the same four floats
    const cubic = fold(n("Resize", { mode: "cubic" }), [floats([1, 1, 1, 2], [0, 4]), none, floats([4], [1, 1, 1, 2])], 13);
    expect(cubic.data).toEqual([-0.421875, 0.90625, 3.09375, 4.421875]);
    // exclude_outside: the outside taps' weights dropped and the rest scaled to sum to 1 (ORT's figures)
    const excl = fold(n("Resize", { mode: "cubic", exclude_outside: 1 }), [floats([1, 1, 1, 2], [0, 4]), none, floats([4], [1, 1, 1, 2])], 13);
    expect(excl.data.map((v) => Math.round(v * 1e6) / 1e6)).toEqual([-0.545455, 0.917808, 3.082192, 4.545455]);
    expect(foldNode(n("Resize", { mode: "cubic", antialias: 1 }), [floats([1, 1, 1, 2], [0, 4]), none, floats([4], [1, 1, 1, 2])], 18)).toBeUndefined();
    const x = floats([2, 3], [1, 5, 3, 4, 2, 6]);
    expect(fold(n("ReduceSum"), [x, ints([1], [1])])).toEqual({ dims: [2, 1], data: [9, 12], isFloat: true });
    expect(fold(n("ReduceMean", { keepdims: 0 }), [x, ints([1], [0])], 18)).toEqual({ dims: [3], data: [2.5, 3.5, 4.5], isFloat: true });
    expect(fold(n("ReduceMax", { axes: [1], keepdims: 0 }), [x], 17).data).toEqual([5, 6]);
    expect(fold(n("ReduceMin", { keepdims: 0 }), [x], 17)).toEqual({ dims: [], data: [1], isFloat: true });  // all axes
    expect(fold(n("ReduceSum", { noop_with_empty_axes: 1 }), [x]).data).toEqual([1, 5, 3, 4, 2, 6]);
  });

  it("GatherND, GatherElements, ScatterElements and ReduceL2 / SumSquare / L1 of constants", () => {
    const d = floats([2, 3], [1, 2, 3, 4, 5, 6]);
    expect(fold(n("GatherND"), [d, ints([2, 2], [1, 2, 0, -1])])).toEqual({ dims: [2], data: [6, 3], isFloat: true });
    expect(fold(n("GatherND"), [d, ints([1, 1], [1])])).toEqual({ dims: [1, 3], data: [4, 5, 6], isFloat: true });
    expect(fold(n("GatherElements", { axis: 1 }), [d, ints([2, 2], [2, 0, -1, 1])])).toEqual({ dims: [2, 2], data: [3, 1, 6, 5], isFloat: true });
    expect(fold(n("ScatterElements", { axis: 0 }), [d, ints([1, 3], [1, 0, 1]), floats([1, 3], [7, 8, 9])])).toEqual({ dims: [2, 3], data: [1, 8, 3, 7, 5, 9], isFloat: true });
    expect(foldNode(n("ScatterElements", { reduction: "add" }), [d, ints([1, 3], [1, 0, 1]), floats([1, 3], [7, 8, 9])], 17)).toBeUndefined();
    expect(foldNode(n("GatherElements"), [d, ints([1, 1], [2])], 17)).toBeUndefined();  // out of range
    const v = floats([2, 2], [3, -4, 0, 1]);
    expect(fold(n("ReduceL2", { keepdims: 0 }), [v, ints([1], [1])], 18).data).toEqual([5, 1]);
    expect(fold(n("ReduceSumSquare", { axes: [0] }), [v], 17).data).toEqual([9, 17]);
    expect(fold(n("ReduceL1", { keepdims: 0 }), [v], 17).data).toEqual([8]);
  });

  it("Pad (constant mode, crops too) and Einsum of constants (Funnel's relative positions)", () => {
    const x = floats([2, 2], [1, 2, 3, 4]);
    expect(fold(n("Pad"), [x, ints([4], [0, 1, 1, -1]), floats([], [9])], 13)).toEqual({ dims: [3, 2], data: [9, 1, 9, 3, 9, 9], isFloat: true });
    expect(fold(n("Pad", { pads: [1, 0, 0, 0], value: 5 }), [x], 2).data).toEqual([5, 5, 1, 2, 3, 4]);
    expect(foldNode(n("Pad", { mode: "reflect" }), [x, ints([4], [0, 1, 0, 1])], 13)).toBeUndefined();
    const a = floats([2, 3], [1, 2, 3, 4, 5, 6]), b = floats([3, 2], [1, 0, 0, 1, 1, 1]);
    expect(fold(n("Einsum", { equation: "ij,jk->ik" }), [a, b])).toEqual({ dims: [2, 2], data: [4, 5, 10, 11], isFloat: true });
    expect(fold(n("Einsum", { equation: "ij->j" }), [a]).data).toEqual([5, 7, 9]);
    expect(fold(n("Einsum", { equation: "ij,ij->i" }), [a, a]).data).toEqual([14, 77]);
    expect(foldNode(n("Einsum", { equation: "ii->i" }), [floats([2, 2], [1, 2, 3, 4])], 17)).toBeUndefined();  // a diagonal
  });
});

describe("constant folding of a quantized model's weights", () => {
  const UINT8 = 2, INT8 = 3;
  const q8 = (dims: number[], data: number[], fileType: number): ConstTensor => ({ ...ints(dims, data), fileType });

  it("DequantizeLinear: (x - zero point) * scale, per tensor and per slice of the axis", () => {
    expect(fold(n("DequantizeLinear"), [q8([3], [0, 128, 255], UINT8), floats([], [0.5]), q8([], [128], UINT8)]).data).toEqual([-64, 0, 63.5]);
    // a conv kernel [2, 1, 1, 2] quantized per output channel (axis 0), symmetric: no zero point
    const w = fold(n("DequantizeLinear", { axis: 0 }), [q8([2, 1, 1, 2], [1, -2, 3, -4], INT8), floats([2], [0.5, 2])]);
    expect(w).toEqual({ dims: [2, 1, 1, 2], data: [0.5, -1, 6, -8], isFloat: true });
  });

  it("QuantizeLinear: round half to even, saturate to the zero point's 8-bit type, which the result keeps", () => {
    const r = foldNode(n("QuantizeLinear"), [floats([5], [0.5, 1.5, -3, 1000, 2.4]), floats([], [1]), q8([], [0], INT8)], 17)![0]!;
    expect(Array.from(r.data)).toEqual([0, 2, -3, 127, 2]);
    expect([r.dtype, r.fileType]).toEqual(["int8", INT8]);
    const u = foldNode(n("QuantizeLinear"), [floats([2], [-5, 300]), floats([], [1])], 17)![0]!;
    expect([Array.from(u.data), u.dtype]).toEqual([[0, 255], "uint8"]);
  });
});

describe("a value folded from an 8-bit table (the estimate's bytes of it)", () => {
  it("keeps the table's file type through the ops that pick or move values, and not through others", async () => {
    const { inferGraph } = await import("../../src/compiler/infer.ts");
    const table: ConstTensor = { isFloat: false, dims: [10, 4], data: new Float64Array(40), fileType: 2 }; // UINT8
    const g = {
      file: "t.onnx", opset: 17, inputs: [{ name: "x", dims: ["N", 4], elemType: 1 }], outputs: ["y"],
      consts: new Map<string, ConstTensor>([["table", table], ["idx", ints([3], [1, 2, 3])]]),
      nodes: [
        { ...n("Gather", { axis: 0 }), inputs: ["table", "idx"], outputs: ["rows"] },
        { ...n("Transpose", { perm: [1, 0] }), inputs: ["rows"], outputs: ["moved"] },
        { ...n("Shape"), inputs: ["rows"], outputs: ["dims"] },
        { ...n("Relu"), inputs: ["x"], outputs: ["y"] },
      ],
    };
    const inf = inferGraph(g);
    expect([inf.consts.get("rows")?.fileType, inf.consts.get("moved")?.fileType]).toEqual([2, 2]);
    expect(inf.consts.get("dims")?.fileType).toBeUndefined(); // a shape is int64, whatever it was read from
  });
});
