/**
 * Concat inputs laid out in place (docs/plan-format.md, "Concat in place"): an input of a Concat
 * along a channel-like axis is given the bytes of its slice of the Concat's output, so the op
 * that writes it writes the output directly and the Concat copies nothing.
 *
 * Why: SqueezeNet's fire modules and DenseNet's blocks concatenate every feature map they make;
 * on a 2-vCPU Xeon the copies were 5-6 % of memlane-rt's time at batch 1 (squeezenet1_1's eight
 * Concats 0.23 ms of 3.9 at 2 threads, densenet121's 58 at 3.1 ms of 58 at 1 thread), and ORT
 * copies too.
 *
 * A slice is contiguous only within one sample (the batch is outside the axis), so such a plan
 * must run one sample at a time: the header says so (`arena.concatInPlace`), memlane-rt's CPU
 * backend then runs every batch in chunks of one sample, and its CUDA backend, which runs whole
 * batches, lays the inputs apart again (plan/concat_in_place.h). The compiler does this only
 * where the CPU backend would run samples one at a time anyway (a chunkable plan whose arena
 * exceeds half the chunk budget: native-chunk.ts), so batching never gets slower for it.
 */
import type { Lifetime } from "./arena.ts";
import { type LNode, perSample } from "./ir.ts";
import { PLAN_ALIGNMENT, type PlanHeader } from "./plan-format.ts";

export interface ConcatPlacement {
  /** The lifetimes to plan: each Concat output's now runs from its first in-place input's birth. */
  planned: Lifetime[];
  /** Per in-place input: the tensor it lies in (a Concat output, or another in-place input) and its byte offset there, per sample. */
  inside: Map<string, { of: string; at: number }>;
}

/**
 * Which Concat inputs can be written in place, and the lifetimes that result. `planned` is the
 * arena's list after aliasByteCopies (`aliasOf`: names planned under another's). A Concat takes
 * part when its output is batch-first with one element on every axis between the batch and its
 * own (each input's slice is then one contiguous run a sample). An input qualifies when it is an
 * activation the graph neither takes nor returns, not already sharing a place, and its slice
 * starts on the plan's alignment. Its other readers read it there: the Concat's output lives from
 * the input's birth to the last read of either. A Concat output that is itself in place (nested
 * Concats) takes its inputs along.
 *
 * A family of Concats also qualifies: where a Concat's inputs begin another's (DenseNet: each
 * layer concatenates its block's maps so far, the block's last Concat all of them), it lies at
 * the start of the longest one, its head, when every input of the head can lie in its slice
 * there. Then no Concat of the family copies.
 */
export function placeConcatInputs(
  nodes: readonly LNode[], planned: readonly Lifetime[], aliasOf: ReadonlyMap<string, string>,
  shapes: ReadonlyMap<string, number[]>, elemBytes: (name: string) => number,
  inputs: readonly string[], outputs: readonly string[],
): ConcatPlacement {
  const aliased = new Set([...aliasOf.keys(), ...aliasOf.values()]);
  const byName = new Map(planned.map((l) => [l.name, { ...l }]));
  const inside = new Map<string, { of: string; at: number }>();
  // The planned lifetime that holds a name's bytes (an in-place input's: its Concat's, outward).
  const holder = (name: string): string => {
    let n = name;
    for (let p = inside.get(n); p; p = inside.get(n)) n = p.of;
    return n;
  };
  const free = (t: string) => byName.has(t) && shapes.get(t)?.[0] === -1 && !inputs.includes(t) && !outputs.includes(t) && !aliased.has(t);
  const concats = nodes.filter((n) => {
    const sy = shapes.get(n.outputs[0]!), axis = Number(n.attrs.axis);
    return n.op === "Concat" && sy !== undefined && sy[0] === -1 && axis >= 1 && sy.slice(1, axis).every((d) => d === 1);
  });
  const slots = (n: LNode): number[] | undefined => {
    const at: number[] = [];
    let bytes = 0;
    for (const x of n.inputs) {
      const sx = shapes.get(x);
      if (!sx) return undefined;  // a constant (the compiler's Concat takes them too): not worked out here
      at.push(bytes);
      bytes += perSample(sx) * elemBytes(x);
    }
    return at;
  };
  const family = concatFamilies(concats);
  const joins = (x: string, y: string, lx: Lifetime) => {
    const ly = byName.get(holder(y))!;
    ly.first = Math.min(ly.first, lx.first);
    ly.last = Math.max(ly.last, lx.last);
    byName.delete(x);
  };
  nodes.forEach((n, step) => {
    if (!concats.includes(n) || family.member.has(n)) return;
    const y = n.outputs[0]!, at = slots(n);
    if (!byName.has(holder(y)) || !at) return;
    const members = family.of.get(n) ?? [];
    // (Each input once, and no member read by the head: a tensor gets one place.)
    if (members.length > 0 && new Set(n.inputs).size === n.inputs.length &&
        members.every((m) => free(m.outputs[0]!) && !n.inputs.includes(m.outputs[0]!)) &&
        n.inputs.every((x, i) => free(x) && at[i]! % PLAN_ALIGNMENT === 0 && elemBytes(x) === elemBytes(y))) {
      n.inputs.forEach((x, i) => {
        joins(x, y, byName.get(x)!);
        inside.set(x, { of: y, at: at[i]! });
      });
      for (const m of members) {
        joins(m.outputs[0]!, y, byName.get(m.outputs[0]!)!);
        inside.set(m.outputs[0]!, { of: y, at: 0 });
      }
      return;
    }
    n.inputs.forEach((x, i) => {
      const lx = byName.get(x);
      if (lx && free(x) && at[i]! % PLAN_ALIGNMENT === 0 && elemBytes(x) === elemBytes(y)) {
        joins(x, y, lx);
        inside.set(x, { of: y, at: at[i]! });
      }
    });
  });
  return { planned: [...byName.values()], inside };
}

/**
 * Concats whose inputs begin another's (the same tensors, in order, along the same axis), by the
 * longest Concat they begin (the head; one begun by two longest ones belongs to neither).
 */
function concatFamilies(concats: readonly LNode[]): { of: Map<LNode, LNode[]>; member: Set<LNode> } {
  const begins = (a: LNode, b: LNode) =>
    a !== b && a.attrs.axis === b.attrs.axis && a.inputs.length < b.inputs.length && a.inputs.every((x, i) => x === b.inputs[i]);
  const of = new Map<LNode, LNode[]>(), member = new Set<LNode>();
  for (const a of concats) {
    const heads = concats.filter((b) => begins(a, b) && !concats.some((c) => begins(b, c)));
    if (heads.length !== 1) continue;
    of.set(heads[0]!, [...(of.get(heads[0]!) ?? []), a]);
    member.add(a);
  }
  return { of, member };
}

/** Arena offsets of the in-place inputs, from their holders' (planned) offsets, nested ones included. */
export function concatInputOffsets(inside: ReadonlyMap<string, { of: string; at: number }>, offsets: Map<string, number>): void {
  const resolve = (name: string): number => {
    const known = offsets.get(name);
    if (known !== undefined) return known;
    const p = inside.get(name)!;
    const o = resolve(p.of) + p.at;
    offsets.set(name, o);
    return o;
  };
  for (const name of inside.keys()) resolve(name);
}

/**
 * The Concat inputs a written plan lays in place, read off its offsets (the readers' rule,
 * native/runtime/src/plan/concat_in_place.h `concat_input_in_place`): in a plan marked
 * `arena.concatInPlace`, input k of a Concat whose output is batch-first with one element on
 * each axis between the batch and the Concat's, an activation at the output's offset plus
 * inputs 0..k-1's bytes a sample.
 */
export function concatInputsInPlace(h: Pick<PlanHeader, "tensors" | "ops" | "arena">): { input: number; output: number; step: number }[] {
  const found: { input: number; output: number; step: number }[] = [];
  if (!h.arena.concatInPlace) return found;
  h.ops.forEach((op, step) => {
    const y = h.tensors[op.outputs[0]!];
    const axis = Number(op.attrs.axis);
    if (op.op !== "Concat" || op.outputs.length !== 1 || !y || y.kind === "weight" || y.shape[0] !== -1) return;
    if (!(axis >= 1 && axis < y.shape.length) || y.shape.slice(1, axis).some((d) => d !== 1)) return;
    let at = y.offset;
    for (const id of op.inputs) {
      const x = h.tensors[id];
      if (!x) return;
      if (x.kind !== "weight" && x.offset === at && x.dtype === y.dtype) found.push({ input: id, output: op.outputs[0]!, step });
      at += x.bytes;
    }
  });
  return found;
}

/**
 * The Concat outputs a written plan lays in place (concat_in_place.h `concat_output_in_place`):
 * a Concat whose inputs all lie in place and begin another Concat's, at that one's output.
 */
export function concatOutputsInPlace(h: Pick<PlanHeader, "tensors" | "ops" | "arena">): { output: number; head: number }[] {
  const placed = new Set(concatInputsInPlace(h).map((c) => `${c.step}:${c.input}`));
  const found: { output: number; head: number }[] = [];
  h.ops.forEach((op, step) => {
    if (op.op !== "Concat" || op.outputs.length !== 1 || !op.inputs.every((id) => placed.has(`${step}:${id}`))) return;
    const y = op.outputs[0]!;
    const head = h.ops.find((b) => b !== op && b.op === "Concat" && b.outputs.length === 1 && b.outputs[0] !== y && b.attrs.axis === op.attrs.axis &&
      b.inputs.length > op.inputs.length && h.tensors[b.outputs[0]!]!.offset === h.tensors[y]!.offset && op.inputs.every((id, i) => id === b.inputs[i]));
    if (head) found.push({ output: y, head: head.outputs[0]! });
  });
  return found;
}
