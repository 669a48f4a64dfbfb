/**
 * ONNX ops defined as functions that ONNX Runtime's CPU has no kernel for, so it runs their
 * bodies: HardSwish (`x * HardSigmoid(x, 1/6, 0.5)`), where its optimized graph shows the
 * inlined `_inlfunc_HardSwish_...` HardSigmoid and Mul. Two tensors where the replay's one node
 * made one: the HardSigmoid's, alive with the HardSwish's input until the Mul.
 *
 * Only a conv ORT blocks (NCHWc, ort-nchwc.ts ortBlocksConv) takes a HardSwish whole:
 * mobilenet_v3_large's float32 export runs no HardSwish and no HardSigmoid (21 in the file). A
 * conv it leaves plain leaves the body: a 1-D conv (a keyword-spotting net's (N, C, L) maps:
 * ORT's pattern held three maps where the replay's fused HardSwish held two, 33 % under), a
 * depthwise conv of 6 channels or a full one of 18 input channels (not multiples of 4), a
 * float16 model's conv whose weight or bias is cast in every request (ort-fp16.ts;
 * mobilenet_v3_large in float16 runs 21 HardSigmoids and 29 Muls), and a HardSwish after
 * anything but a conv. Measured on ORT 1.32's saved optimized graphs.
 */
import type { Graph, Node } from "../compiler/ir.ts";
import { nchwcBlockSize, ortBlocksConv } from "./ort-nchwc.ts";

/**
 * Whether ORT blocks this Conv of the file, and so takes a HardSwish after it whole.
 * `isConstant`: whether a value is a constant to ORT's NCHWc rewrite (not a float16 model's
 * initializer cast in every request, ort-fp16.ts).
 */
export function convTakesHardSwish(conv: Node, dims: (value: string) => readonly number[] | undefined, isConstant: (value: string) => boolean, block: number): boolean {
  const [w, bias] = [conv.inputs[1] ?? "", conv.inputs[2]];
  const group = Number(conv.attrs.get("group") ?? 1);
  return ortBlocksConv(isConstant(w) ? dims(w) : undefined, group, !bias || isConstant(bias), block)?.blocked ?? false;
}

/** `n` as ORT runs it: a HardSwish the conv before it cannot take whole (`takesWhole`) is its function body. */
export function asFunctionBody(n: Node, producer: ReadonlyMap<string, Node>, takesWhole: (conv: Node) => boolean): Node[] {
  const [x, y] = [n.inputs[0], n.outputs[0]];
  if (n.opType !== "HardSwish" || !x || !y) return [n];
  const conv = producer.get(x);
  if (conv?.opType === "Conv" && takesWhole(conv)) return [n];
  const hs = `${y}#HardSigmoid`;
  return [
    { opType: "HardSigmoid", name: hs, inputs: [x], outputs: [hs], attrs: new Map([["alpha", 1 / 6], ["beta", 0.5]]) },
    { opType: "Mul", name: y, inputs: [x, hs], outputs: [y], attrs: new Map() },
  ];
}

/** The graph with every HardSwish ORT runs as its body expanded (a float32 model; ort-fp16.ts does its own). */
export function withOrtFunctionBodies(g: Graph, block = nchwcBlockSize()): Graph {
  if (!g.nodes.some((n) => n.opType === "HardSwish")) return g;
  const producer = new Map(g.nodes.flatMap((n) => n.outputs.map((o) => [o, n] as const)));
  const takesWhole = (conv: Node) => convTakesHardSwish(conv, (v) => g.consts.get(v)?.dims, (v) => g.consts.has(v), block);
  return { ...g, nodes: g.nodes.flatMap((n) => asFunctionBody(n, producer, takesWhole)) };
}
