/**
 * Arena check on a written plan, independent of the compiler's in-memory state: lifetimes
 * are recomputed from the header's op list and every pair of simultaneously live tensors
 * is checked for overlap. Used by the tests on every model.
 */
import { type Lifetime, aliasByteCopies, arenaProblems, lowerBound } from "./arena.ts";
import { concatInputsInPlace, concatOutputsInPlace } from "./concat-in-place.ts";
import { PLAN_ALIGNMENT, type PlanHeader, alignUp } from "./plan-format.ts";

export function planLifetimes(h: PlanHeader): Lifetime[] {
  const end = Math.max(h.ops.length - 1, 0);
  const life = new Map<number, Lifetime>();
  const add = (id: number, step: number) => {
    const t = h.tensors[id]!;
    if (t.kind === "weight" || life.has(id)) return;
    life.set(id, { name: `#${id} ${t.name}`, bytes: t.bytes, size: alignUp(t.bytes, PLAN_ALIGNMENT), first: step, last: step });
  };
  for (const id of h.inputs) add(id, 0);
  h.ops.forEach((op, step) => {
    for (const id of op.inputs) {
      const l = life.get(id);
      if (l) l.last = Math.max(l.last, step);
    }
    for (const id of op.outputs) add(id, step);
  });
  for (const id of h.outputs) life.get(id)!.last = end;
  return [...life.values()];
}

/**
 * All arena problems of a plan (empty = valid), plus its recomputed lower bound. A byte copy
 * (Reshape, Flatten) placed on its own input is one tensor with it where the compiler's rule
 * allows that (aliasByteCopies: the input dies there and is neither a graph input nor a graph
 * output); anywhere else two tensors at one place while both live are a problem.
 */
export function checkPlanArena(h: PlanHeader): { problems: string[]; lowerBound: number } {
  const ls = planLifetimes(h);
  const key = (id: number) => `#${id} ${h.tensors[id]!.name}`;
  const offsets = new Map<string, number>();
  for (const l of ls) offsets.set(l.name, h.tensors[Number(l.name.slice(1, l.name.indexOf(" ")))]!.offset);
  const inPlace = h.ops.map((op) => {
    const [x, y] = [op.inputs[0], op.outputs[0]];
    const same = x !== undefined && y !== undefined && offsets.has(key(x)) && offsets.get(key(x)) === offsets.get(key(y));
    return { op: same ? op.op : "", name: "", inputs: same ? [key(x!)] : [], outputs: same ? [key(y!)] : [], attrs: {} };
  });
  const { planned, aliasOf } = aliasByteCopies(inPlace, ls, h.inputs.map(key), h.outputs.map(key));
  // A Concat input in place is one tensor with its Concat's output, from the input's writer on
  // (concat-in-place.ts); a nested Concat's inputs join the outer output with it, and a Concat
  // laid at the start of its family's head joins the head.
  const groups = new Map(planned.map((l) => [l.name, { ...l }]));
  const joined = new Map<string, string>();
  const holder = (name: string): string => {
    let n = aliasOf.get(name) ?? name;
    for (let j = joined.get(n); j !== undefined; j = joined.get(n)) n = j;
    return n;
  };
  const joins = [...concatInputsInPlace(h), ...concatOutputsInPlace(h).map((c) => ({ input: c.output, output: c.head }))];
  for (const c of joins) {
    const gx = holder(key(c.input)), gy = holder(key(c.output));
    const lx = groups.get(gx), ly = groups.get(gy);
    if (gx === gy || !lx || !ly) continue;
    ly.first = Math.min(ly.first, lx.first);
    ly.last = Math.max(ly.last, lx.last);
    groups.delete(gx);
    joined.set(gx, gy);
  }
  const merged = [...groups.values()];
  return { problems: arenaProblems(merged, offsets, h.arena.bytesPerSample), lowerBound: lowerBound(merged) };
}
