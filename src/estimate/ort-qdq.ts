/**
 * ONNX Runtime's rewrite of a QDQ model (the format onnxruntime.quantization and most exporters
 * write: float ops between DequantizeLinear and QuantizeLinear nodes), as the memory-pattern
 * replay (ort-pattern.ts) needs it. ORT runs each DequantizeLinear -> op -> QuantizeLinear
 * group as one quantized kernel reading and writing 8-bit tensors: the float tensors inside the
 * group never exist. Replayed unfused, a QDQ mobilenet_v2's pattern was 6.6x the 1.7 MB ORT asks
 * for at batch 1 (its QOperator twin, already fused in the file, came out exact).
 *
 * The rules, as ORT's QDQ selector-action transformer applies them at its default level. The
 * DequantizeLinear of a constant is folded into the constant before this (fold.ts): a group's
 * kernel reads the 8-bit weight itself. Where no group takes a weight (a QDQ DistilBERT's
 * LayerNorm scales), ORT dequantizes it in every request, a float tensor of the weight's size
 * that the replay leaves out (a few hundred bytes in the models measured).
 * - Conv, MatMul, Gemm, Add, Mul, Concat, the average pools and Sigmoid, LeakyRelu, Softmax,
 *   every computed input from a DequantizeLinear and the output read by one QuantizeLinear
 *   alone: one quantized node (QLinearConv, ...) from the 8-bit inputs to the 8-bit output.
 * - MatMul and Gemm without the QuantizeLinear: MatMulIntegerToFloat / QGemm, a float output.
 * - Ops that only move or pick values (Reshape, Transpose, MaxPool, ...) between a
 *   DequantizeLinear and a QuantizeLinear: the op on the 8-bit tensor itself.
 * - A Relu or Clip whose only reader is a QuantizeLinear that clamps as much: removed first.
 * ORT fuses nothing whose intermediate is a graph output; a group that does not match keeps its
 * DequantizeLinear and QuantizeLinear as nodes of their own (float and 8-bit tensors), and the
 * DequantizeLinear of its weight runs in every request too: a float tensor of the weight's size.
 *
 * Signed 8-bit activations (onnxruntime.quantization's default, QuantType.QInt8) on x86-64: ORT's
 * quantized convolutions and matrix products take an unsigned activation only there, so before
 * the groups it turns each signed QuantizeLinear -> DequantizeLinear pair unsigned where the
 * QuantizeLinear has that one reader (activationTypes). A tensor read by two nodes (a residual's
 * skip, a concat's branch) has one DequantizeLinear copy per reader by then, so it stays signed,
 * and so do the groups around it: they run as float ops. A ResNet-18 quantized with the defaults
 * asks ORT for a 133 MB pattern at batch 16 where its unsigned twin asks for 17.7 MB.
 */
import { type ConstTensor, isQuantType, type LNode, type QuantType } from "../compiler/ir.ts";
import { fileQuantType, quantRange } from "../compiler/tensor-data.ts";
import { readersOf } from "./ort-fusions.ts";

/** Float op -> the quantized node ORT runs for a whole DQ -> op -> Q group. */
const QLINEAR: Readonly<Record<string, string>> = {
  Conv: "QLinearConv", MatMul: "QLinearMatMul", Gemm: "QGemm", Add: "QLinearAdd", Mul: "QLinearMul", Concat: "QLinearConcat",
  GlobalAveragePool: "QLinearGlobalAveragePool", AveragePool: "QLinearAveragePool",
  Sigmoid: "QLinearSigmoid", LeakyRelu: "QLinearLeakyRelu", Softmax: "QLinearSoftmax", Where: "QLinearWhere",
};
/** Float op -> the node ORT runs for DQ inputs and a float output (no QuantizeLinear after it). */
const TO_FLOAT: Readonly<Record<string, string>> = { MatMul: "MatMulIntegerToFloat", Gemm: "QGemm" };
/** Ops ORT runs on the 8-bit tensor itself, the DequantizeLinear and QuantizeLinear around them dropped. */
const DROP_QDQ = new Set([
  "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "MaxPool", "Resize", "Gather", "GatherElements", "Slice", "Expand",
  "DepthToSpace", "SpaceToDepth", "Tile",
  // Order-preserving reductions, on 8 bits only: ORT 1.32's optimized QDQ text CNN runs its
  // max-over-time pooling (ReduceMax) on the QLinearConv's 8-bit output, where the replay had a
  // float copy of it (its block 2.2 times ORT's); a one-node QDQ ReduceMin likewise, a 16-bit one not.
  "ReduceMax", "ReduceMin",
]);

/**
 * The ops whose QDQ pair ORT's CPU drops on 16-bit values too (the generic drop selector): all
 * of DROP_QDQ but those whose selectors take 8 bits only.
 */
const SIXTEEN_BIT_DROP = new Set([...DROP_QDQ].filter((op) => !["MaxPool", "Resize", "DepthToSpace", "SpaceToDepth", "ReduceMax", "ReduceMin"].includes(op)));

type Readers = Map<string, LNode[]>;

/**
 * Whether ORT's quantized convolution and matrix-product groups take a signed 8-bit activation
 * (QDQIsInt8Allowed in its QDQ selector-action transformer): on ARM only. On x86-64 it converts
 * what it can to unsigned first (activationTypes) and leaves the rest in float.
 */
const SIGNED_ACTIVATIONS_FUSE = process.arch === "arm64";

/** A QuantizeLinear's or DequantizeLinear's zero point: its single value and integer type; undefined where absent, null where not a constant scalar. */
function zeroPoint(n: LNode, constOf: (name: string) => ConstTensor | undefined): { value: number; type: QuantType | undefined } | undefined | null {
  if (!n.inputs[2]) return undefined;
  const zp = constOf(n.inputs[2]);
  return zp && zp.data.length === 1 ? { value: zp.data[0]!, type: fileQuantType(zp) } : null;
}

/**
 * The integer type of each quantized tensor (8 or 16 bits) as ORT's group selectors see it: the file's, except
 * that on x86-64 a signed QuantizeLinear whose one reader is a DequantizeLinear of the same
 * constant zero point is made unsigned with it (QDQS8ToU8Transformer: zero point + 128). Run
 * after the DequantizeLinear copies (uniqueDequantizers), as ORT runs it, so a tensor two nodes
 * read stays signed. `dtypeOf`: a graph input's type.
 */
function activationTypes(nodes: readonly LNode[], readers: Readers, constOf: (name: string) => ConstTensor | undefined, dtypeOf: (name: string) => string | undefined, madeUnsigned: Set<string>): (tensor: string) => QuantType | undefined {
  const types = new Map<string, QuantType>();
  for (const q of nodes) {
    if (q.op !== "QuantizeLinear" || !q.outputs[0]) continue;
    const zp = zeroPoint(q, constOf);
    let type: QuantType | undefined = zp === undefined ? "uint8" : zp?.type;
    const r = readers.get(q.outputs[0]) ?? [];
    if (type === "int8" && !SIGNED_ACTIVATIONS_FUSE && r.length === 1 && r[0]!.op === "DequantizeLinear") {
      const dqZp = zeroPoint(r[0]!, constOf);
      if (dqZp !== null && (dqZp?.type ?? "int8") === "int8" && (dqZp?.value ?? 0) === zp!.value) {
        type = "uint8";
        madeUnsigned.add(q.outputs[0]);
      }
    }
    if (type) types.set(q.outputs[0], type);
  }
  return (t) => {
    const c = constOf(t);
    const d = c ? fileQuantType(c) : types.get(t) ?? dtypeOf(t);
    return d && isQuantType(d) ? d : undefined;
  };
}

/**
 * Whether ORT's selector takes a group of these integer types (qdq_selectors.cc): `inputs`, the
 * type behind each quantized input of the float op (undefined: not quantized, or not known);
 * `output`, the QuantizeLinear's (undefined: none). A convolution or matrix product takes a
 * signed activation only where SIGNED_ACTIVATIONS_FUSE, with a signed weight; QGemm takes one
 * with a signed weight anywhere. Every other group, and a dropped pair, has one type throughout.
 */
function selectorTakes(fused: string, inputs: ReadonlyArray<QuantType | undefined>, output: QuantType | undefined): boolean {
  const [a, b] = inputs;
  // 16-bit values (QUInt16, QInt16 activations): only the ops that move values drop their pairs on the CPU.
  if ([...inputs, output].some((t) => t === "uint16" || t === "int16") && !SIXTEEN_BIT_DROP.has(fused)) return false;
  switch (fused) {
    case "QLinearConv":
    case "QLinearMatMul":
    case "MatMulIntegerToFloat":
      if (a === "int8" && (!SIGNED_ACTIVATIONS_FUSE || b !== "int8")) return false;
      return output === undefined || a === undefined || output === a;
    case "QGemm":
      if (a === "int8" && b !== "int8") return false;
      return output === undefined || a === undefined || output === a;
    default: {
      const types = new Set([...inputs, output].filter((t) => t !== undefined));
      return types.size <= 1;
    }
  }
}

/** The one QuantizeLinear reading `tensor`, or undefined where anything else reads it too. */
function onlyQuantize(readers: Readers, tensor: string | undefined): LNode | undefined {
  const r = tensor ? (readers.get(tensor) ?? []) : [];
  return r.length === 1 && r[0]!.op === "QuantizeLinear" ? r[0] : undefined;
}

/**
 * Whether a QuantizeLinear clamps at least as much as a Relu (its zero point the 8-bit type's
 * lowest value) or a Clip (its range inside the Clip's bounds), so ORT drops the activation.
 */
function clampsAsMuch(act: LNode, q: LNode, constOf: (name: string) => ConstTensor | undefined): boolean {
  const scale = constOf(q.inputs[1] ?? "")?.data;
  const zpConst = q.inputs[2] ? constOf(q.inputs[2]) : undefined;
  if (!scale || scale.length !== 1 || (q.inputs[2] && (!zpConst || zpConst.data.length !== 1))) return false;
  const [lowest, highest] = quantRange((zpConst && fileQuantType(zpConst)) ?? "uint8");
  const zp = zpConst?.data[0] ?? 0;
  const qMin = (lowest - zp) * scale[0]!;
  const qMax = (highest - zp) * scale[0]!;
  if (act.op === "Relu") return zp === lowest;
  const lo = typeof act.attrs.min === "number" ? act.attrs.min : -Infinity;
  const hi = typeof act.attrs.max === "number" ? act.attrs.max : Infinity;
  return lo <= qMin && hi >= qMax;
}

/** Relu / Clip -> QuantizeLinear where the QuantizeLinear clamps as much: the activation goes, its input quantized directly. */
function dropClampsBeforeQuantize(nodes: readonly LNode[], graphOutputs: ReadonlySet<string>, constOf: (name: string) => ConstTensor | undefined): LNode[] {
  const readers = readersOf(nodes, graphOutputs);
  const dropped = new Map<string, string>(); // the activation's output -> its input
  for (const n of nodes) {
    if ((n.op !== "Relu" && n.op !== "Clip") || !n.inputs[0] || !n.outputs[0]) continue;
    const q = onlyQuantize(readers, n.outputs[0]);
    if (q && clampsAsMuch(n, q, constOf)) dropped.set(n.outputs[0], n.inputs[0]);
  }
  if (dropped.size === 0) return [...nodes];
  return nodes.filter((n) => !(n.outputs[0] && dropped.has(n.outputs[0]))).map((n) => (n.op === "QuantizeLinear" && dropped.has(n.inputs[0]!) ? { ...n, inputs: [dropped.get(n.inputs[0]!)!, ...n.inputs.slice(1)] } : n));
}

/**
 * ORT's EnsureUniqueDQForNodeUnit: a DequantizeLinear of a computed tensor read by several nodes
 * is copied, one for each reader after the first, so that each can join a group of its own. A
 * copy no group takes is a float tensor of its own: a dynamically quantized DistilBERT's
 * embedding rows, read by an Add and a Shape, are dequantized twice in ORT's optimized graph.
 */
function uniqueDequantizers(nodes: readonly LNode[], outs: ReadonlySet<string>, isConst: (name: string) => boolean, copyOf: Map<string, string>): LNode[] {
  const readers = readersOf(nodes, outs);
  const copies = new Map<LNode, LNode[]>(); // a DequantizeLinear -> its copies, each run where it runs
  const readsCopy = new Map<LNode, Map<string, string>>(); // a reader -> the copy it reads instead
  for (const n of nodes) {
    const out = n.outputs[0];
    if (n.op !== "DequantizeLinear" || !out || isConst(n.inputs[0] ?? "")) continue;
    const others = [...new Set((readers.get(out) ?? []).filter((r) => r.outputs.length > 0))].slice(1);
    if (others.length === 0) continue;
    copies.set(n, others.map((r, k) => {
      const name = `${out}/duplicated${k}`;
      copyOf.set(name, out);
      readsCopy.set(r, new Map([...(readsCopy.get(r) ?? []), [out, name]]));
      return { ...n, name: `${n.name}/duplicated${k}`, outputs: [name] };
    }));
  }
  if (copies.size === 0) return [...nodes];
  return nodes.flatMap((n) => {
    const read = readsCopy.get(n);
    const self = read ? { ...n, inputs: n.inputs.map((i) => read.get(i) ?? i) } : n;
    return [...(copies.get(n) ?? []), self];
  });
}

export interface QdqRewrite {
  nodes: LNode[];
  /** The DequantizeLinear copies' outputs (uniqueDequantizers): the value each holds. */
  copyOf: Map<string, string>;
  /** The float weights ORT dequantizes in every request, as the nodes read them -> the folded constant each holds. */
  dequantizedWeights: Map<string, string>;
  /**
   * The outputs of the ops run on 8-bit tensors (DROP_QDQ: their QuantizeLinear's output now)
   * -> the op's own output in the file: ORT keeps such a node, and its index, where it makes a
   * new node for a fused group.
   */
  keptAs: Map<string, string>;
  /** The signed 8-bit tensors ORT makes unsigned (activationTypes), which its kernels read as uint8. */
  madeUnsigned: Set<string>;
}

/** The suffix of a weight's float tensor that ORT dequantizes in every request (a DequantizeLinear's output kept: module comment). */
const DEQUANTIZED = "#dequantized";
/** The constant a value named by ortQdqFusions holds, or the name itself: `w#dequantized1` -> `w`. */
export const weightOfDequantized = (name: string): string => name.replace(/#dequantized\d*$/, "");

/** A quantized tensor as ORT's quantized kernels take it: the 8-bit values, their scale and zero point ("" where absent). */
type Quantized = [values: string, scale: string, zeroPoint: string];

/**
 * The inputs of ORT's node for a fused group, in the order its kernel takes them (the QOperator
 * form's: ONNX's QLinearConv and QLinearMatMul, com.microsoft's others), so that the rules after
 * this (the kernels' scratch) read a fused group and a QOperator file's node alike. `q(i)`: the
 * float op's input i, quantized; `out`: the output's scale and zero point.
 */
function kernelInputs(op: string, n: LNode, q: (i: number) => Quantized, out: [string, string] | undefined): string[] {
  const all = (k: number) => n.inputs.map((_, i) => i).filter((i) => i >= k);
  switch (op) {
    case "QLinearConv":
      return [...q(0), ...q(1), ...out!, ...(n.inputs[2] ? [q(2)[0]] : [])];
    case "QLinearMatMul":
    case "QLinearAdd":
    case "QLinearMul":
      return [...q(0), ...q(1), ...out!];
    case "QGemm":
      return [...q(0), ...q(1), n.inputs[2] ? q(2)[0] : "", ...(out ?? [])];
    case "MatMulIntegerToFloat": {
      const [a, b] = [q(0), q(1)];
      return [a[0], b[0], a[1], b[1], a[2], b[2]];
    }
    case "QLinearConcat":
      return [...out!, ...all(0).flatMap((i) => q(i))];
    case "QLinearWhere":
      return [n.inputs[0]!, ...q(1), ...q(2), ...out!];
    default: // the one-input ops: pools, Sigmoid, LeakyRelu, Softmax
      return [...q(0), ...out!];
  }
}

/**
 * The QDQ groups fused (module comment). `isConst`: an initializer or folded value, which a
 * group reads as it is; `constOf`: its value (the zero points and bounds the clamp rule reads);
 * `dequantizedConst`: for a constant folded from a DequantizeLinear of an initializer (a
 * weight), that DequantizeLinear's inputs (the 8-bit weight, its scale and zero point).
 */
export function ortQdqFusions(
  nodes0: readonly LNode[],
  graphOutputs: readonly string[],
  isConst: (name: string) => boolean,
  constOf: (name: string) => ConstTensor | undefined,
  dequantizedConst: (name: string) => readonly string[] | undefined,
  dtypeOf: (name: string) => string | undefined = () => undefined,
): QdqRewrite {
  const copyOf = new Map<string, string>();
  const dequantizedWeights = new Map<string, string>();
  const keptAs = new Map<string, string>();
  const madeUnsigned = new Set<string>();
  const quantized = (n: LNode) => n.op === "DequantizeLinear" || n.op === "QuantizeLinear" || n.inputs.some((t) => t && isConst(t) && dequantizedConst(t));
  if (!nodes0.some(quantized)) return { nodes: [...nodes0], copyOf, dequantizedWeights, keptAs, madeUnsigned };
  const outs = new Set(graphOutputs);
  const nodes = dropClampsBeforeQuantize(uniqueDequantizers(nodes0, outs, isConst, copyOf), outs, constOf);
  const readers = readersOf(nodes, outs);
  const typeOf = activationTypes(nodes, readers, constOf, dtypeOf, madeUnsigned);
  const producer = new Map<string, LNode>();
  for (const n of nodes) for (const o of n.outputs) if (o) producer.set(o, n);
  const dequantized = (t: string) => {
    const p = producer.get(t);
    return p?.op === "DequantizeLinear" ? p : undefined;
  };
  const gone = new Set<LNode>();
  const replaced = new Map<LNode, LNode>();
  /** The DequantizeLinear inputs behind a tensor: a computed one's node, a folded constant's. */
  const dequantizedFrom = (t: string): readonly string[] | undefined => (!t ? undefined : isConst(t) ? dequantizedConst(t) : dequantized(t)?.inputs);
  for (const n of nodes) {
    if (n.outputs.length !== 1) continue;
    const q = onlyQuantize(readers, n.outputs[0]);
    // An op that moves values: its data (input 0) dequantized, whatever its other inputs (a
    // Gather's indices, a Reshape's run-time shape). Any other: every computed input.
    const drop = q !== undefined && DROP_QDQ.has(n.op) && dequantizedFrom(n.inputs[0] ?? "") !== undefined;
    const computed = n.inputs.filter((i) => i && !isConst(i));
    const fused = drop ? n.op : computed.length > 0 && computed.every((i) => dequantized(i)) ? (q ? QLINEAR[n.op] : TO_FLOAT[n.op]) : undefined;
    if (!fused) continue;
    const quantizedInput = (i: number): Quantized => {
      const dq = dequantizedFrom(n.inputs[i] ?? "");
      return dq ? [dq[0] ?? "", dq[1] ?? "", dq[2] ?? ""] : [n.inputs[i] ?? "", "", ""];
    };
    // The 8-bit type behind each dequantized input: its tensor's, else its zero point's.
    const inputTypes = (drop ? [0] : n.inputs.map((_, i) => i)).map((i) => {
      const [values, , zp] = dequantizedFrom(n.inputs[i] ?? "") ? quantizedInput(i) : [];
      return values ? (typeOf(values) ?? (zp ? typeOf(zp) : undefined)) : undefined;
    });
    if (!selectorTakes(fused, inputTypes, q?.outputs[0] ? typeOf(q.outputs[0]) : undefined)) continue;
    const inputs = drop ? n.inputs.map((t, i) => (i === 0 ? quantizedInput(0)[0] : t)) : kernelInputs(fused, n, quantizedInput, q ? [q.inputs[1] ?? "", q.inputs[2] ?? ""] : undefined);
    replaced.set(n, { ...n, op: fused, inputs, outputs: q ? [...q.outputs] : [...n.outputs] });
    if (drop && q?.outputs[0]) keptAs.set(q.outputs[0], n.outputs[0]!);
    if (q) gone.add(q);
  }
  // A DequantizeLinear every reader of which was fused reads nothing any more (ORT gives each
  // reader a copy of its own, so one that something else reads stays for that reader).
  for (const n of nodes) {
    if (n.op !== "DequantizeLinear" || !n.outputs[0]) continue;
    const r = readers.get(n.outputs[0]) ?? [];
    if (r.length > 0 && r.every((x) => replaced.has(x))) gone.add(n);
  }
  // A weight a node reads in float (no group took the node): its DequantizeLinear runs in every
  // request, one for each such reader (ORT's copies), numbered as the file's (ort-pattern.ts).
  const kept = nodes.filter((n) => !gone.has(n)).map((n) => replaced.get(n) ?? n);
  const fusedNodes = new Set(replaced.values());
  const readsWeight = new Map<string, number>();
  return {
    nodes: kept.flatMap((n) => {
      if (fusedNodes.has(n) || n.op === "DequantizeLinear" || n.op === "QuantizeLinear") return [n];
      const added: LNode[] = [];
      const inputs = n.inputs.map((t) => {
        const dq = t && isConst(t) ? dequantizedConst(t) : undefined;
        if (!dq) return t;
        // Counted by the DequantizeLinear's inputs: a lowering's copies of one weight (each
        // LayerNormalization's) are one DequantizeLinear in the file.
        const key = dq.join("\n");
        const k = readsWeight.get(key) ?? 0;
        readsWeight.set(key, k + 1);
        const name = `${t}${DEQUANTIZED}${k || ""}`;
        dequantizedWeights.set(name, t);
        added.push({ op: "DequantizeLinear", name: `${n.name}/weight${added.length}`, inputs: [...dq], outputs: [name], attrs: {} });
        return name;
      });
      return added.length ? [...added, { ...n, inputs }] : [n];
    }),
    copyOf,
    dequantizedWeights,
    keptAs,
    madeUnsigned,
  };
}
