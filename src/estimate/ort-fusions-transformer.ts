/**
 * ONNX Runtime's level-"extended" fusions of the op chains transformers export (its
 * gelu_fusion, layer_norm_fusion, bias_gelu_fusion, fast_gelu_fusion and matmul_scale_fusion),
 * as the memory replay (ort-pattern.ts) needs them: each fused chain writes one tensor where the
 * file has several. Checked against ORT's own optimized graphs (`SessionOptions.optimized_model_filepath`):
 * BERT-base and DistilBERT keep 2 BiasGelu and 2 FusedMatMul for 2 layers and no Erf, GPT-2
 * 2 FastGelu and no Tanh, ConvNeXt-tiny 18 BiasGelu. Without them the replay held every Gelu's
 * four intermediates (each as large as the feed-forward layer's 4x-wide output): ConvNeXt-tiny's
 * python-ort steady RSS was estimated +21 % at batches 1, 8 (bench:estimate), BERT-base's +12 %.
 *
 * A chain is fused only where each intermediate has no reader outside it (a graph output counts
 * as one), as ORT requires.
 */
import type { LNode } from "../compiler/ir.ts";

export const GELU = "ort:Gelu";
export const FAST_GELU = "ort:FastGelu";
export const BIAS_GELU = "ort:BiasGelu";
export const FUSED_MATMUL = "ort:FusedMatMul";
export const LAYER_NORM = "ort:LayerNormalization";
export const SIMPLIFIED_LAYER_NORM = "ort:SimplifiedLayerNormalization";

/** What the rules ask of a tensor beyond its producer and readers: a constant's dims, a value's rank. */
export interface TensorFacts {
  isConst: (name: string) => boolean;
  isScalarConst?: (name: string) => boolean;
  constDims?: (name: string) => readonly number[] | undefined;
  rankOf?: (name: string) => number | undefined;
}

interface Graphish extends TensorFacts {
  producer: Map<string, LNode>;
  readers: Map<string, LNode[]>;
}

function index(nodes: readonly LNode[], graphOutputs: ReadonlySet<string>, facts: TensorFacts): Graphish {
  const producer = new Map<string, LNode>();
  const readers = new Map<string, LNode[]>();
  for (const n of nodes) {
    for (const o of n.outputs) if (o) producer.set(o, n);
    for (const i of n.inputs) if (i) readers.set(i, [...(readers.get(i) ?? []), n]);
  }
  const caller = { op: "(graph output)", inputs: [], outputs: [] } as unknown as LNode;
  for (const o of graphOutputs) readers.set(o, [...(readers.get(o) ?? []), caller]);
  return { ...facts, producer, readers };
}

/** The one node reading `t`, if exactly one does (a graph output has a second reader). */
const soleReader = (g: Graphish, t: string | undefined, op: string): LNode | undefined => {
  const r = t ? g.readers.get(t) : undefined;
  return r?.length === 1 && r[0]!.op === op ? r[0] : undefined;
};
/** A binary node's other input than `known` (`known` itself where it is both), if `known` is one of its two. */
const other = (n: LNode, known: string): string | undefined => (n.inputs.length === 2 && n.inputs.includes(known) ? n.inputs.find((i) => i !== known) ?? known : undefined);
const constOperand = (g: Graphish, n: LNode | undefined, x: string): boolean => !!n && n.inputs.length === 2 && n.inputs.includes(x) && g.isConst(other(n, x)!);

/** Replaces each chain (its nodes) with one node placed where the chain's last node ran. */
function collapse(nodes: readonly LNode[], chains: ReadonlyArray<{ nodes: LNode[]; fused: LNode }>): LNode[] {
  const gone = new Set<LNode>();
  const at = new Map<LNode, LNode>();
  for (const c of chains) {
    for (const n of c.nodes) gone.add(n);
    at.set(c.nodes.at(-1)!, c.fused);
  }
  return nodes.flatMap((n) => (at.has(n) ? [at.get(n)!] : gone.has(n) ? [] : [n]));
}

/**
 * x * 0.5 * (1 + erf(x / sqrt 2)): Div (or Mul) by a constant, Erf, Add a constant, then the
 * product with x and 0.5 in either order (torch: Mul(x, ·) then Mul(·, 0.5); or Mul(x, 0.5)
 * beside, then their product).
 */
function erfGelus(nodes: readonly LNode[], g: Graphish): Array<{ nodes: LNode[]; fused: LNode }> {
  const out: Array<{ nodes: LNode[]; fused: LNode }> = [];
  for (const e of nodes) {
    if (e.op !== "Erf" || !e.inputs[0] || !e.outputs[0]) continue;
    const d = g.producer.get(e.inputs[0]);
    if (!d || (d.op !== "Div" && d.op !== "Mul") || g.readers.get(e.inputs[0])?.length !== 1 || !g.isConst(d.inputs[1] ?? "")) continue;
    const x = d.inputs[0]!;
    const a = soleReader(g, e.outputs[0], "Add");
    if (!constOperand(g, a, e.outputs[0])) continue;
    const m1 = soleReader(g, a!.outputs[0], "Mul");
    if (!m1) continue;
    const m1o = other(m1, a!.outputs[0]!)!;
    let chain: LNode[] | undefined;
    if (m1o === x) {
      const m2 = soleReader(g, m1.outputs[0], "Mul");
      if (constOperand(g, m2, m1.outputs[0]!)) chain = [d, e, a!, m1, m2!];
    } else {
      const h = g.producer.get(m1o);
      if (h && h.op === "Mul" && constOperand(g, h, x) && g.readers.get(m1o)?.length === 1) chain = [d, h, e, a!, m1];
    }
    if (chain) out.push({ nodes: chain, fused: { ...chain.at(-1)!, op: GELU, inputs: [x], outputs: [chain.at(-1)!.outputs[0]!] } });
  }
  return out;
}

/**
 * 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))) (GPT-2's NewGELU): Pow(x, 3), Mul, Add
 * x, Mul, Tanh, Add 1, then the product with x * 0.5 (or with x, then 0.5).
 */
function tanhGelus(nodes: readonly LNode[], g: Graphish): Array<{ nodes: LNode[]; fused: LNode }> {
  const out: Array<{ nodes: LNode[]; fused: LNode }> = [];
  for (const t of nodes) {
    if (t.op !== "Tanh" || !t.inputs[0] || !t.outputs[0]) continue;
    const s = g.producer.get(t.inputs[0]);
    if (!s || s.op !== "Mul" || g.readers.get(t.inputs[0])?.length !== 1) continue;
    const u = s.inputs.find((i) => !g.isConst(i));
    const add = u ? g.producer.get(u) : undefined;
    if (!u || !add || add.op !== "Add" || !constOperand(g, s, u) || g.readers.get(u)?.length !== 1) continue;
    // Add(x, c * x^3): which input is x is the one the cube is of.
    let chain: LNode[] | undefined;
    let x: string | undefined;
    for (const v of add.inputs) {
      const mc = g.producer.get(v);
      const cand = other(add, v);
      if (!mc || mc.op !== "Mul" || !cand || g.readers.get(v)?.length !== 1) continue;
      const w = mc.inputs.find((i) => !g.isConst(i));
      const pow = w ? g.producer.get(w) : undefined;
      if (pow && pow.op === "Pow" && pow.inputs[0] === cand && g.readers.get(w!)?.length === 1) {
        x = cand;
        chain = [pow, mc, add, s, t];
      }
    }
    if (!chain || !x) continue;
    const a1 = soleReader(g, t.outputs[0], "Add");
    if (!constOperand(g, a1, t.outputs[0])) continue;
    const m = soleReader(g, a1!.outputs[0], "Mul");
    if (!m) continue;
    const mo = other(m, a1!.outputs[0]!)!;
    const h = g.producer.get(mo);
    if (h && h.op === "Mul" && constOperand(g, h, x) && g.readers.get(mo)?.length === 1) chain = [h, ...chain, a1!, m];
    else if (mo === x) {
      const m2 = soleReader(g, m.outputs[0], "Mul");
      if (!constOperand(g, m2, m.outputs[0]!)) continue;
      chain = [...chain, a1!, m, m2!];
    } else continue;
    out.push({ nodes: chain, fused: { ...chain.at(-1)!, op: FAST_GELU, inputs: [x], outputs: [chain.at(-1)!.outputs[0]!] } });
  }
  return out;
}

/**
 * A ReduceMean's axes as negative numbers if they are consecutive and end at the last axis, else
 * null. An axis given as positive needs the rank: the rank of the chain's input, for every
 * ReduceMean of the chain (as ORT takes it).
 */
function trailingAxes(mean: LNode, rank: number | undefined): number[] | null {
  const axes = mean.attrs.axes as number[] | undefined;
  if (!axes?.length) return null;
  if (axes.some((a) => a >= 0) && rank === undefined) return null;
  const neg = axes.map((a) => (a >= 0 ? a - rank! : a)).sort((a, b) => a - b);
  return neg.every((a, i) => i === 0 || a === neg[i - 1]! + 1) && neg.at(-1) === -1 ? neg : null;
}
/** The one input of `n` that is a 1-D constant (a LayerNorm's scale or bias over one axis), if any. */
const vectorConst = (n: LNode, g: Graphish): string | undefined => n.inputs.filter((i) => g.isConst(i) && g.constDims?.(i)?.length === 1).at(-1);
/** `t`'s readers if there are exactly `count` (a graph output has one more: ORT's CheckOutputEdges). */
const readersExactly = (g: Graphish, t: string | undefined, count: number): LNode[] | undefined => {
  const r = t ? g.readers.get(t) : undefined;
  return r?.length === count ? r : undefined;
};
const producedBy = (g: Graphish, t: string | undefined, op: string): LNode | undefined => {
  const p = t ? g.producer.get(t) : undefined;
  return p?.op === op ? p : undefined;
};

/**
 * LayerNorm from its primitives, as exporters before opset 17 and hand-written norms emit it
 * (I-BERT's IntLayerNorm unquantized, for one): m = ReduceMean(x), d = x - m, then
 * d / Sqrt(ReduceMean(Pow(d, 2)) + eps) * scale + bias, over the same trailing axis, scale and
 * bias 1-D. ORT's layer_norm_fusion makes it one LayerNormalization, whose output alone is
 * written: unfused, the replay held the mean, the difference, its square and the quotient (each
 * as large as x but the means), and I-BERT's requests of a stale pattern (ort-arena.ts) took
 * their tensors in an order ORT never runs. Each intermediate has the readers the chain gives it
 * and no other, as ORT requires. (Its variants with Casts, for float16 and Apex, are not replayed.)
 */
function layerNorms(nodes: readonly LNode[], g: Graphish): Array<{ nodes: LNode[]; fused: LNode }> {
  const out: Array<{ nodes: LNode[]; fused: LNode }> = [];
  for (const mean of nodes) {
    // (A graph output among its readers is no Sub: such a mean is never fused.)
    if (mean.op !== "ReduceMean" || !mean.inputs[0] || !mean.outputs[0]) continue;
    const x = mean.inputs[0];
    const subs = g.readers.get(mean.outputs[0]) ?? [];
    // Older torch exports subtract the mean twice, once for the square and once for the quotient.
    if ((subs.length !== 1 && subs.length !== 2) || subs.some((s) => s.op !== "Sub" || s.inputs[0] !== x || s.inputs[1] !== mean.outputs[0])) continue;
    const [sub, dup] = subs as [LNode, LNode | undefined];
    if (!readersExactly(g, sub.outputs[0], dup ? 1 : 2) || (dup && !readersExactly(g, dup.outputs[0], 1))) continue;
    const div = [...(g.readers.get(sub.outputs[0]!) ?? []), ...(dup ? (g.readers.get(dup.outputs[0]!) ?? []) : [])].find((n) => n.op === "Div");
    if (!div || !readersExactly(g, div.outputs[0], 1) || !subs.some((s) => s.outputs[0] === div.inputs[0])) continue;
    const sqrt = producedBy(g, div.inputs[1], "Sqrt");
    const addEps = sqrt && readersExactly(g, sqrt.outputs[0], 1) ? producedBy(g, sqrt.inputs[0], "Add") : undefined;
    if (!addEps || !readersExactly(g, addEps.outputs[0], 1)) continue;
    const variance = addEps.inputs.map((i) => producedBy(g, i, "ReduceMean")).find((n) => n);
    const pow = variance && readersExactly(g, variance.outputs[0], 1) ? producedBy(g, variance.inputs[0], "Pow") : undefined;
    if (!pow || !readersExactly(g, pow.outputs[0], 1) || !subs.some((s) => s.outputs[0] === pow.inputs[0])) continue;
    const mul = soleReader(g, div.outputs[0], "Mul");
    const add = soleReader(g, mul?.outputs[0], "Add");
    if (!mul || !add) continue;
    const rank = g.rankOf?.(x);
    const axes = trailingAxes(mean, rank);
    if (!axes || axes.length !== 1 || JSON.stringify(trailingAxes(variance!, rank)) !== JSON.stringify(axes)) continue;
    const scale = vectorConst(mul, g);
    const bias = vectorConst(add, g);
    if (!scale || !bias || g.constDims!(scale)![0] !== g.constDims!(bias)![0]) continue;
    const chain = [mean, sub, ...(dup ? [dup] : []), pow, variance!, addEps, sqrt!, div, mul, add];
    out.push({ nodes: chain, fused: { ...add, op: LAYER_NORM, inputs: [x, scale, bias], outputs: [add.outputs[0]!], attrs: { axis: axes[0]! } } });
  }
  return out;
}

/**
 * RMSNorm from its primitives written as a quotient: x / Sqrt(ReduceMean(Pow(x, 2)) + eps) * scale
 * (ORT's SimplifiedLayerNormFusion; on its CPU only where no Cast lies between). transformers'
 * Llama and T5 norms multiply by Rsqrt instead, which this rule leaves alone, as ORT does.
 */
function simplifiedLayerNorms(nodes: readonly LNode[], g: Graphish): Array<{ nodes: LNode[]; fused: LNode }> {
  const out: Array<{ nodes: LNode[]; fused: LNode }> = [];
  for (const pow of nodes) {
    if (pow.op !== "Pow" || !pow.inputs[0]) continue;
    const x = pow.inputs[0];
    const mean = soleReader(g, pow.outputs[0], "ReduceMean");
    const addEps = soleReader(g, mean?.outputs[0], "Add");
    const sqrt = soleReader(g, addEps?.outputs[0], "Sqrt");
    const div = soleReader(g, sqrt?.outputs[0], "Div");
    const mul = soleReader(g, div?.outputs[0], "Mul");
    if (!mean || !addEps || !sqrt || !div || !mul || div.inputs[0] !== x || div.inputs[1] !== sqrt.outputs[0]) continue;
    const axes = trailingAxes(mean, g.rankOf?.(x));
    const scale = vectorConst(mul, g);
    if (!axes || axes.length !== 1 || !scale) continue;
    const chain = [pow, mean, addEps, sqrt, div, mul];
    out.push({ nodes: chain, fused: { ...mul, op: SIMPLIFIED_LAYER_NORM, inputs: [x, scale], outputs: [mul.outputs[0]!], attrs: { axis: axes[0]! } } });
  }
  return out;
}

/**
 * Gelu after Add(a, 1-D constant bias), the sum read by the Gelu alone: BiasGelu(a, bias). The
 * Gelu: one fused from erf (above), or ONNX's own (opset 20, exact: what torch exports nn.GELU
 * as from that opset on).
 */
function biasGelus(nodes: readonly LNode[], g: Graphish): Array<{ nodes: LNode[]; fused: LNode }> {
  const out: Array<{ nodes: LNode[]; fused: LNode }> = [];
  for (const n of nodes) {
    const exactOnnxGelu = n.op === "Gelu" && (n.attrs.approximate ?? "none") === "none";
    if ((n.op !== GELU && !exactOnnxGelu) || !n.inputs[0]) continue;
    const add = g.producer.get(n.inputs[0]);
    if (!add || add.op !== "Add" || add.inputs.length !== 2 || g.readers.get(n.inputs[0])?.length !== 1) continue;
    const a = add.inputs.find((i) => !g.isConst(i));
    if (!a || !add.inputs.some((i) => g.isConst(i))) continue;
    out.push({ nodes: [add, n], fused: { ...n, op: BIAS_GELU, inputs: [a, ...add.inputs.filter((i) => i !== a)] } });
  }
  return out;
}

/**
 * Each MatMul (or FusedMatMul) an input of which `absorb` takes into the FusedMatMul: `absorb` is
 * given the input's producer and returns what the FusedMatMul reads instead, or undefined. The
 * producer goes where every reader of its output was such a MatMul; with `soleReader`, a producer
 * is absorbed only where the MatMul is its one reader. None whose output is a graph output.
 */
function absorbIntoMatMuls(nodes: readonly LNode[], g: Graphish, absorb: (producer: LNode) => string | undefined, soleReader: boolean): LNode[] {
  const absorbed = new Map<LNode, number>();
  const rewritten = new Map<LNode, LNode>();
  for (const n of nodes) {
    if ((n.op !== "MatMul" && n.op !== FUSED_MATMUL) || n.inputs.length !== 2) continue;
    const inputs = n.inputs.map((x) => {
      const p = x ? g.producer.get(x) : undefined;
      const readers = x ? g.readers.get(x) ?? [] : [];
      const instead = p && !readers.some((r) => r.op === "(graph output)") && (!soleReader || readers.length === 1) ? absorb(p) : undefined;
      if (!instead) return x;
      absorbed.set(p!, (absorbed.get(p!) ?? 0) + 1);
      return instead;
    });
    if (inputs.some((x, i) => x !== n.inputs[i])) rewritten.set(n, { ...n, op: FUSED_MATMUL, inputs });
  }
  const gone = new Set([...absorbed].filter(([p, k]) => g.readers.get(p.outputs[0]!)?.length === k).map(([p]) => p));
  return nodes.flatMap((n) => (gone.has(n) ? [] : [rewritten.get(n) ?? n]));
}

/**
 * A MatMul input that is a Transpose of its last two axes (ORT's MatmulTransposeFusion): the
 * FusedMatMul reads the Transpose's input and transposes as it multiplies, and the Transpose goes
 * where every reader of its output was such a MatMul. SqueezeBERT's attention scores read the
 * query through one: the replay held a transposed copy (4 MiB at batch 64) ORT never makes.
 */
function transposedMatMuls(nodes: readonly LNode[], g: Graphish): LNode[] {
  return absorbIntoMatMuls(nodes, g, (t) => {
    const p = t.op === "Transpose" ? t.attrs.perm : undefined;
    if (!Array.isArray(p) || p.length < 2 || !t.inputs[0]) return undefined;
    const r = p.length;
    return p.every((x, i) => x === (i < r - 2 ? i : i === r - 2 ? r - 1 : r - 2)) ? t.inputs[0] : undefined;
  }, false);
}

/**
 * A MatMul input scaled by a scalar constant (Mul, or Div by it) that nothing else reads: ORT's
 * MatMulScaleFusion folds the scale into the FusedMatMul's alpha, so the scaled input is never a
 * tensor. ESM scales its query so before the scores; its optimized graph has FusedMatMul with
 * alpha 1/sqrt(32) and no Mul there.
 */
function inputScaledMatMuls(nodes: readonly LNode[], g: Graphish, isScalarConst: (n: string) => boolean): LNode[] {
  return absorbIntoMatMuls(nodes, g, (m) => {
    if ((m.op !== "Mul" && m.op !== "Div") || m.inputs.length !== 2) return undefined;
    // the scale's position: a Div's divisor, either side of a Mul
    const k = m.op === "Div" ? (isScalarConst(m.inputs[1]!) ? 1 : -1) : m.inputs.findIndex((i) => isScalarConst(i));
    return k < 0 ? undefined : m.inputs[1 - k];
  }, true);
}

/** MatMul (or a FusedMatMul) whose product is scaled by a constant (Mul or Div) read by nothing else: FusedMatMul writes the scaled product. */
function scaledMatMuls(nodes: readonly LNode[], g: Graphish): Array<{ nodes: LNode[]; fused: LNode }> {
  const out: Array<{ nodes: LNode[]; fused: LNode }> = [];
  for (const n of nodes) {
    if ((n.op !== "MatMul" && n.op !== FUSED_MATMUL) || !n.outputs[0]) continue;
    const r = g.readers.get(n.outputs[0]);
    const s = r?.length === 1 ? r[0] : undefined;
    if (!s || (s.op !== "Mul" && s.op !== "Div") || !constOperand(g, s, n.outputs[0]) || (s.op === "Div" && s.inputs[0] !== n.outputs[0])) continue;
    out.push({ nodes: [n, s], fused: { ...n, op: FUSED_MATMUL, outputs: [s.outputs[0]!] } });
  }
  return out;
}

/** The transformer fusions in ORT's order: Gelu (erf), LayerNorm and RMSNorm, a MatMul's transposed inputs, Gelu's bias, FastGelu (tanh), the scaled MatMuls. */
export function ortTransformerFusions(nodes: readonly LNode[], graphOutputs: ReadonlySet<string>, facts: TensorFacts): LNode[] {
  let ns = nodes;
  for (const rule of [erfGelus, layerNorms, simplifiedLayerNorms]) ns = collapse(ns, rule(ns, index(ns, graphOutputs, facts)));
  ns = transposedMatMuls(ns, index(ns, graphOutputs, facts));
  for (const rule of [biasGelus, tanhGelus, scaledMatMuls]) ns = collapse(ns, rule(ns, index(ns, graphOutputs, facts)));
  return inputScaledMatMuls(ns, index(ns, graphOutputs, facts), facts.isScalarConst ?? (() => false));
}
