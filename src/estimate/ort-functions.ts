/**
 * ONNX ops defined as functions that ONNX Runtime's CPU has no kernel for, so it runs their
 * bodies: HardSwish (`x * HardSigmoid(x, 1/6, 0.5)`), where its optimized graph shows the
 * inlined `_inlfunc_HardSwish_...` HardSigmoid and Mul. Two tensors where the replay's one node
 * made one: the HardSigmoid's, alive with the HardSwish's input until the Mul.
 *
 * Only a conv ORT blocks (NCHWc, ort-nchwc.ts) takes a HardSwish whole: mobilenet_v3_large's
 * float32 export runs no HardSwish and no HardSigmoid (21 in the file). A conv it cannot block
 * leaves the body: a 1-D conv (a keyword-spotting net's (N, C, L) maps: ORT's pattern held
 * three maps where the replay's fused HardSwish held two, 33 % under), a float16 model's conv
 * whose weight or bias is cast in every request (ort-fp16.ts; mobilenet_v3_large in float16
 * runs 21 HardSigmoids and 29 Muls), and a HardSwish after anything but a conv. Measured on
 * ORT 1.32's saved optimized graphs; the rule behind it not read in ORT's source.
 */
import type { Graph, Node } from "../compiler/ir.ts";

/**
 * `n` as ORT runs it: a HardSwish its producer cannot take whole is its function body.
 * `readThroughCast`: whether a value reaches its reader through a Cast ORT runs in every
 * request (a float16 model's shared initializers, ort-fp16.ts); such a weight or bias is not a
 * constant to ORT's NCHWc rewrite.
 */
export function asFunctionBody(n: Node, producer: ReadonlyMap<string, Node>, weightRank: (value: string) => number | undefined, readThroughCast: (value: string) => boolean = () => false): Node[] {
  const [x, y] = [n.inputs[0], n.outputs[0]];
  if (n.opType !== "HardSwish" || !x || !y) return [n];
  const conv = producer.get(x);
  const [w, bias] = [conv?.inputs[1] ?? "", conv?.inputs[2] ?? ""];
  if (conv?.opType === "Conv" && weightRank(w) === 4 && !readThroughCast(w) && !readThroughCast(bias)) return [n];
  const hs = `${y}#HardSigmoid`;
  return [
    { opType: "HardSigmoid", name: hs, inputs: [x], outputs: [hs], attrs: new Map([["alpha", 1 / 6], ["beta", 0.5]]) },
    { opType: "Mul", name: y, inputs: [x, hs], outputs: [y], attrs: new Map() },
  ];
}

/** The graph with every HardSwish ORT runs as its body expanded (a float32 model; ort-fp16.ts does its own). */
export function withOrtFunctionBodies(g: Graph): Graph {
  if (!g.nodes.some((n) => n.opType === "HardSwish")) return g;
  const producer = new Map(g.nodes.flatMap((n) => n.outputs.map((o) => [o, n] as const)));
  const weightRank = (v: string) => g.consts.get(v)?.dims.length;
  return { ...g, nodes: g.nodes.flatMap((n) => asFunctionBody(n, producer, weightRank)) };
}
