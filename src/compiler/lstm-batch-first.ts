/**
 * Before inference: torch's layout 0 LSTMs and GRUs (the batch on axis 1) as memlane-rt's
 * batch-first ones (layout 1). What follows says LSTM for both: a GRU has the same inputs up
 * to initial_h and the same Y, and no Y_c.
 *
 * Any layout 0 LSTM becomes `Transpose(X, [1,0,2]) -> LSTM (layout 1)` with its outputs moved
 * back to layout 0 by Transposes (Y [N, S, D, H] -> [S, D, N, H]; Y_h, Y_c [N, D, H] -> [D, N,
 * H]), which stay only where something reads them (h_n, c_n). torch's batch_first=True export
 * needs none of them: it writes `Transpose(X, [1,0,2]) -> LSTM -> Y [S, D, N, H]`, then brings
 * Y back to [N, S, D*H] through `Transpose [0,2,1,3] -> Reshape` (or, one direction,
 * `Squeeze axis 1`) and a final `Transpose [1,0,2]`; a stacked LSTM feeds the Reshape's
 * [S, N, D*H] straight to the next layer. This pass follows those sequence-first tensors,
 * each with a batch-first twin: the LSTM takes the twin of its X, the Transpose/Reshape or
 * Squeeze become a Reshape [0, 0, -1] of the twin, and the final Transpose an Identity of it.
 * Initial states must be zeros and sequence_lens absent; otherwise the LSTM is refused naming
 * the condition that failed. It also names absent LSTM outputs that a later one needs.
 */
import { CompileError } from "./errors.ts";
import { mk } from "./fold-math.ts";
import type { Graph, Node } from "./ir.ts";
import { topoSort } from "./order.ts";

const same = (a: number[] | undefined, b: number[]) => a !== undefined && a.length === b.length && a.every((v, i) => v === b[i]);

/** The recurrent ops this rewrite moves to layout 1 (their shared inputs: X, W, R, B, sequence_lens, initial_h). */
const RECURRENT = new Set(["LSTM", "GRU"]);

/** Ops that only move or replicate values: a zero source stays zeros through them. */
const MOVES = new Set(["Transpose", "Slice", "Expand", "Reshape", "Unsqueeze", "Squeeze", "Identity", "Cast", "Tile", "Gather"]);

/** A sequence-first tensor's layout: [S, N, ...] ("sn"), an LSTM's Y [S, D, N, H] ("y"), or Y transposed to [S, N, D, H] ("sn4"). */
type Layout = "sn" | "y" | "sn4";

export function rewriteBatchFirstLstm(g: Graph): Graph {
  if (!g.nodes.some((n) => RECURRENT.has(n.opType))) return g;
  const nodes = topoSort(g).map((n) => ({ ...n, inputs: [...n.inputs], outputs: [...n.outputs], attrs: new Map(n.attrs) }));
  const consts = new Map(g.consts);
  const producer = new Map<string, Node>();
  for (const n of nodes) for (const o of n.outputs) if (o) producer.set(o, n);
  const isOutput = (name: string) => g.outputs.includes(name);
  const used = (name: string | undefined) => !!name && (isOutput(name) || nodes.some((n) => n.inputs.includes(name)));
  const taken = new Set([...consts.keys(), ...nodes.flatMap((n) => [...n.inputs, ...n.outputs]), ...g.inputs.map((i) => i.name)]);
  const fresh = (base: string) => {
    let s = base;
    for (let k = 1; taken.has(s); k++) s = `${base}_${k}`;
    taken.add(s);
    return s;
  };
  const constValues = (name: string | undefined): number[] | undefined => {
    if (!name) return undefined;
    const p = producer.get(name);
    const c = consts.get(name) ?? (p?.opType === "Constant" ? (p.attrs.get("value") as { data: ArrayLike<number> } | undefined) : undefined);
    return c ? Array.from(c.data) : undefined;
  };
  const isZeros = (name: string): boolean => {
    for (let depth = 0; depth < 16; depth++) {
      const c = consts.get(name);
      if (c) return Array.from(c.data).every((v) => v === 0);
      const p = producer.get(name);
      if (!p) return false;
      if (p.opType === "ConstantOfShape" || p.opType === "Constant") {
        const v = p.attrs.get("value");
        return v === undefined ? p.opType === "ConstantOfShape" : typeof v === "object" && !Array.isArray(v) && Array.from(v.data).every((x) => x === 0);
      }
      if (!MOVES.has(p.opType)) return false;
      name = p.inputs[0]!;
    }
    return false;
  };
  const perm = (n: Node) => (n.opType === "Transpose" ? (n.attrs.get("perm") as number[] | undefined) : undefined);
  const refuse = (lstm: Node, why: string) =>
    new CompileError(`${g.file}: ${lstm.opType} node "${lstm.name}": layout 0 is rewritten to memlane-rt's batch-first ${lstm.opType} only with zero initial states and no sequence_lens, and here ${why}`,
      "shape", { node: lstm.name, opType: lstm.opType });

  const seq = new Map<string, { twin: string; layout: Layout }>();
  const gone = new Set<string>(); // sequence-first names no node produces any more
  const merge = (n: Node, from: string, layout: Layout): Node => {
    const shape = fresh(`${n.name}.merge`);
    consts.set(shape, mk(false, [3], [0, 0, -1]));
    const twin = fresh(`${n.outputs[0]}.batch_first`);
    seq.set(n.outputs[0]!, { twin, layout });
    gone.add(n.outputs[0]!);
    return { opType: "Reshape", name: n.name, inputs: [from, shape], outputs: [twin], attrs: new Map() };
  };
  const transpose = (name: string, from: string, to: string, p: number[]): Node =>
    ({ opType: "Transpose", name, inputs: [from], outputs: [to], attrs: new Map([["perm", p]]) });
  const out: Node[] = [];
  let rewrote = false;
  for (const n of nodes) {
    const s = n.inputs[0] ? seq.get(n.inputs[0]) : undefined;
    if (RECURRENT.has(n.opType)) {
      // An absent output before a present one would leave a hole in the plan op's outputs.
      const last = n.outputs.map((o, i) => (o ? i : -1)).reduce((a, b) => Math.max(a, b), -1);
      n.outputs = n.outputs.slice(0, last + 1).map((o, i) => o || fresh(`${n.name}.out${i}`));
      if ((n.attrs.get("layout") ?? 0) !== 0) {
        out.push(n);
        continue;
      }
      const why = n.inputs[4] ? "sequence_lens is given"
        : [5, 6].some((i) => n.inputs[i] && !isZeros(n.inputs[i]!)) ? "an initial state is not zeros" : undefined;
      if (why) throw refuse(n, why);
      // X batch-first: the twin of a batch-first tensor torch transposed by [1,0,2], or X moved.
      let xb = s?.layout === "sn" ? s.twin : undefined;
      if (!xb) {
        xb = fresh(`${n.inputs[0]}.batch_first`);
        out.push(transpose(`${n.name}.x_batch_first`, n.inputs[0]!, xb, [1, 0, 2]));
      }
      n.inputs = n.inputs.slice(0, 4).map((v, i) => (i === 0 ? xb! : v));
      while (n.inputs.length > 3 && !n.inputs[n.inputs.length - 1]) n.inputs.pop();
      n.attrs.set("layout", 1);
      // Every output gets a batch-first twin and a Transpose back to torch's layout, which
      // stays only where something reads it (h_n, c_n; Y outside torch's pattern).
      const back: Node[] = [];
      n.outputs.forEach((o, i) => {
        const twin = fresh(`${o}.batch_first`);
        n.outputs[i] = twin;
        if (i === 0) seq.set(o, { twin, layout: "y" });
        back.push(transpose(`${n.name}.out${i}_seq_first`, twin, o, i === 0 ? [1, 2, 0, 3] : [1, 0, 2]));
      });
      out.push(n, ...back);
      rewrote = true;
      continue;
    }
    if (n.opType === "Transpose" && same(perm(n), [1, 0, 2])) {
      if (s?.layout === "sn") out.push({ ...n, opType: "Identity", inputs: [s.twin], attrs: new Map() }); // back to batch-first
      else {
        if (!s) seq.set(n.outputs[0]!, { twin: n.inputs[0]!, layout: "sn" });
        out.push(n); // dropped below when nothing else reads it
      }
      continue;
    }
    if (s?.layout === "y" && same(perm(n), [0, 2, 1, 3])) {
      seq.set(n.outputs[0]!, { twin: s.twin, layout: "sn4" }); // [S, N, D, H]: its twin is the batch-first Y
      gone.add(n.outputs[0]!);
      continue;
    }
    const axes = n.opType === "Squeeze" ? (n.inputs[1] ? constValues(n.inputs[1]) : (n.attrs.get("axes") as number[] | undefined)) : undefined;
    if (s?.layout === "y" && same(axes, [1])) {
      out.push(merge(n, s.twin, "sn"));
      continue;
    }
    if (s?.layout === "sn4" && n.opType === "Reshape") {
      out.push(merge(n, s.twin, "sn"));
      continue;
    }
    out.push(n);
  }
  if (!rewrote) return { ...g, nodes: out, consts };
  // A sequence-first result read by anything else (EnCodec's residual LSTM adds its input to
  // Y before moving it back): made from its batch-first twin by a Transpose after the twin's
  // producer, the batch then on axis 1 as the reader expects (plan v2 ops take it anywhere).
  const readNow = new Set(out.flatMap((n) => n.inputs));
  for (const [name, { twin, layout }] of seq) {
    if (!gone.has(name) || !readNow.has(name) || layout === "y") continue;
    const at = out.findIndex((n) => n.outputs.includes(twin));
    out.splice(at + 1, 0, transpose(`${name}.seq_first`, twin, name, layout === "sn" ? [1, 0, 2] : [1, 0, 2, 3]));
    gone.delete(name);
  }
  // Drop what nothing reads any more (the transposes, the zero states, the Shape arithmetic
  // of the old Reshape targets), to a fixed point; the LSTMs stay for their unused Y_h / Y_c.
  let kept = out;
  for (let changed = true; changed; ) {
    const read = new Set([...g.outputs, ...kept.flatMap((n) => n.inputs)]);
    const next = kept.filter((n) => RECURRENT.has(n.opType) || n.outputs.some((o) => o && read.has(o)));
    changed = next.length !== kept.length;
    kept = next;
  }
  const outLeft = g.outputs.find((o) => gone.has(o));
  if (outLeft) throw new CompileError(`${g.file}: graph output "${outLeft}" has the batch on axis 1 (a batch_first LSTM's or GRU's sequence-first result); plan v1 keeps the batch first`, "shape", { output: outLeft });
  return { ...g, nodes: kept, consts };
}
