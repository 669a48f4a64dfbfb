/**
 * Before inference: torch's export of a batch_first=True nn.LSTM as layout 1.
 *
 * torch writes `Transpose(X, [1,0,2]) -> LSTM (layout 0) -> Transpose(Y, [0,2,1,3]) ->
 * Reshape [S, N, D*H] -> Transpose [1,0,2]`, with zero initial states built from the
 * batch size. Every tensor in between has the batch on axis 1, which plan v1 cannot place;
 * the same computation batch-first is `LSTM (layout 1) -> Reshape [0, 0, -1]`. Applied only
 * when Y_h and Y_c are unused (they would keep the batch on axis 1) and the initial states
 * are absent or zeros; any other layout 0 LSTM is refused here, saying which condition failed.
 * Also names absent LSTM outputs that a later one needs.
 */
import { CompileError } from "./errors.ts";
import type { Graph, Node } from "./ir.ts";
import { mk } from "./fold-math.ts";

const same = (a: number[] | undefined, b: number[]) => a !== undefined && a.length === b.length && a.every((v, i) => v === b[i]);

/** Ops that only move or replicate values: a zero source stays zeros through them. */
const MOVES = new Set(["Transpose", "Slice", "Expand", "Reshape", "Unsqueeze", "Squeeze", "Identity", "Cast", "Tile", "Gather"]);

export function rewriteBatchFirstLstm(g: Graph): Graph {
  if (!g.nodes.some((n) => n.opType === "LSTM")) return g;
  const nodes = g.nodes.map((n) => ({ ...n, inputs: [...n.inputs], outputs: [...n.outputs], attrs: new Map(n.attrs) }));
  const consts = new Map(g.consts);
  const producer = new Map<string, Node>();
  for (const n of nodes) for (const o of n.outputs) if (o) producer.set(o, n);
  const readersOf = (name: string) => nodes.filter((n) => n.inputs.includes(name));
  const isOutput = (name: string) => g.outputs.includes(name);
  const used = (name: string | undefined) => !!name && (isOutput(name) || readersOf(name).length > 0);
  const taken = new Set([...consts.keys(), ...nodes.flatMap((n) => [...n.inputs, ...n.outputs]), ...g.inputs.map((i) => i.name)]);
  const fresh = (base: string) => {
    let s = base;
    for (let k = 1; taken.has(s); k++) s = `${base}_${k}`;
    taken.add(s);
    return s;
  };
  const perm = (n: Node | undefined) => (n?.opType === "Transpose" ? (n.attrs.get("perm") as number[] | undefined) : undefined);
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

  /** The value of a constant input (initializer or Constant node), for small attributes-as-inputs. */
  const constValues = (name: string | undefined): number[] | undefined => {
    if (!name) return undefined;
    const c = consts.get(name) ?? (producer.get(name)?.opType === "Constant" ? (producer.get(name)!.attrs.get("value") as { data: ArrayLike<number> } | undefined) : undefined);
    return c ? Array.from(c.data) : undefined;
  };
  const soleReader = (name: string): Node | undefined => {
    const r = readersOf(name);
    return r.length === 1 && !isOutput(name) ? r[0] : undefined;
  };
  /**
   * What torch does with a layout 0 Y [S, D, N, H] to return a batch-first [N, S, D*H]:
   * Transpose [0,2,1,3] -> Reshape -> Transpose [1,0,2], or (one direction) Squeeze axis 1
   * -> Transpose [1,0,2]. The nodes, in order, or undefined when Y is used otherwise.
   */
  const seqFirstChain = (y: string, dirs: number): Node[] | undefined => {
    const first = soleReader(y);
    if (first?.opType === "Squeeze") {
      const axes = first.inputs[1] ? constValues(first.inputs[1]) : (first.attrs.get("axes") as number[] | undefined);
      const t = soleReader(first.outputs[0]!);
      return dirs === 1 && same(axes, [1]) && same(perm(t), [1, 0, 2]) ? [first, t!] : undefined;
    }
    if (!same(perm(first), [0, 2, 1, 3])) return undefined;
    // Y's transposed copy feeds the Reshape, and maybe the Shape ops that compute its target.
    const readers = readersOf(first!.outputs[0]!);
    const reshape = readers.find((n) => n.opType === "Reshape" && n.inputs[0] === first!.outputs[0]);
    if (!reshape || readers.some((n) => n !== reshape && n.opType !== "Shape") || isOutput(first!.outputs[0]!)) return undefined;
    const t = soleReader(reshape.outputs[0]!);
    return same(perm(t), [1, 0, 2]) ? [first!, reshape, t!] : undefined;
  };

  const removed = new Set<Node>();
  for (const lstm of nodes) {
    if (lstm.opType !== "LSTM") continue;
    // An absent output before a present one would leave a hole in the plan op's outputs.
    const last = lstm.outputs.map((o, i) => (o ? i : -1)).reduce((a, b) => Math.max(a, b), -1);
    lstm.outputs = lstm.outputs.slice(0, last + 1).map((o, i) => o || fresh(`${lstm.name}.out${i}`));
    if ((lstm.attrs.get("layout") ?? 0) !== 0) continue;
    const t1 = producer.get(lstm.inputs[0]!);
    const [y, yh, yc] = lstm.outputs;
    const chain = y ? seqFirstChain(y, lstm.attrs.get("direction") === "bidirectional" ? 2 : 1) : undefined;
    const why = !t1 || !same(perm(t1), [1, 0, 2]) ? "X is not a batch-first tensor transposed by [1,0,2]"
      : used(yh) || used(yc) ? "Y_h or Y_c (h_n, c_n) is used"
      : lstm.inputs[4] ? "sequence_lens is given"
      : [5, 6].some((i) => lstm.inputs[i] && !isZeros(lstm.inputs[i]!)) ? "an initial state is not zeros"
      : !chain ? "Y does not go back to batch-first through torch's Transpose/Reshape (or Squeeze) chain"
      : undefined;
    if (why) {
      throw new CompileError(
        `${g.file}: LSTM node "${lstm.name}": layout 0 puts the batch on axis 1 of X, Y, Y_h and Y_c, which plan v1 cannot place (it keeps the batch first); ` +
          `only torch's batch_first=True export with h_n and c_n unused is rewritten to a batch-first LSTM, and here ${why}`,
        "shape", { node: lstm.name, opType: "LSTM" });
    }
    lstm.inputs = lstm.inputs.slice(0, 4).map((s, i) => (i === 0 ? t1!.inputs[0]! : s));
    while (lstm.inputs.length > 3 && !lstm.inputs[lstm.inputs.length - 1]) lstm.inputs.pop();
    lstm.attrs.set("layout", 1);
    const shape = fresh(`${lstm.name}.merge_directions`);
    consts.set(shape, mk(false, [3], [0, 0, -1]));
    const merge = chain![0]!;
    merge.opType = "Reshape";
    merge.attrs = new Map();
    merge.inputs = [y!, shape];
    merge.outputs = [chain!.at(-1)!.outputs[0]!];
    for (const n of chain!.slice(1)) removed.add(n);
  }
  if (removed.size === 0) return { ...g, nodes };
  // Drop what only the removed nodes read (the transposes, the zero states, the Shape
  // arithmetic of the old Reshape target), to a fixed point.
  let kept = nodes.filter((n) => !removed.has(n));
  for (let changed = true; changed; ) {
    const read = new Set([...g.outputs, ...kept.flatMap((n) => n.inputs)]);
    const next = kept.filter((n) => n.opType === "LSTM" || n.outputs.some((o) => o && read.has(o)));
    changed = next.length !== kept.length;
    kept = next;
  }
  const known = new Set([...consts.keys(), ...g.inputs.map((i) => i.name), ...kept.flatMap((n) => n.outputs)]);
  for (const n of kept) {
    const missing = n.inputs.find((s) => s && !known.has(s));
    if (missing) throw new CompileError(`${g.file}: rewriting the batch_first LSTM left ${n.opType} node "${n.name}" reading "${missing}"`, "internal", { node: n.name });
  }
  return { ...g, nodes: kept, consts };
}
