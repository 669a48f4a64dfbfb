/**
 * A half-precision (float16) model as ONNX Runtime's CPU runs it (docs/memory.md, "float16
 * models on ORT's CPU"): the replay (ort-pattern.ts) takes this graph, not the file's.
 *
 * ORT's x86-64 CPU kernels have no float16 arithmetic, so its InsertCastTransformer
 * (onnxruntime/core/optimizer/insert_cast_transformer.cc) puts each node with a float16 input
 * on float32: a Cast to float32 before it for every float16 value it reads (one per value,
 * named `InsertedPrecisionFreeCast_<value>`), a Cast back after each float16 output, and then
 * removes the Casts that cancel between two such nodes. What is left:
 * - each float16 graph input is cast to float32 once, a float32 copy of the input in the arena;
 * - the graph runs in float32, and each float16 graph output is its float32 value cast back;
 * - a float16 initializer is read through its Cast, which ORT's FuseInitializersTransformer
 *   turns back into a float32 initializer (`FusedBack_<value>`) only where the Cast has one
 *   reader. One read by several nodes stays a Cast that runs in every request: a float32 copy
 *   of the weight each time, and not a constant to the rewrites after it. ORT's
 *   ConstantSharing merges equal initializers of up to 8 elements first, so a Clip's bounds
 *   (0 and 6 in every mobilenet_v2 block) are one value read by every Clip: ORT fuses none of
 *   them into its conv, where the float32 export fuses all 35. A conv whose bias torch's
 *   exporter shares between convs (equal values: a randomly initialised model's folded batch
 *   norms) runs plain, not NCHWc.
 * Measured (ORT 1.32, saved optimized graphs): mobilenet_v2 in float16 keeps 14 Casts and 35
 * Clips, and runs 3 of its 52 convs NCHWc; resnet18 (random init) runs every conv plain, its
 * pattern block at batch 16 1.75x the float32 export's.
 *
 * Not followed: a float16 node whose kernel takes float16 (Gather, Reshape, Concat...) keeps
 * its value in float16 where it is not between two cast nodes; here it is float32 too.
 */
import type { ConstTensor, Graph, Node } from "../compiler/ir.ts";
import onnxProto from "onnx-proto";
import { SHARED_CONSTANT_ELEMENTS } from "./ort-cse.ts";

const { FLOAT, FLOAT16 } = onnxProto.onnx.TensorProto.DataType;
/** How ORT names a Cast its InsertCastTransformer adds, and the value it makes: this prefix, then the value cast. */
export const ORT_INSERTED_CAST = "InsertedPrecisionFreeCast_";

const isTensor = (v: unknown): v is ConstTensor => typeof v === "object" && v !== null && "dims" in v && "data" in v;
const isHalfConstant = (n: Node) => {
  const v = n.attrs.get("value");
  return n.opType === "Constant" && isTensor(v) && v.fileType === FLOAT16;
};

/** Whether the file computes in float16 anywhere: a float16 input, output, initializer, Constant or Cast. */
export function isHalfPrecision(g: Graph): boolean {
  return g.inputs.some((i) => i.elemType === FLOAT16) ||
    [...(g.outputElemTypes?.values() ?? [])].some((t) => t === FLOAT16) ||
    [...g.consts.values()].some((c) => c.fileType === FLOAT16) ||
    g.nodes.some((n) => isHalfConstant(n) || (n.opType === "Cast" && n.attrs.get("to") === FLOAT16));
}

/** The graph ORT's CPU runs for a float16 model (the header); a graph without float16, itself. */
export function asOrtRunsHalfPrecision(g: Graph): Graph {
  if (!isHalfPrecision(g)) return g;
  // ORT makes every Constant node an initializer as it loads the model; its IdentityElimination
  // runs before the Casts are added, so an Identity of a float16 initializer (torch's exporter
  // writes one for each initializer equal to an earlier one) is that initializer to its readers.
  const consts = new Map(g.consts);
  const outputs = new Set(g.outputs);
  const sameAs = new Map<string, string>();
  const dropped = new Set<Node>();
  for (const n of g.nodes) if (isHalfConstant(n) && n.outputs[0]) (consts.set(n.outputs[0], n.attrs.get("value") as ConstTensor), dropped.add(n));
  for (const n of g.nodes) {
    const [x, y] = [n.inputs[0], n.outputs[0]];
    if (n.opType === "Identity" && x && y && !outputs.has(y) && consts.get(x)?.fileType === FLOAT16) (sameAs.set(y, x), dropped.add(n));
  }
  const kept = g.nodes.filter((n) => !dropped.has(n)).map((n) => ({ ...n, inputs: n.inputs.map((x) => sameAs.get(x) ?? x) }));
  const readers = new Map<string, number>();
  for (const n of kept) for (const i of n.inputs) if (i) readers.set(i, (readers.get(i) ?? 0) + 1);
  // ConstantSharing has made equal small initializers one before the Casts are added: their readers add up.
  const shareKey = (c: ConstTensor) => (c.data.length <= SHARED_CONSTANT_ELEMENTS ? `[${c.dims.join(",")}] ${Array.from(c.data).join(",")}` : null);
  const sharedReaders = new Map<string, number>();
  for (const [name, c] of consts) {
    const key = c.fileType === FLOAT16 ? shareKey(c) : null;
    if (key !== null) sharedReaders.set(key, (sharedReaders.get(key) ?? 0) + (readers.get(name) ?? 0));
  }
  const readersOf = (name: string, c: ConstTensor) => {
    const key = shareKey(c);
    return key !== null ? sharedReaders.get(key)! : readers.get(name) ?? 0;
  };
  // The values read through a Cast: each float16 graph input, and each float16 initializer
  // several nodes read (one read by one node is made float32 in place: nothing runs for it).
  const castValue = new Set([
    ...g.inputs.filter((i) => i.elemType === FLOAT16).map((i) => i.name),
    ...[...consts].filter(([name, c]) => c.fileType === FLOAT16 && readersOf(name, c) > 1).map(([name]) => name),
  ]);
  const produced = new Set(kept.flatMap((n) => n.outputs));
  const halfOutputs = new Set(g.outputs.filter((o) => g.outputElemTypes?.get(o) === FLOAT16 && produced.has(o)));
  // Named as ORT names them: the prefix and the float16 value cast (the input of one to float32, the output of one back).
  const cast = (from: string, to: string, type: number): Node => ({ opType: "Cast", name: ORT_INSERTED_CAST + (type === FLOAT ? from : to), inputs: [from], outputs: [to], attrs: new Map([["to", type]]) });
  // ORT numbers the Casts after the file's nodes, in the order it adds them: walking the nodes,
  // one for each value a node reads that none before it read, then one for its float16 output.
  const casts: Node[] = [];
  const made = new Set<string>();
  const producer = new Map(kept.flatMap((n) => n.outputs.map((o) => [o, n] as const)));
  const nodes = kept.flatMap((n) => asFunctionBody(n, producer, castValue)).map((n): Node => {
    for (const x of n.inputs) if (castValue.has(x) && !made.has(x)) (made.add(x), casts.push(cast(x, ORT_INSERTED_CAST + x, FLOAT)));
    for (const o of n.outputs) if (halfOutputs.has(o)) casts.push(cast(ORT_INSERTED_CAST + o, o, FLOAT16));
    return {
      ...n,
      // A float16 graph output another node reads too: that node reads the float32 value.
      inputs: n.inputs.map((x) => (castValue.has(x) || halfOutputs.has(x) ? ORT_INSERTED_CAST + x : x)),
      outputs: n.outputs.map((o) => (halfOutputs.has(o) ? ORT_INSERTED_CAST + o : o)),
      // What the file casts to float16 stays float32 (the Casts back and forth cancel).
      attrs: n.opType === "Cast" && n.attrs.get("to") === FLOAT16 ? new Map([...n.attrs, ["to", FLOAT]]) : n.attrs,
    };
  });
  return { ...g, consts, nodes: [...nodes, ...casts] };
}

/**
 * HardSwish, an op ONNX defines as a function (`x * HardSigmoid(x, 1/6, 0.5)`), runs as that
 * body in a float16 model unless ORT folds it into the conv before it: mobilenet_v3_large in
 * float16 runs 21 HardSigmoids and 29 Muls where its float32 export folds every HardSwish into
 * its conv (read as one node, the replay's block was 26 % under ORT's); a lone HardSwish is
 * expanded too. ORT 1.32 folded one only into a conv it blocks (NCHWc), which here is one
 * whose bias is a constant (`castValue`: the values read through a Cast); measured on three
 * graphs, the rule behind it not read in ORT's source.
 */
function asFunctionBody(n: Node, producer: ReadonlyMap<string, Node>, castValue: ReadonlySet<string>): Node[] {
  const [x, y] = [n.inputs[0], n.outputs[0]];
  if (n.opType !== "HardSwish" || !x || !y) return [n];
  const conv = producer.get(x);
  if (conv?.opType === "Conv" && !castValue.has(conv.inputs[1] ?? "") && !castValue.has(conv.inputs[2] ?? "")) return [n];
  const hs = `${y}#HardSigmoid`;
  return [
    { opType: "HardSigmoid", name: hs, inputs: [x], outputs: [hs], attrs: new Map([["alpha", 1 / 6], ["beta", 0.5]]) },
    { opType: "Mul", name: y, inputs: [x, hs], outputs: [y], attrs: new Map() },
  ];
}

/** Whether ORT added this Cast (the header): it runs in every request, its input an initializer or not. */
export const isOrtInsertedCast = (n: Pick<Node, "opType" | "name">): boolean => n.opType === "Cast" && n.name.startsWith(ORT_INSERTED_CAST);
