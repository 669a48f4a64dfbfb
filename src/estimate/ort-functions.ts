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
import type { ConstTensor, Graph, Node } from "../compiler/ir.ts";
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

/** HardSigmoid's alpha and beta in HardSwish's body (torch writes alpha as float32's 1/6). */
const isHardSwishGate = (n: Node): boolean =>
  n.opType === "HardSigmoid" && Math.abs(Number(n.attrs.get("alpha") ?? 0.2) - 1 / 6) < 1e-6 && Number(n.attrs.get("beta") ?? 0.5) === 0.5;

/**
 * The body written out in the file, `Mul(x, HardSigmoid(x, 1/6, 0.5))` (torch's exporter below
 * opset 14 has no HardSwish), as one HardSwish node where the conv writing x takes it whole: ORT
 * fuses the file's pair as it fuses the inlined body. Only where x has no other reader and the
 * gate no reader but the Mul (a third reader keeps the pair, as above). mobilenet_v3_small at
 * opset 13: ORT's block at batch 8 was 20 % under the replay's, which kept the pair's gate.
 */
export function contractHardSwishBodies(g: Graph, takesWhole: (conv: Node) => boolean, graphOutputs: ReadonlySet<string>): Graph {
  const gates = g.nodes.filter(isHardSwishGate);
  if (gates.length === 0) return g;
  const producer = new Map(g.nodes.flatMap((n) => n.outputs.map((o) => [o, n] as const)));
  const readers = new Map<string, Node[]>();
  for (const n of g.nodes) for (const i of new Set(n.inputs)) if (i) readers.set(i, [...(readers.get(i) ?? []), n]);
  const replaced = new Map<Node, Node>();
  const dropped = new Set<Node>();
  for (const gate of gates) {
    const [x, h] = [gate.inputs[0], gate.outputs[0]];
    if (!x || !h || graphOutputs.has(x) || graphOutputs.has(h)) continue;
    const conv = producer.get(x);
    const [mul] = readers.get(h) ?? [];
    const xReaders = readers.get(x) ?? [];
    if (conv?.opType !== "Conv" || !mul || (readers.get(h) ?? []).length !== 1 || mul.opType !== "Mul" || xReaders.length !== 2 || !xReaders.includes(mul)) continue;
    if (!(mul.inputs.length === 2 && mul.inputs.includes(x) && mul.inputs.includes(h)) || !takesWhole(conv)) continue;
    dropped.add(gate);
    replaced.set(mul, { ...mul, opType: "HardSwish", inputs: [x], attrs: new Map() });
  }
  if (dropped.size === 0) return g;
  return { ...g, nodes: g.nodes.filter((n) => !dropped.has(n)).map((n) => replaced.get(n) ?? n) };
}

/**
 * The graph with HardSwish as ORT runs it (a float32 model; ort-fp16.ts does its own): whole after
 * a conv that takes it, whether the file wrote the op or its body; as its body everywhere else.
 */
export function withOrtFunctionBodies(g: Graph, block = nchwcBlockSize()): Graph {
  // An Identity of an initializer is that constant to ORT (torch's opset-13 exports alias shared biases so).
  const identityOf = new Map(g.nodes.filter((n) => n.opType === "Identity" && n.inputs[0] && n.outputs[0]).map((n) => [n.outputs[0]!, n.inputs[0]!]));
  const constOf = (v: string, hops = 0): ConstTensor | undefined => g.consts.get(v) ?? (identityOf.has(v) && hops < 8 ? constOf(identityOf.get(v)!, hops + 1) : undefined);
  const takesWhole = (conv: Node) => convTakesHardSwish(conv, (v) => constOf(v)?.dims, (v) => constOf(v) !== undefined, block);
  const contracted = contractHardSwishBodies(g, takesWhole, new Set(g.outputs));
  if (!contracted.nodes.some((n) => n.opType === "HardSwish")) return contracted;
  const producer = new Map(contracted.nodes.flatMap((n) => n.outputs.map((o) => [o, n] as const)));
  return { ...contracted, nodes: contracted.nodes.flatMap((n) => asFunctionBody(n, producer, takesWhole)) };
}
