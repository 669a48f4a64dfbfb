/**
 * Turn a plan back into an ONNX model (test-only), so that ONNX Runtime can check the
 * compiler's rewrites numerically — BN folding, constant folding, resolved pads and
 * defaults — without a TypeScript executor and before memlane-rt exists.
 */
import { type PlanFile, weightData } from "../../src/compiler/index.ts";
import { type Attr, type Init, type ModelSpec, type NodeSpec, modelBytes } from "../unit/compiler-onnx-builder.ts";

/** Plan attributes that ONNX types as floats (msgpack may have stored them as ints). */
const FLOAT_ATTRS = new Set(["alpha", "beta", "epsilon"]);

const RENAME: Record<string, string> = {
  kernel: "kernel_shape", ceilMode: "ceil_mode", countIncludePad: "count_include_pad",
};

export function planToOnnx(plan: PlanFile): Uint8Array {
  const h = plan.header;
  const name = (id: number) => (id < 0 ? "" : `t${id}`);
  const inits: Init[] = [];
  const nodes: NodeSpec[] = [];
  h.tensors.forEach((t, id) => {
    if (t.kind !== "weight") return;
    const type = t.dtype === "int64" ? "int64" : t.dtype === "bool" ? "bool" : undefined;
    inits.push({ name: name(id), dims: t.shape, data: Array.from(weightData(plan, id)), ...(type ? { type } : {}) });
  });
  h.ops.forEach((op, i) => {
    const attrs: Record<string, Attr> = {};
    let inputs = op.inputs.map(name);
    while (inputs.length > 0 && inputs[inputs.length - 1] === "") inputs.pop();
    for (const [k, v] of Object.entries(op.attrs)) {
      if (k === "activation") continue;
      // ONNX takes Pow's exponent, (opset 13+) Split's sizes and (opset 18+) Reduce*'s axes as inputs, not attributes.
      if ((op.op === "Pow" && k === "exponent") || (op.op.startsWith("Reduce") && k === "axes") || (op.op === "Split" && k === "split")) {
        const isAxes = k === "axes" || k === "split";
        const data = isAxes ? (v as number[]) : [v as number];
        inits.push({ name: `${k}${i}`, dims: isAxes ? [data.length] : [], data, type: isAxes ? "int64" : "float" });
        inputs = [...inputs, `${k}${i}`];
        continue;
      }
      if (op.op === "Reshape" && k === "shape") {
        // The batch entry -k (k·batch) as ONNX's inferred -1: the only unknown, so it is k·N.
        const target = (v as number[]).map((d) => (d < 0 ? -1 : d));
        inits.push({ name: `shape${i}`, dims: [target.length], data: target, type: "int64" });
        inputs = [...inputs, `shape${i}`];
        continue;
      }
      attrs[RENAME[k] ?? k] = FLOAT_ATTRS.has(k) ? { f: v as number } : (v as Attr);
    }
    const outputs = op.outputs.map(name);
    if (op.op === "Slice") {
      // A plan's Slice keeps starts and steps; its ends follow from the output's extents (never the batch's).
      const axes = op.attrs.axes as number[], starts = op.attrs.starts as number[], steps = op.attrs.steps as number[];
      const out = h.tensors[op.outputs[0]!]!.shape;
      const ends = axes.map((a, j) => {
        const end = starts[j]! + out[a]! * steps[j]!;
        return end < 0 ? -(2 ** 53) : end;
      });
      for (const [k, data] of [["starts", starts], ["ends", ends], ["axes", axes], ["steps", steps]] as const) inits.push({ name: `${k}${i}`, dims: [data.length], data: [...data], type: "int64" });
      nodes.push({ op: "Slice", inputs: [inputs[0]!, `starts${i}`, `ends${i}`, `axes${i}`, `steps${i}`], outputs, name: op.name });
      return;
    }
    if (op.op === "Attention") {
      // The fused op back in primitives: MatMul, Mul by scale, Add mask, Softmax, MatMul.
      const [q, kt, v, mask] = op.inputs.map(name);
      inits.push({ name: `scale${i}`, dims: [], data: [op.attrs.scale as number] });
      nodes.push({ op: "MatMul", inputs: [q!, kt!], outputs: [`qk${i}`] });
      nodes.push({ op: "Mul", inputs: [`qk${i}`, `scale${i}`], outputs: [`sc${i}`] });
      if (mask) nodes.push({ op: "Add", inputs: [`sc${i}`, mask], outputs: [`mk${i}`] });
      nodes.push({ op: "Softmax", inputs: [mask ? `mk${i}` : `sc${i}`], outputs: [`p${i}`], attrs: { axis: -1 } });
      nodes.push({ op: "MatMul", inputs: [`p${i}`, v!], outputs, name: op.name });
      return;
    }
    if (op.op === "Gemm" && h.tensors[op.inputs[0]!]!.shape.length !== 2) {
      // ONNX Gemm is rank 2 only; a plan's Gemm on rows of a higher-rank A is MatMul + bias.
      if (op.attrs.alpha !== 1 || op.attrs.beta !== 1 || op.attrs.activation === "relu") throw new Error(`${op.name}: rank-${h.tensors[op.inputs[0]!]!.shape.length} Gemm with alpha/beta/relu`);
      const [a, b, c] = inputs;
      if (op.attrs.transB) nodes.push({ op: "Transpose", inputs: [b!], outputs: [`bt${i}`], attrs: { perm: [1, 0] } });
      nodes.push({ op: "MatMul", inputs: [a!, op.attrs.transB ? `bt${i}` : b!], outputs: c ? [`mm${i}`] : outputs, name: op.name });
      if (c) nodes.push({ op: "Add", inputs: [`mm${i}`, c], outputs });
      return;
    }
    if (op.attrs.activation === "relu") {
      nodes.push({ op: op.op, inputs, outputs: [`pre${i}`], attrs, name: op.name });
      nodes.push({ op: "Relu", inputs: [`pre${i}`], outputs, name: `${op.name}.relu` });
    } else {
      nodes.push({ op: op.op, inputs, outputs, attrs, name: op.name });
    }
  });
  const dims = (id: number) => h.tensors[id]!.shape.map((d) => (d === -1 ? "N" : d));
  const spec: ModelSpec = {
    opset: 20,
    inputs: h.inputs.map((id) => [name(id), dims(id)]),
    outputs: h.outputs.map(name),
    nodes,
    inits,
  };
  return modelBytes(spec);
}
