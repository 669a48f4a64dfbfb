/**
 * SiLU fusion: `Mul(x, Sigmoid(x))` (how both torch exporters write nn.SiLU, EfficientNet's
 * activation) becomes one SiLU op, saving a pass over the tensor and its arena space. Only
 * when the Sigmoid's output has no other reader, so no observable value disappears.
 */
import type { Inferred } from "./infer.ts";
import type { LNode } from "./ir.ts";

export function fuseSilu(inf: Inferred): void {
  const readers = new Map<string, number>();
  for (const o of inf.outputs) readers.set(o, (readers.get(o) ?? 0) + 1);
  for (const n of inf.nodes) for (const i of n.inputs) if (i) readers.set(i, (readers.get(i) ?? 0) + 1);
  const sigmoidOf = new Map<string, LNode>();
  for (const n of inf.nodes) if (n.op === "Sigmoid" && readers.get(n.outputs[0]!) === 1) sigmoidOf.set(n.outputs[0]!, n);
  const fused = new Set<LNode>();
  for (const mul of inf.nodes) {
    if (mul.op !== "Mul" || mul.inputs.length !== 2 || mul.inputs[0] === mul.inputs[1]) continue;
    const k = mul.inputs.findIndex((name, idx) => {
      const s = sigmoidOf.get(name);
      return s !== undefined && !fused.has(s) && s.inputs[0] === mul.inputs[1 - idx];
    });
    if (k < 0) continue;
    const sig = sigmoidOf.get(mul.inputs[k]!)!;
    const x = mul.inputs[1 - k]!;
    fused.add(sig);
    inf.shapes.delete(sig.outputs[0]!);
    mul.op = "SiLU";
    mul.inputs = [x];
    mul.attrs = {};
  }
  inf.nodes = inf.nodes.filter((n) => !fused.has(n));
}
