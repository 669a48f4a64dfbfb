/**
 * Gelu from its primitives, into the plan's Gelu op (one pass instead of five to eight):
 *   erf form:  x * 0.5 * (1 + Erf(x / sqrt(2)))                         -> approximate "none"
 *   tanh form: 0.5 * x * (1 + Tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))  -> approximate "tanh"
 * (GPT-2's NewGELU). The final product of x, 0.5 and (1 + ...) is matched in any grouping.
 */
import { fuseAll, type GraphIndex, near, otherInput } from "./fuse-match.ts";
import type { Inferred } from "./infer.ts";
import type { LNode } from "./ir.ts";

interface Hit {
  nodes: LNode[];
  out: string;
}

/** The product x * 0.5 * p (any order) starting from p's reader. */
function halfProduct(g: GraphIndex, x: string, p: string): Hit | undefined {
  const m1 = g.soleReader(p, "Mul");
  const o = m1 && otherInput(m1, p);
  if (!m1 || !o) return undefined;
  if (near(g.scalar(o), 0.5) || o === x) {
    const m2 = g.soleReader(m1.outputs[0]!, "Mul");
    const o2 = m2 && otherInput(m2, m1.outputs[0]!);
    const ok = o2 !== undefined && (o === x ? near(g.scalar(o2), 0.5) : o2 === x);
    return ok ? { nodes: [m1, m2!], out: m2!.outputs[0]! } : undefined;
  }
  const h = g.producer(o, "Mul");
  if (!h || g.soleReader(o) !== m1 || !near(g.scalar(otherInput(h, x)), 0.5)) return undefined;
  return { nodes: [h, m1], out: m1.outputs[0]! };
}

/** 1 + t, with t read only there. */
function onePlus(g: GraphIndex, t: string): LNode | undefined {
  const a = g.soleReader(t, "Add");
  return a && near(g.scalar(otherInput(a, t)), 1) ? a : undefined;
}

function erfForm(g: GraphIndex, erf: LNode): { hit: Hit; x: string } | undefined {
  const u = erf.inputs[0]!;
  const pre = g.producer(u);
  if (!pre || g.soleReader(u) !== erf || pre.inputs.length !== 2) return undefined;
  const [x, c] = pre.inputs as [string, string];
  const ok = (pre.op === "Div" && near(g.scalar(c), Math.SQRT2)) || (pre.op === "Mul" && near(g.scalar(c), Math.SQRT1_2));
  const plus = ok ? onePlus(g, erf.outputs[0]!) : undefined;
  const prod = plus && halfProduct(g, x, plus.outputs[0]!);
  return prod ? { hit: { nodes: [pre, erf, plus!, ...prod.nodes], out: prod.out }, x } : undefined;
}

function tanhForm(g: GraphIndex, tanh: LNode): { hit: Hit; x: string } | undefined {
  const u = tanh.inputs[0]!;
  const scale = g.producer(u, "Mul");
  if (!scale || g.soleReader(u) !== tanh) return undefined;
  const v = scale.inputs.find((i) => near(g.scalar(otherInput(scale, i)), Math.sqrt(2 / Math.PI)));
  const add = v && g.producer(v, "Add");
  if (!add || g.soleReader(v!) !== scale) return undefined;
  for (const x of add.inputs) {
    const w = otherInput(add, x)!;
    const cube = g.producer(w, "Mul");
    const c = cube && cube.inputs.find((i) => near(g.scalar(otherInput(cube, i)), 0.044715));
    const pow = c && g.producer(c, "Pow");
    if (!cube || g.soleReader(w) !== add || !pow || pow.inputs[0] !== x || pow.attrs.exponent !== 3 || g.soleReader(c!) !== cube) continue;
    const plus = onePlus(g, tanh.outputs[0]!);
    const prod = plus && halfProduct(g, x, plus.outputs[0]!);
    if (prod) return { hit: { nodes: [pow, cube, add, scale, tanh, plus!, ...prod.nodes], out: prod.out }, x };
  }
  return undefined;
}

/** Fuse every decomposed Gelu; returns how many were fused. */
export function fuseGelu(inf: Inferred): number {
  return fuseAll(inf, (g, n) => {
    const m = n.op === "Erf" ? erfForm(g, n) : n.op === "Tanh" ? tanhForm(g, n) : undefined;
    if (!m) return undefined;
    const approximate = n.op === "Erf" ? "none" : "tanh";
    return { nodes: m.hit.nodes, fused: { op: "Gelu", name: `${n.name}.gelu`, inputs: [m.x], outputs: [m.hit.out], attrs: { approximate } } };
  });
}
