/**
 * ONNX Runtime's NCHWc layout transformer (level "all", on CPUs where MLAS has an NCHWc block:
 * 16 channels with AVX-512, 8 on other x86-64), as the memory-pattern replay (ort-pattern.ts) needs
 * it: which tensors it pads to a whole number of channel blocks, and the reorder copies it adds
 * where a blocked tensor meets an op that reads the plain layout (or the reverse). The rules
 * are ORT's (onnxruntime/core/optimizer/nchwc_transformer.cc), restated for the lowered graph:
 *
 * - Conv (with its fused activation or residual sum): weights static and 4-D. Not grouped:
 *   input channels below the block read the plain input as it is (the first layer), others
 *   must be a multiple of 4 and are blocked (a ReorderInput pads a plain input). Grouped:
 *   depthwise (one input channel a group) with channels a multiple of 4, or output, input and
 *   per-group output channels all multiples of the block.
 *   The output is blocked with its channels padded up to the block.
 * - MaxPool / AveragePool: a 4-D input (2-D pooling), channels a multiple of the block.
 *   GlobalMaxPool / GlobalAveragePool likewise, and only on a blocked input.
 * - On blocked inputs only: Add, Sum, Mul (every input blocked with the same channels and the
 *   same shape: an SE block's Mul of a map by per-channel scales stays plain), Concat along the
 *   channels (every input's channels a multiple of the block), Relu, Sigmoid, Tanh (and
 *   QuickGelu, fused later from a blocked Sigmoid and Mul), BatchNormalization. Transpose NCHW -> NHWC becomes the reorder itself.
 * - A plain consumer of a blocked tensor (or a graph output) gets a ReorderOutput copy, once per
 *   tensor; a Conv or pool that needs a blocked input it does not have gets a ReorderInput.
 *
 * Why it matters: shufflenet_v2_x0_5's first conv (3 -> 24 channels) writes 32 padded channels
 * and a ReorderOutput copies them back to 24 for the MaxPool, which cannot take 24 blocked
 * channels: ORT's pattern block at batch 1 is those two together (2809856 bytes at 224 px), and
 * its channel shuffles copy every block out and back again.
 */
import type { LNode } from "../compiler/ir.ts";
import { cpuFlags } from "./cpu-flags.ts";
import { CONV_SUM, QUICK_GELU } from "./ort-fusions.ts";
import { GELU } from "./ort-fusions-transformer.ts";

/**
 * MLAS's NCHWc block on this CPU (MlasNchwcGetBlockSize): on x86-64 8 (its SSE2 baseline
 * already has NCHWc kernels) or 16 with AVX-512F; elsewhere 1 (no transform).
 */
export function nchwcBlockSize(flags: ReadonlySet<string> = cpuFlags(), arch: string = process.arch): number {
  if (arch !== "x64") return 1;
  return flags.has("avx512f") ? 16 : 8;
}

export interface NchwcGraph {
  /** Dims of a constant (weights), undefined for a computed tensor. */
  constDims(name: string): readonly number[] | undefined;
  /** A tensor's inferred shape (-1 at the batch), undefined when unknown. */
  shapeOf(name: string): readonly number[] | undefined;
  /** A computed tensor's element type (float32 where not given). */
  dtypeOf?(name: string): string | undefined;
  /** Whether ORT's shape inference leaves a value's dims unknown before the run (computed from a run-time shape). */
  shapeUnknown?(name: string): boolean;
}

export interface NchwcRewrite {
  nodes: LNode[];
  /**
   * Blocked tensors (new names) → the plain tensor they stand for and the factor their bytes
   * grow by (padded channels / channels); ReorderInput outputs included.
   */
  blocked: Map<string, { of: string; scale: number }>;
  /**
   * The nodes the rewrite adds to ORT's graph, in the order ORT adds them: a blocked Conv, pool,
   * BatchNormalization, NHWC reorder or Mul by a constant a channel replaces its node with a new
   * one, a ReorderInput follows its reader, and the ReorderOutputs come last (ORT's Finalize). A
   * new node gets the next node index, and the index decides ORT's execution order (ort-order.ts
   * ortOrderOfFinalGraph). The blocked elementwise ops, and Add, Sum, Mul and Concat of blocked
   * maps, keep their nodes.
   */
  added: LNode[];
  /** Each node it rewrites (blocked, or reading a plain copy) → the node that runs in its place. */
  replaced: Map<LNode, LNode>;
}

const REORDER_IN = "ort:ReorderInput";
const REORDER_OUT = "ort:ReorderOutput";
/**
 * Elementwise ops that run on a blocked tensor. QuickGelu is among them because ORT fuses SiLU
 * after the NCHWc rewrite, out of a Sigmoid and a Mul that were both blocked by then (its
 * optimized efficientnet_b0: 49 QuickGelu, each between two NCHWc nodes, no reorder). Measured
 * on ORT 1.32 between two blocked convs, the conv's output read again: Relu, Sigmoid, Tanh,
 * HardSigmoid and Gelu (ONNX's, either approximation, and the one ORT fuses from Erf) stay
 * blocked; LeakyRelu, Clip, Softplus, Elu and an Add, Sub or Div of a constant are copied out
 * and back.
 */
const ELEMENTWISE = new Set(["Relu", "Sigmoid", "Tanh", "HardSigmoid", "Gelu", GELU, QUICK_GELU]);
const BINARY = new Set(["Add", "Sum", "Mul"]);
/** The ops whose blocked form is a node ORT adds (TransformConv, TransformPool, TransformBatchNormalization, TransformTranspose). */
const NEW_NODE_OPS = new Set(["Conv", CONV_SUM, "MaxPool", "AveragePool", "GlobalMaxPool", "GlobalAveragePool", "BatchNormalization", "Upsample", REORDER_OUT]);

/**
 * Whether ORT runs a Resize (or Upsample) on the blocked tensor, as its NCHWc Upsample
 * (nchwc_transformer.cc TransformResize): by constant whole factors of the spatial dims only;
 * from opset 11 given by scales (sizes, with a symbolic batch, keep it plain), nearest with the
 * asymmetric coordinates and floor rounding, linear with asymmetric, align_corners or
 * half_pixel coordinates (not pytorch_half_pixel; ORT 1.32, each mode measured on a blocked
 * conv's output). A YOLO neck's 2x nearest upsample exports so from PyTorch; run plain, its input
 * was copied out of the blocked layout and the concat after it back in, and a small YOLO-style
 * model's replayed pattern was 31 % over ORT's block. DPT's fusion stages upsample by 2,
 * bilinear with aligned corners.
 */
const NCHWC_LINEAR_COORDINATES = new Set(["asymmetric", "align_corners", "half_pixel"]);
function nchwcUpsample(n: LNode): boolean {
  const mode = n.attrs.mode ?? "nearest";
  if (mode !== "nearest" && mode !== "linear") return false;
  if (n.attrs.opset10 !== 1) {
    const coordinates = n.attrs.coordinate_transformation_mode ?? "half_pixel";
    if (n.attrs.sizes_given === 1) return false;
    if (mode === "nearest" && (coordinates !== "asymmetric" || n.attrs.nearest_mode !== "floor")) return false;
    if (mode === "linear" && !NCHWC_LINEAR_COORDINATES.has(coordinates as string)) return false;
  }
  const scales = n.attrs.scales;
  return Array.isArray(scales) && scales.length === 4 && scales.every((f) => Number.isInteger(f) && f > 0) && scales[0] === 1 && scales[1] === 1;
}

/** The input channel count ORT 1.32 needs a multiple of to block a conv of at least a block of them (measured; see the Conv rule below). */
const CHANNEL_MULTIPLE = 4;
const roundUp = (c: number, b: number) => Math.ceil(c / b) * b;

/**
 * Whether ORT blocks a float Conv (NchwcTransformer's TransformConv), from its weight's dims
 * [M, C/group, kh, kw], group and whether its bias is a constant; null where the weight is not a
 * constant of 4 dims (a 1-D or 3-D conv, or one computed in every request) or the bias is not a
 * constant. `plainIn`: it reads a plain input as it is (fewer input channels than the block).
 */
export function ortBlocksConv(w: readonly number[] | undefined, group: number, biasConstant: boolean, block: number): { blocked: boolean; plainIn: boolean } | null {
  if (block <= 1 || !w || w.length !== 4 || !biasConstant) return null;
  const [oc, ic] = [w[0]!, w[1]!];
  // Depthwise: channels a multiple of 4, padded to the block (ORT 1.32's optimized
  // mobilenet_v3_small runs its 72-channel depthwise conv as an NCHWc conv of 80 groups;
  // one of 4, 12, 20, 44 or 100 channels is blocked, one of 2, 6, 10, 18 or 122 stays
  // plain behind a ReorderOutput, measured with a block of 16: shufflenet_v2_x2_0's 122).
  if (group > 1) return { blocked: (ic === 1 && oc === group && oc % CHANNEL_MULTIPLE === 0) || (oc % block === 0 && ic % block === 0 && oc % group === 0 && (oc / group) % block === 0), plainIn: false };
  // Else fewer input channels than the block read the plain input as it is; more, a
  // multiple of 4 of them, padded (ORT 1.32 runs mobilenet_v3_small's 72 -> 24 projection
  // on the 80 channels its depthwise conv wrote, and reorders a plain 24-channel map in).
  // Measured with a block of 16, a plain input of 16, 20, 24, 28, 36 or 124 channels is
  // reordered in, one of 18, 22, 30 or 122 is not and the conv stays plain; a blocked one
  // of 18, 22, 30 or 122 is copied back for a plain conv (shufflenet_v2_x2_0's 1x1 convs
  // after its 122-channel depthwise ones).
  if (ic < block) return { blocked: true, plainIn: true };
  return { blocked: ic % CHANNEL_MULTIPLE === 0, plainIn: false };
}

/** Whether a Mul's inputs are a blocked map and a constant of its channels, [C, 1, 1] or [1, C, 1, 1]. */
function perChannelScale(inputs: readonly string[], inBlocked: (t: string) => { channels: number } | undefined, g: NchwcGraph): boolean {
  const map = inputs.find((t) => inBlocked(t));
  const scale = inputs.find((t) => t !== map);
  if (!map || !scale) return false;
  const dims = g.constDims(scale);
  const c = inBlocked(map)!.channels;
  return !!dims && (JSON.stringify(dims) === JSON.stringify([c, 1, 1]) || JSON.stringify(dims) === JSON.stringify([1, c, 1, 1]));
}
const blockedName = (t: string) => `${t}#nchwc`;

/**
 * The node list (in ORT's order, after its fusions) with ORT's NCHWc rewrite applied: blocked
 * outputs renamed (`t#nchwc`), reorders inserted before their first reader. Identity where the
 * block is 1.
 */
export function ortNchwc(nodes: readonly LNode[], graphOutputs: readonly string[], g: NchwcGraph, block = nchwcBlockSize()): NchwcRewrite {
  const blocked = new Map<string, { of: string; scale: number }>();
  if (block <= 1) return { nodes: [...nodes], blocked, added: [], replaced: new Map() };
  const added: LNode[] = [];
  const replaced = new Map<LNode, LNode>();
  const finalized: LNode[] = [];
  /** Plain tensor → its blocked form and logical channels. */
  const asBlocked = new Map<string, { name: string; channels: number }>();
  const reorderedIn = new Map<string, string>();
  const channelsOf = (t: string) => g.shapeOf(t)?.[1];
  const out: LNode[] = [];
  const markBlocked = (t: string, channels: number) => {
    const name = blockedName(t);
    asBlocked.set(t, { name, channels });
    blocked.set(name, { of: t, scale: roundUp(channels, block) / channels });
    return name;
  };
  /** ReorderInputs pushed for the node being converted: ORT adds them after that node. */
  const pendingReorderIn: LNode[] = [];
  const addNew = (n: LNode) => {
    added.push(n, ...pendingReorderIn.splice(0));
    return n;
  };
  /** A blocked input for a node that needs one: its own, else a ReorderInput (once per tensor). */
  const blockedInput = (x: string): string => {
    const b = asBlocked.get(x);
    if (b) return b.name;
    let r = reorderedIn.get(x);
    if (!r) {
      r = `${x}#reorder-in`;
      reorderedIn.set(x, r);
      const c = channelsOf(x) ?? block;
      blocked.set(r, { of: x, scale: roundUp(c, block) / c });
      const reorder = { op: REORDER_IN, name: `${x}:reorder-in`, inputs: [x], outputs: [r], attrs: {} };
      out.push(reorder);
      pendingReorderIn.push(reorder);
    }
    return r;
  };
  /** Plain tensors read by some node: their ReorderOutput runs before the first of them. */
  const reorderedOut = new Set<string>();
  const plainInput = (x: string): string => {
    const b = asBlocked.get(x);
    if (b && !reorderedOut.has(x)) {
      reorderedOut.add(x);
      const reorder = { op: REORDER_OUT, name: `${x}:reorder-out`, inputs: [b.name], outputs: [x], attrs: {} };
      out.push(reorder);
      finalized.push(reorder);
    }
    return x;
  };
  for (const n of nodes) {
    const o = n.outputs[0];
    const x = n.inputs[0];
    const inBlocked = (t: string | undefined) => (t ? asBlocked.get(t) : undefined);
    let converted: LNode | null = null;
    if (x && (g.dtypeOf?.(x) ?? "float32") !== "float32") {
      // 8-bit values (a quantized model's MaxPool on its uint8 maps): ORT's NCHWc kernels are float only.
    } else if ((n.op === "Conv" || n.op === CONV_SUM) && o && x) {
      const w = g.constDims(n.inputs[1] ?? "");
      const group = typeof n.attrs.group === "number" ? n.attrs.group : 1;
      // ORT reorders a constant weight and bias only (NchwcTransformer's TransformConv): a bias
      // computed in every request (a float16 model's shared one, ort-fp16.ts) leaves the conv plain.
      const bias = n.op === CONV_SUM ? (n.inputs.length > 3 ? n.inputs[2] : undefined) : n.inputs[2];
      const rule = ortBlocksConv(w, group, !bias || g.constDims(bias) !== undefined, block);
      if (rule) {
        const oc = w![0]!;
        const { blocked: ok, plainIn } = rule;
        // ORT fuses the residual Add into the blocked conv only when the sum is blocked with the
        // conv's channels (TransformBinary); else the conv runs blocked, is copied back, and a
        // plain Add follows.
        const sum = n.op === CONV_SUM ? n.inputs.at(-1) : undefined;
        // Nor where it cannot show the two shapes equal before the run (one computed from a
        // run-time shape: LR-ASPP's classifier on an upsample to the input's size): the blocked
        // conv, then a blocked Add of its own (between Reshapes, views).
        if (ok && sum !== undefined && inBlocked(sum)?.channels === oc && (g.shapeUnknown?.(o) || g.shapeUnknown?.(sum))) {
          const conv = `${o}:conv`;
          blocked.set(`${conv}#nchwc`, { of: o, scale: roundUp(oc, block) / oc });
          const input = plainIn ? plainInput(x) : blockedInput(x);
          out.push(addNew({ ...n, op: "Conv", inputs: [input, ...n.inputs.slice(1, -1)], outputs: [`${conv}#nchwc`] }));
          out.push({ op: "Add", name: o, inputs: [`${conv}#nchwc`, asBlocked.get(sum)!.name], outputs: [markBlocked(o, oc)], attrs: {} });
          continue;
        }
        if (ok && sum !== undefined && inBlocked(sum)?.channels !== oc) {
          const conv = `${o}:conv`;
          blocked.set(`${conv}#nchwc`, { of: o, scale: roundUp(oc, block) / oc });
          blocked.set(conv, { of: o, scale: 1 }); // the plain copy: the Add's shape
          const input = plainIn ? plainInput(x) : blockedInput(x);
          out.push(addNew({ ...n, op: "Conv", inputs: [input, ...n.inputs.slice(1, -1)], outputs: [`${conv}#nchwc`] }));
          const reorder = { op: REORDER_OUT, name: `${conv}:reorder-out`, inputs: [`${conv}#nchwc`], outputs: [conv], attrs: {} };
          finalized.push(reorder);
          out.push(reorder);
          out.push({ op: "Add", name: o, inputs: [conv, plainInput(sum)], outputs: [o], attrs: {} });
          continue;
        }
        if (ok) {
          const inputs = [plainIn ? plainInput(x) : blockedInput(x), ...n.inputs.slice(1)];
          if (sum !== undefined) inputs[inputs.length - 1] = asBlocked.get(sum)!.name;
          converted = { ...n, inputs, outputs: [markBlocked(o, oc), ...n.outputs.slice(1)] };
        }
      }
    } else if ((n.op === "MaxPool" || n.op === "AveragePool") && o && x && n.outputs.length === 1) {
      // A 2-D pool only (TransformPool: an input of rank 4): a 1-D audio net's MaxPool of its
      // (N, C, L) maps stays plain, where blocking it put two reorder copies in the replay.
      const c = g.shapeOf(x)?.length === 4 ? channelsOf(x) : undefined;
      if (c !== undefined && c % block === 0) converted = { ...n, inputs: [blockedInput(x), ...n.inputs.slice(1)], outputs: [markBlocked(o, c)] };
    } else if ((n.op === "GlobalMaxPool" || n.op === "GlobalAveragePool") && o && inBlocked(x) && inBlocked(x)!.channels % block === 0) {
      converted = { ...n, inputs: [inBlocked(x)!.name], outputs: [markBlocked(o, inBlocked(x)!.channels)] };
    } else if (BINARY.has(n.op) && o && n.inputs.length >= 2 && n.inputs.every((t) => inBlocked(t))) {
      const c = inBlocked(x)!.channels;
      const shape = JSON.stringify(g.shapeOf(x!) ?? null);
      if (n.inputs.every((t) => inBlocked(t)!.channels === c && JSON.stringify(g.shapeOf(t) ?? null) === shape) && shape !== "null")
        converted = { ...n, inputs: n.inputs.map((t) => inBlocked(t)!.name), outputs: [markBlocked(o, c)] };
    } else if (n.op === "Mul" && o && n.inputs.length === 2 && perChannelScale(n.inputs, inBlocked, g)) {
      // A blocked map times a constant a channel: ORT makes it a depthwise NCHWc conv (a node
      // of its own). poolformer's layer scales after its second MLP conv.
      const t = n.inputs.find((i) => inBlocked(i))!;
      converted = { ...n, inputs: n.inputs.map((i) => (i === t ? inBlocked(t)!.name : i)), outputs: [markBlocked(o, inBlocked(t)!.channels)] };
      addNew(converted);
    } else if (n.op === "Concat" && o && n.attrs.axis === 1 && n.inputs.every((t) => inBlocked(t) && inBlocked(t)!.channels % block === 0)) {
      const c = n.inputs.reduce((a, t) => a + inBlocked(t)!.channels, 0);
      converted = { ...n, inputs: n.inputs.map((t) => inBlocked(t)!.name), outputs: [markBlocked(o, c)] };
    } else if ((ELEMENTWISE.has(n.op) || (n.op === "BatchNormalization" && n.inputs.slice(1).every((p) => g.constDims(p) !== undefined))) && o && inBlocked(x) && n.outputs.length === 1) {
      // A BatchNormalization becomes a depthwise NCHWc conv of its constants (TransformBatchNormalization):
      // with one computed in every request (a float16 model's shared Cast, ort-fp16.ts) it runs plain.
      converted = { ...n, inputs: [inBlocked(x)!.name, ...n.inputs.slice(1)], outputs: [markBlocked(o, inBlocked(x)!.channels)] };
    } else if ((n.op === "Resize" || n.op === "Upsample") && o && inBlocked(x) && nchwcUpsample(n)) {
      converted = { ...n, op: "Upsample", inputs: [inBlocked(x)!.name], outputs: [markBlocked(o, inBlocked(x)!.channels)] };
    } else if (n.op === "Transpose" && o && inBlocked(x) && JSON.stringify(n.attrs.perm) === "[0,2,3,1]") {
      // The NHWC transpose of a blocked tensor is ORT's ReorderOutput (channels last) itself.
      converted = { ...n, op: REORDER_OUT, inputs: [inBlocked(x)!.name] };
    }
    if (converted) {
      // Conv, pools, BatchNormalization (a depthwise NCHWc conv) and the NHWC reorder are new
      // nodes in ORT; the others keep theirs.
      if (NEW_NODE_OPS.has(converted.op)) addNew(converted);
      replaced.set(n, converted);
      out.push(converted);
      // A blocked graph output is copied back as soon as it is computed (ORT runs the
      // ReorderOutput, a node nothing reads, right after its producer).
      if (o && graphOutputs.includes(o) && converted.op !== REORDER_OUT) plainInput(o);
      continue;
    }
    const reads = n.inputs.map((t) => (t ? plainInput(t) : t));
    const kept = reads.every((t, i) => t === n.inputs[i]) ? n : { ...n, inputs: reads };
    if (kept !== n) replaced.set(n, kept);
    out.push(kept);
  }
  return { nodes: out, blocked, added: [...added, ...finalized], replaced };
}
