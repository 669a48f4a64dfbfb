// ORT's rewrites of a quantized model as the pattern replay applies them: the QDQ groups
// (src/estimate/ort-qdq.ts), the dynamic quantization fusions (ort-quant-dynamic.ts), the
// channels-last region (ort-nhwc.ts) and the quantized kernels' scratch (ort-scratch-quantized.ts).
import { describe, expect, it } from "vitest";
import type { ConstTensor, LNode } from "../../src/compiler/ir.ts";
import { ortNhwc } from "../../src/estimate/ort-nhwc.ts";
import { ortQdqFusions } from "../../src/estimate/ort-qdq.ts";
import { ortDynamicQuantFusions } from "../../src/estimate/ort-quant-dynamic.ts";
import { ortQuantizedScratch } from "../../src/estimate/ort-scratch-quantized.ts";

const node = (op: string, inputs: string[], outputs: string[], attrs: LNode["attrs"] = {}): LNode => ({ op, name: outputs[0]!, inputs, outputs, attrs });
const ops = (ns: readonly LNode[]) => ns.map((n) => `${n.op}->${n.outputs.join(",")}`);
const UINT8 = 2, INT8 = 3;
const scalar = (v: number, fileType?: number): ConstTensor => ({ isFloat: fileType === undefined, dims: [], data: Float64Array.of(v), ...(fileType ? { fileType } : {}) });

describe("ORT's QDQ groups", () => {
  // Constants: names starting with "c" (scales, zero points, the folded weight "cw" of DequantizeLinear(cw_q, cw_s, cw_z)).
  const isConst = (n: string) => n.startsWith("c");
  const consts: Record<string, ConstTensor> = { c_zp_u8: scalar(0, UINT8), c_zp_128: scalar(128, UINT8), c_s: scalar(0.1) };
  const constOf = (n: string) => consts[n];
  const weights = (n: string) => (n === "cw" ? ["cw_q", "cw_s", "cw_z"] : n === "cb" ? ["cb_q", "cb_s", "cb_z"] : undefined);
  const fuse = (nodes: LNode[], outputs: string[]) => ortQdqFusions(nodes, outputs, isConst, constOf, weights).nodes;

  it("runs DequantizeLinear -> Conv -> QuantizeLinear as one QLinearConv, its inputs in the kernel's order", () => {
    const g = [node("DequantizeLinear", ["xq", "c_s", "c_zp_u8"], ["x"]), node("Conv", ["x", "cw", "cb"], ["y"]), node("QuantizeLinear", ["y", "c_s", "c_zp_u8"], ["yq"]), node("DequantizeLinear", ["yq", "c_s", "c_zp_u8"], ["out"])];
    const fused = fuse(g, ["out"]);
    expect(ops(fused)).toEqual(["QLinearConv->yq", "DequantizeLinear->out"]);
    expect(fused[0]!.inputs).toEqual(["xq", "c_s", "c_zp_u8", "cw_q", "cw_s", "cw_z", "c_s", "c_zp_u8", "cb_q"]);
  });

  it("runs a value-moving op on the 8-bit tensor whatever its other inputs, and a MatMul without QuantizeLinear to a float output", () => {
    const reshape = [node("DequantizeLinear", ["xq", "c_s"], ["x"]), node("Reshape", ["x", "shape"], ["r"]), node("QuantizeLinear", ["r", "c_s"], ["rq"]), node("Relu", ["rq"], ["z"])];
    expect(fuse(reshape, ["z"]).map((n) => `${n.op}(${n.inputs.join(",")})`)).toEqual(["Reshape(xq,shape)", "Relu(rq)"]);
    const matmul = [node("DequantizeLinear", ["aq", "c_s"], ["a"]), node("MatMul", ["a", "cw"], ["y"])];
    expect(ops(fuse(matmul, ["y"]))).toEqual(["MatMulIntegerToFloat->y"]);
  });

  it("runs a ReduceMax or ReduceMin on 8-bit values itself (a text CNN's max over time), on 16-bit ones between the pair", () => {
    const reduce = (op: string, zp: string) => [node("DequantizeLinear", ["xq", "c_s", zp], ["x"]), node(op, ["x"], ["r"], { axes: [2], keepdims: 0 }), node("QuantizeLinear", ["r", "c_s", zp], ["rq"]), node("Relu", ["rq"], ["z"])];
    expect(ops(fuse(reduce("ReduceMax", "c_zp_u8"), ["z"]))).toEqual(["ReduceMax->rq", "Relu->z"]);
    expect(ops(fuse(reduce("ReduceMin", "c_zp_u8"), ["z"]))).toEqual(["ReduceMin->rq", "Relu->z"]);
    consts.c_zp_u16 = scalar(0, 4);
    expect(ops(fuse(reduce("ReduceMax", "c_zp_u16"), ["z"]))).toEqual(["DequantizeLinear->x", "ReduceMax->r", "QuantizeLinear->rq", "Relu->z"]);
  });

  it("drops a Relu before a QuantizeLinear only where the zero point clamps as much; fuses nothing into a graph output", () => {
    const withRelu = (zp: string) => [node("DequantizeLinear", ["xq", "c_s"], ["x"]), node("Conv", ["x", "cw"], ["c"]), node("Relu", ["c"], ["r"]), node("QuantizeLinear", ["r", "c_s", zp], ["rq"])];
    expect(ops(fuse(withRelu("c_zp_u8"), ["rq"]))).toEqual(["QLinearConv->rq"]);
    // A float Conv reads its weight dequantized in every request: a float tensor of its own.
    expect(ops(fuse(withRelu("c_zp_128"), ["rq"]))).toEqual(["DequantizeLinear->x", "DequantizeLinear->cw#dequantized", "Conv->c", "Relu->r", "QuantizeLinear->rq"]);
    const g = [node("DequantizeLinear", ["xq", "c_s"], ["x"]), node("Conv", ["x", "cw"], ["y"]), node("QuantizeLinear", ["y", "c_s"], ["yq"])];
    expect(ops(fuse(g, ["y", "yq"]))).toEqual(["DequantizeLinear->x", "DequantizeLinear->cw#dequantized", "Conv->y", "QuantizeLinear->yq"]);
  });

  // quantize_static's default, signed activations, on x86-64: ORT turns a QuantizeLinear ->
  // DequantizeLinear pair unsigned only where the QuantizeLinear has that one reader; its
  // convolutions take no signed activation, so a group reading a tensor two nodes read runs in float.
  it("fuses a signed group only where its QuantizeLinear -> DequantizeLinear pairs each have one reader", () => {
    const signed: Record<string, ConstTensor> = { ...consts, c_zp_s8: scalar(-128, INT8) };
    const conv = (x: string, y: string) => [node("DequantizeLinear", [`${x}q`, "c_s", "c_zp_s8"], [x]), node("Conv", [x, "cw"], [y]), node("QuantizeLinear", [y, "c_s", "c_zp_s8"], [`${y}q`])];
    const oneReader = [node("QuantizeLinear", ["in", "c_s", "c_zp_s8"], ["aq"]), ...conv("a", "b"), node("DequantizeLinear", ["bq", "c_s", "c_zp_s8"], ["out"])];
    expect(ops(ortQdqFusions(oneReader, ["out"], isConst, (n) => signed[n], weights).nodes)).toEqual(["QuantizeLinear->aq", "QLinearConv->bq", "DequantizeLinear->out"]);
    // aq also read by a second DequantizeLinear (a residual's skip): it stays signed, the conv runs in float
    const twoReaders = [...oneReader, node("DequantizeLinear", ["aq", "c_s", "c_zp_s8"], ["skip"])];
    const r = ortQdqFusions(twoReaders, ["out", "skip"], isConst, (n) => signed[n], weights);
    expect(ops(r.nodes)).toEqual(["QuantizeLinear->aq", "DequantizeLinear->a", "DequantizeLinear->cw#dequantized", "Conv->b", "QuantizeLinear->bq", "DequantizeLinear->out", "DequantizeLinear->skip"]);
    expect([...r.dequantizedWeights]).toEqual([["cw#dequantized", "cw"]]);
    // unsigned activations fuse whatever reads them
    const unsigned = twoReaders.map((n) => ({ ...n, inputs: n.inputs.map((i) => (i === "c_zp_s8" ? "c_zp_u8" : i)) }));
    expect(ops(ortQdqFusions(unsigned, ["out", "skip"], isConst, constOf, weights).nodes)).toContain("QLinearConv->bq");
  });

  it("gives each reader of a DequantizeLinear its own copy, so a reader no group takes keeps a float tensor of its own", () => {
    const g = [node("DequantizeLinear", ["xq", "c_s"], ["x"]), node("Shape", ["x"], ["s"]), node("Add", ["x", "c_one"], ["y"])];
    const r = ortQdqFusions(g, ["s", "y"], isConst, constOf, weights);
    expect(ops(r.nodes)).toEqual(["DequantizeLinear->x/duplicated0", "DequantizeLinear->x", "Shape->s", "Add->y"]);
    expect(r.nodes.find((n) => n.op === "Add")!.inputs[0]).toBe("x/duplicated0");
    expect([...r.copyOf]).toEqual([["x/duplicated0", "x"]]);
  });
});

describe("ORT's fusions of a dynamically quantized MatMul", () => {
  const isConst = (n: string) => n.startsWith("c");
  const dtypeOf = (n: string) => (n === "f" ? "float32" : undefined);
  const linear = (x: string, y: string, k: string) => [
    node("MatMulInteger", [`${x}_q`, `cw${k}`, `${x}_zp`, `cw${k}_zp`], [`i${k}`]), node("Cast", [`i${k}`], k === "" ? ["f"] : [`f${k}`]),
    node("Mul", [`${x}_s`, `cw${k}_s`], [`s${k}`]), node("Mul", [k === "" ? "f" : `f${k}`, `s${k}`], [`m${k}`]), node("Add", [`cb${k}`, `m${k}`], [y]),
  ];
  const quantize = (x: string) => node("DynamicQuantizeLinear", [x], [`${x}_q`, `${x}_s`, `${x}_zp`]);

  it("fuses a MatMul read alone into one DynamicQuantizeMatMul from the float input", () => {
    const fused = ortDynamicQuantFusions([quantize("x"), ...linear("x", "y", "")], ["y"], isConst, dtypeOf);
    expect(ops(fused)).toEqual(["DynamicQuantizeMatMul->y"]);
    expect(fused[0]!.inputs).toEqual(["x", "cw", "cw_s", "cw_zp", "cb"]);
  });

  it("keeps the 8-bit input of MatMuls sharing it (a query, key and value projection): MatMulIntegerToFloat each", () => {
    const dtypes = (n: string) => (n.startsWith("f") ? "float32" : undefined);
    const fused = ortDynamicQuantFusions([quantize("x"), ...linear("x", "q", "1"), ...linear("x", "k", "2")], ["q", "k"], isConst, dtypes);
    expect(ops(fused)).toEqual(["DynamicQuantizeLinear->x_q,x_s,x_zp", "MatMulIntegerToFloat->q", "MatMulIntegerToFloat->k"]);
    expect(fused[1]!.inputs).toEqual(["x_q", "cw1", "x_s", "cw1_s", "x_zp", "cw1_zp", "cb1"]);
  });
});

describe("ORT's channels-last region of a quantized CNN", () => {
  const shapes: Record<string, number[]> = { xq: [-1, 3, 8, 8], a: [-1, 16, 8, 8], b: [-1, 16, 8, 8], s: [-1, 16, 8, 8], p: [-1, 16, 1, 1], f: [-1, 16] };
  const g = { shapeOf: (n: string) => shapes[n], symbolicShape: (n: string) => (shapes[n] ? shapes[n]!.map((d) => (d < 0 ? "N" : d)) : null), dtypeOf: (n: string) => (n === "f" ? "float32" : "uint8"), isConst: (n: string) => n.startsWith("c") };

  it("transposes in before the first QLinearConv and out before the Flatten; elementwise ops between run channels-last", () => {
    const nodes = [node("QLinearConv", ["xq", "c"], ["a"]), node("QLinearConv", ["a", "c"], ["b"]), node("QLinearAdd", ["a", "c", "c", "b"], ["s"]), node("QLinearGlobalAveragePool", ["s"], ["p"]), node("Flatten", ["p"], ["f"])];
    const r = ortNhwc(nodes, ["f"], g);
    expect(ops(r.nodes)).toEqual(["Transpose->xq#nhwc", "QLinearConv->a#nhwc", "QLinearConv->b#nhwc", "QLinearAdd->s#nhwc", "QLinearGlobalAveragePool->p#nhwc", "Transpose->p", "Flatten->f"]);
    expect(r.shapes.get("s#nhwc")).toEqual(["N", 8, 8, 16]);
    expect(r.shapes.get("p#nhwc")).toEqual(["N", 1, 1, 16]);
    expect(r.transposed.get("xq#nhwc")).toEqual({ of: "xq", perm: [0, 3, 1, 2] });
  });

  // ORT's transpose optimizer moves a Transpose through an op only where that lowers its cost
  // (the ranks of the Transposes it removes against those it adds): not through a one-input op
  // whose output a float op reads channels-first (a DenseNet's first one-input Concat).
  it("moves a Transpose through an op only where that removes more Transposes than it adds", () => {
    const float = (n: string) => (n === "d" || n === "b" || n === "y" ? "float32" : "uint8");
    const on = { ...g, shapeOf: (n: string) => shapes[n] ?? shapes.a, dtypeOf: float };
    const concat = [node("QLinearConv", ["xq", "c"], ["a"]), node("QLinearConcat", ["c", "c", "a", "c", "c"], ["q"]), node("DequantizeLinear", ["q", "c"], ["d"]), node("BatchNormalization", ["d", "c"], ["b"])];
    expect(ops(ortNhwc(concat, ["b"], on).nodes)).toEqual(["Transpose->xq#nhwc", "QLinearConv->a#nhwc", "Transpose->a", "QLinearConcat->q", "DequantizeLinear->d", "BatchNormalization->b"]);
    // A DequantizeLinear that leads on to a QLinearConv moves, but the Add after it does not (its
    // other input is channels-first): the Transpose ORT leaves after the DequantizeLinear, on the
    // float tensor, gets a QuantizeLinear -> DequantizeLinear pair after it.
    const residual = [node("QLinearConv", ["xq", "c"], ["a"]), node("DequantizeLinear", ["a", "c"], ["d"]), node("Add", ["d", "b"], ["y"]), node("QuantizeLinear", ["y", "c"], ["q"]), node("QLinearConv", ["q", "c"], ["e"])];
    expect(ops(ortNhwc(residual, ["e"], on).nodes)).toEqual([
      "Transpose->xq#nhwc", "QLinearConv->a#nhwc", "DequantizeLinear->d#nhwc", "Transpose->d#transposed", "QuantizeLinear->d#requantized", "DequantizeLinear->d",
      "Add->y", "QuantizeLinear->q", "Transpose->q#nhwc", "QLinearConv->e#nhwc", "Transpose->e",
    ]);
    // where the dequantized value leads on to another QLinearConv, the Transposes cancel through it
    const chain = [node("QLinearConv", ["xq", "c"], ["a"]), node("DequantizeLinear", ["a", "c"], ["d"]), node("QuantizeLinear", ["d", "c"], ["q"]), node("QLinearConv", ["q", "c"], ["e"]), node("Flatten", ["e"], ["f"])];
    const float2 = (n: string) => (n === "d" || n === "f" ? "float32" : "uint8");
    expect(ops(ortNhwc(chain, ["f"], { ...g, shapeOf: (n) => shapes[n] ?? shapes.a, dtypeOf: float2 }).nodes)).toEqual(["Transpose->xq#nhwc", "QLinearConv->a#nhwc", "DequantizeLinear->d#nhwc", "QuantizeLinear->q#nhwc", "QLinearConv->e#nhwc", "Transpose->e", "Flatten->f"]);
  });

  // ORT's NHWC rewrite makes a new node for each QLinearConv, in graph order, right after the
  // Transposes it wraps around it; its transpose optimizer's nodes come after every wrap. The
  // index decides ORT's execution order: a ResNet's downsampling conv, first in the graph, runs
  // after the block's other convs.
  it("numbers what it makes as ORT does: each conv's wrap in graph order, the optimizer's nodes last", () => {
    const block = [node("QLinearConv", ["xq", "c"], ["s"]), node("QLinearConv", ["xq", "c"], ["a"]), node("QLinearConv", ["a", "c"], ["b"]), node("MaxPool", ["b"], ["m"]), node("Flatten", ["s"], ["f"]), node("QLinearAdd", ["m", "c", "c", "f"], ["y"])];
    const r = ortNhwc(block, ["y"], { ...g, shapeOf: (n) => shapes[n] ?? shapes.a, dtypeOf: (n) => (n === "f" || n === "y" ? "float32" : "uint8") });
    expect(ops(r.added)).toEqual(["Transpose->xq#nhwc", "Transpose->s", "QLinearConv->s#nhwc", "QLinearConv->a#nhwc", "QLinearConv->b#nhwc", "MaxPool->m#nhwc", "Transpose->m"]);
  });

  it("leaves a graph of float convs alone", () => {
    const nodes = [node("Conv", ["f", "c"], ["a"])];
    expect(ortNhwc(nodes, ["a"], { ...g, dtypeOf: () => "float32" }).nodes).toEqual(nodes);
  });
});

describe("the quantized kernels' scratch", () => {
  const w = (dims: number[], fileType = INT8): ConstTensor => ({ isFloat: false, dims, data: new Float64Array(dims.reduce((a, b) => a * b, 1)), fileType });
  const conv = (weight: ConstTensor, out: number[], attrs: LNode["attrs"], activations?: "int8") => {
    const values = { shapeOf: (n: string) => (n === "y" ? out : undefined), dtypeOf: (n: string) => (n === "x" ? activations : undefined), constOf: (n: string) => (n === "w" ? weight : n === "wzp" ? { ...w([]), data: Float64Array.of(0) } : undefined) };
    return ortQuantizedScratch(node("QLinearConv", ["x", "xs", "xzp", "w", "ws", "wzp", "ys", "yzp"], ["y"], attrs), values);
  };

  it("a QLinearConv off the symmetric path: int32 sums and an im2col buffer of one image (resnet18's first conv)", () => {
    // 3 input channels: not a multiple of 4, so MLAS's symmetric kernel does not take it
    expect(conv(w([64, 3, 7, 7]), [-1, 64, 112, 112], { group: 1, kernel: [7, 7], strides: [2, 2], pads: [3, 3, 3, 3] })).toEqual({ sizes: [3211264, 1843968], fixed: [true, true], beforeOutputs: false });
  });

  it("a depthwise QLinearConv on the symmetric path: a pointer per tap and output pixel, for the whole batch", () => {
    expect(conv(w([32, 1, 3, 3]), [-1, 32, 112, 112], { group: 32, kernel: [3, 3], strides: [1, 1], pads: [1, 1, 1, 1] })).toEqual({ sizes: [903168], fixed: [false], beforeOutputs: false });
    // uint8 weights are not symmetric: int32 sums and the indirection buffer of one image
    expect(conv(w([32, 1, 3, 3], UINT8), [-1, 32, 112, 112], { group: 32, kernel: [3, 3] })).toEqual({ sizes: [1605632, 903168], fixed: [true, true], beforeOutputs: false });
  });

  it("a pointwise QLinearConv on the symmetric path reads its input in place", () => {
    expect(conv(w([64, 32, 1, 1]), [-1, 64, 56, 56], { group: 1, kernel: [1, 1], strides: [1, 1], pads: [0, 0, 0, 0] })).toBeNull();
  });

  it("int8 activations (a QOperator file's) take no symmetric path on x86-64: int32 sums of one image", () => {
    expect(conv(w([96, 16, 1, 1]), [-1, 96, 112, 112], { group: 1, kernel: [1, 1], strides: [1, 1], pads: [0, 0, 0, 0] }, "int8")).toEqual({ sizes: [4816896], fixed: [true], beforeOutputs: false });
    expect(conv(w([32, 1, 3, 3]), [-1, 32, 112, 112], { group: 32, kernel: [3, 3], strides: [1, 1], pads: [1, 1, 1, 1] }, "int8")).toEqual({ sizes: [1605632, 903168], fixed: [true, true], beforeOutputs: false });
  });
});

describe("a graph ORT's replay cannot follow", () => {
  it("names the op it has no shape rule for, beside the compiler's refusal", async () => {
    const { ortRunTracePerSample } = await import("../../src/estimate/ort-pattern.ts");
    const { activationsUnknown } = await import("../../src/estimate/model-terms.ts");
    const g = {
      file: "t.onnx", opset: 17, inputs: [{ name: "x", dims: ["N", 4], elemType: 1 }], outputs: ["y"], consts: new Map<string, ConstTensor>(),
      nodes: [{ opType: "NotAnOp", name: "n0", inputs: ["x"], outputs: ["y"], attrs: new Map(), domain: "com.example" }],
    };
    let why = "";
    try {
      ortRunTracePerSample(g);
    } catch (e) {
      why = (e as Error).message;
    }
    expect(why).toMatch(/op com\.example::NotAnOp \(node "n0"\) has no shape rule in the estimate's replay of ONNX Runtime/);
    const terms = { compileError: "refused", ortTracePerSample: null, ortReplayError: why };
    expect(activationsUnknown(terms, "python-ort")).toBe(`refused; ONNX Runtime's replay could not follow it either: ${why}`);
    expect(activationsUnknown(terms, "native")).toBe("refused");
  });
});
