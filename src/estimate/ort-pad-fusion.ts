/**
 * ORT's PadFusion (a level-1 rewrite, so every level python-ort and node-ort run): a zero
 * constant Pad whose one reader is a Conv or AveragePool with explicit pads is folded
 * into that reader's pads. The padded tensor never exists, and the reader takes the Pad's input,
 * which keeps a chain of convolutions whole for the NCHWc rewrite (ort-nchwc.ts).
 *
 * TF-style "same" padding exports this way: transformers' MobileNetV1 and V2 put a Pad before
 * every convolution, all-zero where the conv is 1x1. ORT 1.32's optimized graph of the V2 keeps
 * none of its 52; without this rule the replay's block at batch 8 was 83.5 MB where ORT asks for
 * 54.6 MB (ort_pattern_size.py).
 */
import type { LNode, Node } from "../compiler/ir.ts";
import { readersOf } from "./ort-fusions.ts";

/**
 * The since-versions of each op ORT's rule names: an opset whose Pad, Conv or pool is newer
 * (Pad-21, Conv-22, the pools' 22) is left as it is.
 */
const PAD_VERSIONS = [1, 2, 11, 13, 18, 19];
const READER_VERSIONS: Record<string, number[]> = {
  Conv: [1, 11],
  AveragePool: [1, 7, 10, 11, 19],
  // No MaxPool: ORT 1.32 keeps a zero Pad before one (measured: a Pad of [1, 1] spatial pads
  // into a 3x3 MaxPool, ranks 4 and 5, stays; the same into an AveragePool folds), since a max
  // over zero padding is not one over its own padding.
};
/** Every since-version of these ops up to opset 23, to find the one an opset uses. */
const ALL_VERSIONS: Record<string, number[]> = {
  Pad: [1, 2, 11, 13, 18, 19, 21, 23],
  Conv: [1, 11, 22],
  AveragePool: [1, 7, 10, 11, 19, 22],
  MaxPool: [1, 8, 10, 11, 12, 22],
};

/** The version of `op` a model of `opset` runs: the newest since-version at or below it. */
function sinceVersion(op: string, opset: number): number {
  return Math.max(...(ALL_VERSIONS[op] ?? [1]).filter((v) => v <= opset));
}

/** ORT compares the value's bytes with zero: -0.0 is not zero to it. */
const isZero = (v: number) => v === 0 && !Object.is(v, -0);

/**
 * The pads a Pad adds on every axis (its lowering's, as the compiler reads them), where ORT can
 * read them: from opset 11 its pads and value are inputs, which must be constants to ORT (an
 * initializer or a value its folding makes, not one it computes in every request), and a Pad
 * given axes (opset 18) is left as it is.
 */
function padsOf(pad: LNode, file: Node, opset: number, isConst: (name: string) => boolean): number[] | undefined {
  const mode = file.attrs.get("mode");
  if (mode !== undefined && mode !== "constant") return undefined;
  const [, pads, value] = file.inputs;
  // A value slot that is there but empty ("", as torch's LocalResponseNorm export writes its Pad)
  // is no constant to ORT's rule either: the Pad stays.
  if (opset >= 11 && (file.inputs.length > 3 || !pads || !isConst(pads) || (file.inputs.length > 2 && !(value && isConst(value))))) return undefined;
  if (typeof pad.attrs.value === "number" && !isZero(pad.attrs.value)) return undefined;
  return Array.isArray(pad.attrs.pads) ? pad.attrs.pads : undefined;
}

/**
 * Whether ORT folds a Pad into this reader: a supported version, one output (a MaxPool's indices
 * count positions in the unpadded input), and pads the file gives explicitly.
 */
function takesPads(file: Node, opset: number): boolean {
  const versions = READER_VERSIONS[file.opType];
  if (!versions || !versions.includes(sinceVersion(file.opType, opset))) return false;
  if (file.outputs.length > 1) return false;
  const autoPad = file.attrs.get("auto_pad");
  if (autoPad !== undefined && autoPad !== "NOTSET") return false;
  return file.attrs.has("pads");
}

/**
 * The graph after ORT's PadFusion: each Pad it folds gone, its reader reading the Pad's input.
 * The reader keeps its lowered attributes: its output's shape is inferred already and no later
 * rule of the replay reads its pads. `fileNodeOf`: a node as the file has it (the lowering
 * keeps a Pad's data input alone, and fills in pads a Conv's file may not give); `isConst`:
 * whether ORT holds a tensor as a constant. ORT's rule also reaches across a Cast between the
 * Pad and the reader; that shape (a Pad before a float16 cast) is not taken here.
 */
export function ortPadFusion(nodes: readonly LNode[], graphOutputs: ReadonlySet<string>, opset: number, fileNodeOf: (n: LNode) => Node | undefined, isConst: (name: string) => boolean): LNode[] {
  if (!PAD_VERSIONS.includes(sinceVersion("Pad", opset))) return [...nodes];
  const readers = readersOf(nodes, graphOutputs);
  const removed = new Set<LNode>();
  const rewritten = new Map<LNode, LNode>();
  for (const pad of nodes) {
    const out = pad.outputs[0];
    if (pad.op !== "Pad" || !out || !pad.inputs[0]) continue;
    const r = readers.get(out) ?? [];
    const reader = r[0];
    if (r.length !== 1 || !reader || rewritten.has(reader) || reader.inputs[0] !== out) continue;
    const padFile = fileNodeOf(pad);
    const readerFile = fileNodeOf(reader);
    if (!padFile || !readerFile || !takesPads(readerFile, opset)) continue;
    const pads = padsOf(pad, padFile, opset, isConst);
    if (!pads || pads.some((p) => p < 0)) continue;
    // Only the spatial axes: none on the batch or the channels.
    const rank = pads.length / 2;
    if (pads[0] !== 0 || pads[1] !== 0 || pads[rank] !== 0 || pads[rank + 1] !== 0) continue;
    rewritten.set(reader, { ...reader, inputs: [pad.inputs[0], ...reader.inputs.slice(1)] });
    removed.add(pad);
  }
  return nodes.filter((n) => !removed.has(n)).map((n) => rewritten.get(n) ?? n);
}
