/**
 * A half-precision (float16) model as ONNX Runtime's CPU runs it (docs/memory.md, "float16
 * models on ORT's CPU"): the replay (ort-pattern.ts) takes this graph, not the file's.
 *
 * ORT's x86-64 CPU kernels have no float16 arithmetic (its float16 kernels move values, and
 * normalise: HALF_KERNELS), so its InsertCastTransformer
 * (onnxruntime/core/optimizer/insert_cast_transformer.cc) puts each other node with a float16
 * input on float32: a Cast to float32 before it for every float16 value it reads (one per value,
 * named `InsertedPrecisionFreeCast_<value>`), a Cast back after each float16 output, and then
 * removes the Casts that cancel between two such nodes. A node of a float16 kernel between two
 * float32 nodes runs in float32 too (IsIsolatedFp16NodeOnCpu); two or more in a row stay
 * float16 (a BERT's reshape and transpose of q, k and v; ConvNeXt's permute and LayerNorm). What is left:
 * - each float16 graph input is cast to float32 once, a float32 copy of the input in the arena;
 * - the graph runs in float32 but for those chains, 2-byte tensors between Casts, and each
 *   float16 graph output is its float32 value cast back;
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
 * Measured against ORT's block at batch 16: ten torchvision CNNs within 0.003 %, ViT -0.005 %,
 * GPT-2 +0.7 %, BERT +2.7 % (where, not found; small transformers exports).
 */
import type { ConstTensor, Graph, Node } from "../compiler/ir.ts";
import onnxProto from "onnx-proto";
import { topoSort } from "../compiler/order.ts";
import { SHARED_CONSTANT_ELEMENTS } from "./ort-cse.ts";
import { asFunctionBody, convTakesHardSwish } from "./ort-functions.ts";
import { nchwcBlockSize } from "./ort-nchwc.ts";

const { FLOAT, FLOAT16 } = onnxProto.onnx.TensorProto.DataType;
/**
 * Ops ORT 1.32's CPU runs on float16 itself (a one-node float16 model of each keeps no Cast in
 * ORT's optimized graph): those that move values, and LayerNormalization. Clip, Max and Min
 * have float16 kernels too, but the compiler's shape rules take float32 only: they are
 * replayed in float32, as ORT runs them between two float32 nodes (a ReLU6 between convs).
 */
const HALF_KERNELS = new Set(["Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Identity", "Concat", "Split", "Slice", "Gather", "GatherElements", "Expand", "Shape", "Size", "Cast", "LayerNormalization"]);
/** Ops whose outputs are not their float inputs' type. */
const NOT_FLOAT_OUTPUT = new Set(["Shape", "Size", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Not", "And", "Or", "Xor", "ArgMax", "ArgMin", "NonZero", "IsNaN", "IsInf"]);
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
  // Which values are float16 in the file, and which nodes ORT runs on them (HALF_KERNELS) or in
  // float32 between Casts (every other node that reads one).
  const half = new Set<string>([...g.inputs.filter((i) => i.elemType === FLOAT16).map((i) => i.name), ...[...consts].filter(([, c]) => c.fileType === FLOAT16).map(([n]) => n)]);
  for (const n of topoSort({ ...g, consts, nodes: kept }, kept)) {
    const out = n.opType === "Cast" ? n.attrs.get("to") === FLOAT16 : !NOT_FLOAT_OUTPUT.has(n.opType) && n.inputs.some((x) => half.has(x));
    if (out) for (const o of n.outputs) if (o) half.add(o);
  }
  const readsHalf = (n: Node) => n.inputs.some((x) => half.has(x));
  const inFloat = new Set(kept.filter((n) => readsHalf(n) && !HALF_KERNELS.has(n.opType)));
  const producer = new Map(kept.flatMap((n) => n.outputs.map((o) => [o, n] as const)));
  const readersOf = new Map<string, Node[]>();
  for (const n of kept) for (const x of new Set(n.inputs)) if (x) readersOf.set(x, [...(readersOf.get(x) ?? []), n]);
  // The file's own Cast of a float32 value to float16 that only float32 nodes read: it and ORT's
  // Cast back cancel (RemoveDuplicateCastTransformer), the readers read the float32 value.
  for (const n of kept) {
    const h = n.outputs[0];
    if (n.opType === "Cast" && n.attrs.get("to") === FLOAT16 && !readsHalf(n) && h && !outputs.has(h) && (readersOf.get(h) ?? []).every((r) => inFloat.has(r))) inFloat.add(n);
  }
  // ORT's IsIsolatedFp16NodeOnCpu, in node order: a float16 node that reads some node's output,
  // whose float16 inputs that nodes make all come from nodes run in float32 (an initializer or a
  // graph input is no such input: BERT's position-embedding Gather), and whose float16 outputs
  // all go to such nodes, runs in float32 too.
  for (const n of kept) {
    if (inFloat.has(n) || !readsHalf(n) || n.opType === "Cast" || n.outputs.some((o) => outputs.has(o))) continue;
    const from = n.inputs.filter((x) => half.has(x) && producer.has(x)).map((x) => producer.get(x)!);
    const halfOuts = n.outputs.filter((o) => half.has(o));
    const to = halfOuts.flatMap((o) => readersOf.get(o) ?? []);
    const readsANode = n.inputs.some((x) => producer.has(x));
    if (readsANode && halfOuts.length > 0 && from.every((p) => inFloat.has(p)) && to.every((r) => inFloat.has(r))) inFloat.add(n);
  }
  // A float16 value a float32 node reads: its float32 value where a float32 node made it, else
  // a Cast of it (one per value). A float16 initializer whose Cast has one reader is made
  // float32 in place instead (FuseInitializersTransformer); ConstantSharing has made equal
  // small initializers one before, so their readers add up.
  const floatMade = (v: string) => producer.has(v) && inFloat.has(producer.get(v)!);
  const floatReadCount = new Map<string, number>();
  for (const n of inFloat) for (const x of n.inputs) if (x) floatReadCount.set(x, (floatReadCount.get(x) ?? 0) + 1);
  const floatReads = (v: string) => floatReadCount.get(v) ?? 0;
  const shareKey = (c: ConstTensor) => (c.data.length <= SHARED_CONSTANT_ELEMENTS ? `[${c.dims.join(",")}] ${Array.from(c.data).join(",")}` : null);
  const sharedReads = new Map<string, number>();
  for (const [name, c] of consts) {
    const key = c.fileType === FLOAT16 ? shareKey(c) : null;
    if (key !== null) sharedReads.set(key, (sharedReads.get(key) ?? 0) + floatReads(name));
  }
  const castReads = (v: string) => {
    const c = consts.get(v);
    const key = c ? shareKey(c) : null;
    return key !== null ? sharedReads.get(key)! : floatReads(v);
  };
  const madeInPlace = (v: string) => consts.has(v) && castReads(v) === 1;
  // A float16 initializer a float16 node reads (ViT's class token an Expand broadcasts, an
  // embedding table a Gather picks from) stays float16, and so does what that node makes.
  for (const [name, c] of consts) {
    if (c.fileType === FLOAT16 && !madeInPlace(name) && (readersOf.get(name) ?? []).some((r) => !inFloat.has(r))) consts.set(name, { ...c, dtype: "float16" });
  }
  // Named as ORT names them: the prefix and the float16 value cast (the input of one to float32, the output of one back).
  const cast = (from: string, to: string, type: number): Node => ({ opType: "Cast", name: ORT_INSERTED_CAST + (type === FLOAT ? from : to), inputs: [from], outputs: [to], attrs: new Map([["to", type]]) });
  const asFloat = (v: string) => (half.has(v) && !madeInPlace(v) ? ORT_INSERTED_CAST + v : v);
  // ORT numbers the Casts after the file's nodes, in the order it adds them: walking the nodes,
  // one for each float16 value a float32 node reads that none before it read, then one back
  // for each float16 output a float16 node or the caller reads.
  const casts: Node[] = [];
  const made = new Set<string>();
  const file = new Set(kept);
  // A weight or bias cast in every request is no constant to ORT's NCHWc rewrite: the conv stays plain.
  const block = nchwcBlockSize();
  const takesHardSwish = (conv: Node) => convTakesHardSwish(conv, (v) => consts.get(v)?.dims, (v) => consts.has(v) && !(half.has(v) && !madeInPlace(v)), block);
  const nodes = kept.flatMap((n) => (inFloat.has(n) ? asFunctionBody(n, producer, takesHardSwish) : [n])).map((n): Node => {
    // A node of the file run on float16, as it is; one run in float32 (a function body's too) between Casts.
    if (file.has(n) && !inFloat.has(n)) return n;
    for (const x of n.inputs) {
      if (!half.has(x) || floatMade(x) || madeInPlace(x) || made.has(x)) continue;
      made.add(x);
      casts.push(cast(x, ORT_INSERTED_CAST + x, FLOAT));
    }
    for (const o of n.outputs) {
      if (!half.has(o) || (!outputs.has(o) && (readersOf.get(o) ?? []).every((r) => inFloat.has(r)))) continue;
      casts.push(cast(ORT_INSERTED_CAST + o, o, FLOAT16));
    }
    return {
      ...n,
      inputs: n.inputs.map(asFloat),
      outputs: n.outputs.map((o) => (half.has(o) ? ORT_INSERTED_CAST + o : o)),
      // What the file casts to float16 stays float32 (the Casts back and forth cancel).
      attrs: n.opType === "Cast" && n.attrs.get("to") === FLOAT16 ? new Map([...n.attrs, ["to", FLOAT]]) : n.attrs,
    };
  });
  return { ...g, consts, nodes: [...nodes, ...casts] };
}

/** Whether ORT added this Cast (the header): it runs in every request, its input an initializer or not. */
export const isOrtInsertedCast = (n: Pick<Node, "opType" | "name">): boolean => n.opType === "Cast" && n.name.startsWith(ORT_INSERTED_CAST);
