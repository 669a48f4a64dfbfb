/**
 * The graph rewrites of ONNX Runtime's optimization levels that change which tensors exist, as
 * the memory-pattern replay (ort-pattern.ts) needs them: a fused node writes one output where
 * the file has two tensors. Each rule was found by comparing ORT's profile and the block it
 * asks for with the replay's (docs/memory.md, "ORT's activations").
 *
 * ORT fuses nothing whose intermediate tensor is a graph output (the caller must get it): a
 * graph output counts as one more reader here, so no rule takes it.
 */
import type { LNode } from "../compiler/ir.ts";
import { ortTransformerFusions } from "./ort-fusions-transformer.ts";

/** Every node reading each tensor; a graph output gets a reader that no rule matches. */
export function readersOf(nodes: readonly LNode[], graphOutputs: ReadonlySet<string>): Map<string, LNode[]> {
  const readers = new Map<string, LNode[]>();
  for (const n of nodes) for (const i of n.inputs) if (i) readers.set(i, [...(readers.get(i) ?? []), n]);
  const caller = { op: "(graph output)", inputs: [], outputs: [] } as unknown as LNode;
  for (const o of graphOutputs) readers.set(o, [...(readers.get(o) ?? []), caller]);
  return readers;
}

/**
 * ORT's extended optimizations (python-ort's and node-ort's default level, "all") fuse a Conv
 * whose only reader is an Add (a residual) into one node that sums into the Add's other input
 * in place when that input dies there. Measured on resnet-mini: its pattern is 12.0 MiB at
 * batch 64 with basic optimizations only, 8.0 with them, as this rule predicts.
 */
export const CONV_SUM = "ort:ConvSum";

function fuseConvSum(nodes: readonly LNode[], graphOutputs: ReadonlySet<string>): LNode[] {
  const readers = readersOf(nodes, graphOutputs);
  const fusedConvs = new Set<LNode>();
  /** The Add a Conv is fused into → the fused node, which runs in the Add's place. */
  const atAdd = new Map<LNode, LNode>();
  for (const n of nodes) {
    if (n.op !== "Conv" || !n.outputs[0]) continue;
    const r = readers.get(n.outputs[0]) ?? [];
    const add = r[0];
    if (r.length !== 1 || add!.op !== "Add" || atAdd.has(add!) || add!.inputs.length !== 2) continue;
    const other = add!.inputs.find((x) => x !== n.outputs[0]);
    if (!other) continue;
    atAdd.set(add!, { ...n, op: CONV_SUM, inputs: [...n.inputs, other], outputs: [add!.outputs[0]!] });
    fusedConvs.add(n);
  }
  // The fused node runs where the Add ran: the other input may be computed after the Conv.
  return nodes.filter((n) => !fusedConvs.has(n)).map((n) => atAdd.get(n) ?? n);
}

/**
 * ORT's level "all" fuses x * Sigmoid(x) (SiLU, as torchvision's EfficientNets export it) and
 * x * Sigmoid(alpha * x) (CLIP's quick_gelu, alpha a scalar constant) into one QuickGelu node:
 * neither the sigmoid's output nor the scaled input is ever a tensor. Seen in ORT's profile of
 * efficientnet_b0 (49 QuickGelu, no Sigmoid left); without this rule its simulated pattern at
 * batch 8 was 116.4 MiB against the 98.0 ORT asks for. With alpha: a CLIP vision tower's pattern
 * was 1.32x ORT's at batch 1 before the rule took it.
 */
export const QUICK_GELU = "ort:QuickGelu";

function fuseQuickGelu(nodes: readonly LNode[], graphOutputs: ReadonlySet<string>, isScalarConst: (name: string) => boolean): LNode[] {
  const readers = readersOf(nodes, graphOutputs);
  const producer = new Map<string, LNode>();
  for (const n of nodes) for (const o of n.outputs) if (o) producer.set(o, n);
  const fusedAway = new Set<LNode>();
  const atMul = new Map<LNode, LNode>();
  for (const n of nodes) {
    const s = n.inputs[0];
    if (n.op !== "Sigmoid" || !s || !n.outputs[0]) continue;
    const r = readers.get(n.outputs[0]) ?? [];
    const mul = r[0];
    if (r.length !== 1 || mul!.op !== "Mul" || mul!.inputs.length !== 2 || atMul.has(mul!)) continue;
    // x * Sigmoid(alpha * x): the scaling Mul read by the Sigmoid alone.
    const scale = producer.get(s);
    const alphaAt = scale?.op === "Mul" && scale.inputs.length === 2 && readers.get(s)?.length === 1 ? scale.inputs.findIndex(isScalarConst) : -1;
    const x = alphaAt >= 0 ? scale!.inputs[1 - alphaAt]! : s;
    if (!mul!.inputs.includes(x)) continue;
    atMul.set(mul!, { ...mul!, op: QUICK_GELU, inputs: [x], outputs: [mul!.outputs[0]!] });
    fusedAway.add(n);
    if (alphaAt >= 0) fusedAway.add(scale!);
  }
  return nodes.filter((n) => !fusedAway.has(n)).map((n) => atMul.get(n) ?? n);
}

/**
 * Activations ORT's level "all" folds into the Conv before them (FusedConv, and its NCHWc
 * convolution): the Conv writes the activation's output, no tensor between. For those that run
 * in place anyway (Relu, Clip) it changes nothing; HardSwish runs out of place, so it matters
 * for the MobileNetV3s: ORT's profile of mobilenet_v3_large shows no HardSwish left (21 in the
 * file), and its pattern at batch 8 is 30.6 MiB, where the unfused replay said 36.8.
 *
 * A Gemm and the activation after it alike (ORT's GemmActivationFusion, FusedGemm; its own list of
 * activations). Where the planner cannot tell the Gemm's output shape (OPT reshapes its tokens
 * to rows at run time before fc1), an in-place Relu gets no buffer of its input's, so unfused it
 * is a tensor of its own: OPT's replayed pattern was 1.86x ORT's block (hidden 128, ffn 3072).
 */
const CONV_ACTIVATIONS = new Set(["Relu", "Clip", "Sigmoid", "Tanh", "LeakyRelu", "HardSigmoid", "HardSwish"]);
const GEMM_ACTIVATIONS = new Set(["Elu", "HardSigmoid", "LeakyRelu", "Relu", "Selu", "Sigmoid", "Softplus", "Softsign", "Tanh", "ThresholdedRelu"]);

function fuseActivationIntoConvOrGemm(nodes: readonly LNode[], graphOutputs: ReadonlySet<string>, isConst: (name: string) => boolean): LNode[] {
  const readers = readersOf(nodes, graphOutputs);
  const fusedActs = new Set<LNode>();
  const fused = new Map<LNode, LNode>();
  for (const n of nodes) {
    const activations = n.op === "Conv" || n.op === CONV_SUM ? CONV_ACTIVATIONS : n.op === "Gemm" ? GEMM_ACTIVATIONS : null;
    if (!activations || !n.outputs[0]) continue;
    const r = readers.get(n.outputs[0]) ?? [];
    const act = r[0];
    if (r.length !== 1 || !activations.has(act!.op) || act!.inputs[0] !== n.outputs[0] || !act!.outputs[0]) continue;
    // A Clip's bounds must be constants (ORT reads them when it fuses): a float16 model's run-time Casts of them are not (ort-fp16.ts).
    if (act!.op === "Clip" && act!.inputs.slice(1).some((b) => b && !isConst(b))) continue;
    fused.set(n, { ...n, outputs: [act!.outputs[0]] });
    fusedActs.add(act!);
  }
  return nodes.filter((n) => !fusedActs.has(n)).map((n) => fused.get(n) ?? n);
}

/**
 * The rewrites in ORT's order: the transformer chains (Gelu, FastGelu, their bias, scaled
 * MatMuls: ort-fusions-transformer.ts), residual sums into Convs, activations into Convs and
 * Gemms, then SiLU. `isConst`: whether a tensor is a constant (an initializer or a folded value).
 */
export function ortFusions(nodes: readonly LNode[], graphOutputs: readonly string[], isConst: (name: string) => boolean = () => false, constDims: (name: string) => readonly number[] | undefined = () => undefined, rankOf: (name: string) => number | undefined = () => undefined): LNode[] {
  const outs = new Set(graphOutputs);
  // ORT's scalar: a constant of rank 0, or of one element on one axis.
  const isScalarConst = (n: string) => {
    const d = isConst(n) ? constDims(n) : undefined;
    return !!d && (d.length === 0 || (d.length === 1 && d[0] === 1));
  };
  return fuseQuickGelu(fuseActivationIntoConvOrGemm(fuseConvSum(ortTransformerFusions(nodes, outs, { isConst, isScalarConst, constDims, rankOf }), outs), outs, isConst), outs, isScalarConst);
}
