/**
 * Graph rewrites after inference: BatchNormalization folded into the preceding Conv (or
 * split into Mul + Add), and Relu fused into a preceding Conv/Gemm. Both only when the
 * intermediate tensor has no other reader, so no observable value disappears.
 */
import type { ConstTensor, LNode } from "./ir.ts";
import { mk } from "./fold-math.ts";
import type { Inferred } from "./infer.ts";

function uniqueName(inf: Inferred, base: string): string {
  let name = base;
  for (let k = 1; inf.consts.has(name) || inf.shapes.has(name); k++) name = `${base}_${k}`;
  return name;
}

function readers(inf: Inferred, name: string): number {
  let n = inf.outputs.filter((o) => o === name).length;
  for (const node of inf.nodes) n += node.inputs.filter((i) => i === name).length;
  return n;
}

/** Producer of a tensor if that tensor is read only once (by the node being rewritten). */
function soleProducer(inf: Inferred, name: string, ops: string[]): LNode | undefined {
  if (readers(inf, name) !== 1) return undefined;
  const p = inf.nodes.find((n) => n.outputs[0] === name);
  return p && ops.includes(p.op) ? p : undefined;
}

/** Per-channel scale s = gamma / sqrt(var + eps) and shift = beta - mean * s. */
function bnAffine(inf: Inferred, bn: LNode): { s: Float32Array; shift: Float32Array } {
  const [gamma, beta, mean, variance] = bn.inputs.slice(1, 5).map((n) => inf.consts.get(n)!.data) as Float32Array[];
  const eps = bn.attrs.epsilon as number;
  const c = gamma!.length;
  const s = new Float32Array(c), shift = new Float32Array(c);
  for (let i = 0; i < c; i++) {
    // Computed in double precision, rounded once into float32.
    const si = gamma![i]! / Math.sqrt(variance![i]! + eps);
    s[i] = si;
    shift[i] = beta![i]! - mean![i]! * si;
  }
  return { s, shift };
}

export function foldBatchNorm(inf: Inferred): void {
  const out: LNode[] = [];
  for (const bn of inf.nodes) {
    if (bn.op !== "BatchNormalization") {
      out.push(bn);
      continue;
    }
    const x = bn.inputs[0]!;
    const { s, shift } = bnAffine(inf, bn);
    const conv = soleProducer(inf, x, ["Conv"]);
    if (conv && conv.attrs.activation === "none") {
      const w = inf.consts.get(conv.inputs[1]!)!;
      const perOut = w.data.length / s.length;
      const w2 = new Float32Array(w.data.length);
      for (let i = 0; i < w.data.length; i++) w2[i] = w.data[i]! * s[Math.floor(i / perOut)]!;
      const b = conv.inputs[2] ? inf.consts.get(conv.inputs[2])!.data : new Float32Array(s.length);
      const b2 = s.map((si, m) => b[m]! * si + shift[m]!);
      conv.inputs[1] = setConst(inf, `${conv.inputs[1]}.bnfold`, { isFloat: true, dims: [...w.dims], data: w2 });
      conv.inputs[2] = setConst(inf, `${conv.name}.bias.bnfold`, { isFloat: true, dims: [s.length], data: b2 });
      conv.outputs[0] = bn.outputs[0]!;
      inf.shapes.delete(x);
      continue;
    }
    // Standalone: y = x * s + shift with weights shaped [C, 1, ...] to broadcast per channel.
    const shape = inf.shapes.get(x)!;
    const wdims = [shape[1]!, ...shape.slice(2).map(() => 1)];
    const mid = uniqueName(inf, `${bn.outputs[0]}.bnscaled`);
    inf.shapes.set(mid, shape);
    inf.dtypes.set(mid, "float32");
    const sw = setConst(inf, `${bn.name}.scale`, mk(true, wdims, s));
    const bw = setConst(inf, `${bn.name}.shift`, mk(true, wdims, shift));
    out.push({ op: "Mul", name: `${bn.name}.mul`, inputs: [x, sw], outputs: [mid], attrs: {} });
    out.push({ op: "Add", name: `${bn.name}.add`, inputs: [mid, bw], outputs: [bn.outputs[0]!], attrs: {} });
  }
  inf.nodes = out;
}

function setConst(inf: Inferred, base: string, t: ConstTensor): string {
  const name = uniqueName(inf, base);
  inf.consts.set(name, t);
  return name;
}

export function fuseRelu(inf: Inferred): void {
  const out: LNode[] = [];
  for (const r of inf.nodes) {
    const p = r.op === "Relu" ? soleProducer(inf, r.inputs[0]!, ["Conv", "Gemm"]) : undefined;
    if (p && p.attrs.activation === "none") {
      inf.shapes.delete(p.outputs[0]!);
      p.outputs[0] = r.outputs[0]!;
      p.attrs.activation = "relu";
      continue;
    }
    out.push(r);
  }
  inf.nodes = out;
}

/** Drop nodes none of whose outputs reach a graph output: they would cost time and arena. */
export function pruneDead(inf: Inferred): string[] {
  const needed = new Set(inf.outputs);
  const keep: LNode[] = [];
  const dropped: string[] = [];
  for (let i = inf.nodes.length - 1; i >= 0; i--) {
    const n = inf.nodes[i]!;
    if (n.outputs.some((o) => needed.has(o))) {
      keep.push(n);
      for (const x of n.inputs) if (x) needed.add(x);
    } else {
      dropped.push(n.name);
      for (const o of n.outputs) inf.shapes.delete(o);
    }
  }
  inf.nodes = keep.reverse();
  return dropped;
}
