/**
 * ONNX Runtime's level-"extended" fusions of the op chains transformers export (its
 * gelu_fusion, bias_gelu_fusion, fast_gelu_fusion and matmul_scale_fusion), as the memory
 * replay (ort-pattern.ts) needs them: each fused chain writes one tensor where the file has
 * several. Checked against ORT's own optimized graphs (`SessionOptions.optimized_model_filepath`):
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

interface Graphish {
  producer: Map<string, LNode>;
  readers: Map<string, LNode[]>;
  isConst: (name: string) => boolean;
}

function index(nodes: readonly LNode[], graphOutputs: ReadonlySet<string>, isConst: (n: string) => boolean): Graphish {
  const producer = new Map<string, LNode>();
  const readers = new Map<string, LNode[]>();
  for (const n of nodes) {
    for (const o of n.outputs) if (o) producer.set(o, n);
    for (const i of n.inputs) if (i) readers.set(i, [...(readers.get(i) ?? []), n]);
  }
  const caller = { op: "(graph output)", inputs: [], outputs: [] } as unknown as LNode;
  for (const o of graphOutputs) readers.set(o, [...(readers.get(o) ?? []), caller]);
  return { producer, readers, isConst };
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

/** The transformer fusions in ORT's order: Gelu (erf), a MatMul's transposed inputs, Gelu's bias, FastGelu (tanh), the scaled MatMuls. */
export function ortTransformerFusions(nodes: readonly LNode[], graphOutputs: ReadonlySet<string>, isConst: (n: string) => boolean, isScalarConst: (n: string) => boolean = () => false): LNode[] {
  let ns = collapse(nodes, erfGelus(nodes, index(nodes, graphOutputs, isConst)));
  ns = transposedMatMuls(ns, index(ns, graphOutputs, isConst));
  for (const rule of [biasGelus, tanhGelus, scaledMatMuls]) ns = collapse(ns, rule(ns, index(ns, graphOutputs, isConst)));
  return inputScaledMatMuls(ns, index(ns, graphOutputs, isConst), isScalarConst);
}
