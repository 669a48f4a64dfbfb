/**
 * ONNX Runtime's common subexpression elimination (its level-1 CommonSubexpressionElimination
 * with ConstantSharing), as the memory replay (ort-pattern.ts) needs it: a node that computes
 * what an earlier one computed (same op, attributes and inputs) is dropped and its readers read
 * the earlier one's outputs; a constant of at most 8 elements counts by its value, not its name
 * (ORT's ConstantSharing merges such initializers first: two Adds of one input and two equal
 * int64 or float initializers became one at 1, 2, 4 and 8 elements, stayed two at 9, 16 and 64;
 * ORT 1.32). BEiT rebuilds its relative-position index in every layer with [2]- and [4]-element
 * constants of each layer's own; ORT computes it once. transformers' exports rebuild the attention mask in every
 * layer, `Where(mask, 0, -inf)` with each layer's own constants; ORT keeps one. Without this the
 * small BERT export (bert-tiny, seq 128) kept a second 4 MiB mask alive at batch 64 and the
 * replay took a 64 MiB region where ORT's arena takes 32.
 *
 * A node whose output is a graph output is kept (the caller must get that tensor by name).
 */
import type { ConstTensor, LNode } from "../compiler/ir.ts";

/** The largest initializer ORT's ConstantSharing merges with an equal one. */
export const SHARED_CONSTANT_ELEMENTS = 8;

/**
 * `initializerOf`: the initializer ORT knows a constant as. torch's exporter writes a parameter
 * equal to an earlier one as an Identity of it, and ORT's IdentityElimination makes the two one
 * initializer: a ConvNeXt backbone's stage norm and the next stage's downsampling norm (both
 * all ones and zeros at initialisation, both of one input) are then one node to ORT's CSE.
 * Taken as two, UperNet's replay kept a second norm and its reorder alive in every stage.
 */
export function ortCommonSubexpressions(nodes: readonly LNode[], graphOutputs: readonly string[], constOf: (name: string) => ConstTensor | undefined, initializerOf: (name: string) => string = (n) => n): LNode[] {
  const outputs = new Set(graphOutputs);
  const rename = new Map<string, string>();
  const seen = new Map<string, LNode>();
  const inputKey = (name: string): string => {
    const c = constOf(name);
    if (c && c.data.length <= SHARED_CONSTANT_ELEMENTS) return `const ${c.isFloat ? "f" : "i"}${c.dtype ?? ""} [${c.dims.join(",")}] ${Array.from(c.data).join(",")}`;
    if (c) return `initializer ${initializerOf(name)} [${c.dims.join(",")}] ${c.dtype ?? ""}`;
    return `value ${name}`;
  };
  const kept: LNode[] = [];
  for (const n0 of nodes) {
    const n = { ...n0, inputs: n0.inputs.map((i) => rename.get(i) ?? i) };
    const key = JSON.stringify([n.op, n.attrs, n.inputs.map((i) => (i ? inputKey(i) : "")), n.outputs.length]);
    const earlier = n.inputs.length > 0 && !n.outputs.some((o) => outputs.has(o)) ? seen.get(key) : undefined;
    if (earlier) {
      n.outputs.forEach((o, k) => o && earlier.outputs[k] && rename.set(o, earlier.outputs[k]!));
      continue;
    }
    if (!seen.has(key)) seen.set(key, n);
    kept.push(n);
  }
  return kept;
}
