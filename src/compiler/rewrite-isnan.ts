/**
 * IsNaN(x) becomes Not(Equal(x, x)): under IEEE 754 only a NaN differs from itself, so the
 * pair is exact, and both ops already exist in memlane-rt for any float tensor (folded
 * when x is constant). transformers' attention exports guard their softmax with
 * `Where(IsNaN(p), 0, p)` (BERT, ViT), which is where this op comes from.
 */
import type { Graph, Node } from "./ir.ts";

export function rewriteIsNaN(g: Graph): Graph {
  if (!g.nodes.some((n) => n.opType === "IsNaN")) return g;
  const taken = new Set([...g.consts.keys(), ...g.nodes.flatMap((n) => [...n.inputs, ...n.outputs]), ...g.inputs.map((i) => i.name)]);
  const fresh = (base: string): string => {
    let s = base;
    for (let k = 1; taken.has(s); k++) s = `${base}_${k}`;
    taken.add(s);
    return s;
  };
  const nodes: Node[] = g.nodes.flatMap((n) => {
    if (n.opType !== "IsNaN") return [n];
    const same = fresh(`${n.outputs[0]}.self_equal`);
    return [
      { opType: "Equal", name: `${n.name}.self_equal`, inputs: [n.inputs[0]!, n.inputs[0]!], outputs: [same], attrs: new Map() },
      { opType: "Not", name: n.name, inputs: [same], outputs: [n.outputs[0]!], attrs: new Map() },
    ];
  });
  return { ...g, nodes };
}
