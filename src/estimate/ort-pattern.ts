/**
 * The size of ONNX Runtime's CPU memory pattern for a model, per sample, simulated from the
 * graph (docs/memory.md, "ORT's activations"). Measured on tiny-gpt at batch 64: the block
 * ORT's arena is asked for on the second request of a shape is 38.0 MiB, while the tensors
 * alive at once never exceed 19.5 MiB and memlane's compiler packs them into 13.4. Turning
 * off ORT's buffer reuse (`enable_mem_reuse = false`) brings the block down to 21.0 MiB. So
 * the excess is the planner's reuse rule, replayed here:
 *
 * 1. The allocation plan, in execution order: an output of a view op (Reshape, Flatten,
 *    Squeeze, Unsqueeze) shares its input's buffer; an output of an op that may run in place
 *    (unary activations, Softmax) takes its first input's buffer when this node is that
 *    buffer's last user and the sizes match; otherwise it takes the most recently freed
 *    buffer of exactly its size; otherwise a new buffer. A buffer is freed after the node
 *    that used it last (all the values sharing it counted).
 * 2. The pattern: the run's allocations of new buffers and their frees, each placed at the
 *    best-fitting gap between the blocks alive then, else after the last of them
 *    (onnxruntime/core/framework/mem_pattern_planner.h). A reused buffer keeps its place for
 *    the union of its values' lives, which pins it and fragments the block.
 *
 * Before both, ORT's graph rewrites: its common subexpression elimination (ort-cse.ts), a
 * quantized model's groups (ort-qdq.ts: DequantizeLinear -> op -> QuantizeLinear as one 8-bit
 * kernel; ort-quant-dynamic.ts: a dynamically quantized MatMul as one node), its fusions
 * (ort-fusions.ts), on x86-64 its NCHWc layout (ort-nchwc.ts: blocked tensors, renamed
 * `t#nchwc`, take their plain tensor's bytes with the channels padded, and the reorder copies
 * it adds are buffers of their own), a quantized CNN's channels-last region (ort-nhwc.ts:
 * `t#nhwc`, with the Transposes in and out) and its transpose optimizer (ort-transposes.ts:
 * Transposes moved down through elementwise ops and cancelled).
 *
 * The graph is inferred with ORT's own shape rule where the compiler's differs (ort-lstm.ts:
 * its layout 0 LSTM) or has none (ort-shapes.ts: ops memlane-rt does not run; the quantized
 * ones in ort-shapes-quantized.ts), and the trace carries what kernels take from the arena while
 * they run (ort-scratch.ts), which the pattern leaves out. Two values share a buffer only where
 * ORT's planner sees the same shape, symbol for symbol (carriedShapes).
 *
 * Graph inputs, weights and graph outputs are not part of the pattern. Sizes are per sample (a
 * computed value without the batch, a dynamic quantization's scale, counts its own bytes at any
 * batch): the pattern of these graphs scales with the batch.
 */
import { inferGraph } from "../compiler/infer.ts";
import { DTYPE_BYTES, type DType, defaultDtype, type LNode, numel, perSample } from "../compiler/ir.ts";
import type { Graph } from "../compiler/ir.ts";
import { topoSort } from "../compiler/order.ts";
import { ortCommonSubexpressions } from "./ort-cse.ts";
import { asOrtRunsHalfPrecision, isHalfPrecision } from "./ort-fp16.ts";
import { withOrtFunctionBodies } from "./ort-functions.ts";
import { CONV_SUM, ortFusions } from "./ort-fusions.ts";
import { ortPadFusion } from "./ort-pad-fusion.ts";
import { ortConvAffineFusion } from "./ort-conv-affine.ts";
import { ortNoopElimination } from "./ort-noop-elimination.ts";
import { type KernelScratch, ortKernelScratch } from "./ort-scratch.ts";
import { ortNchwc } from "./ort-nchwc.ts";
import { channelsFirstName, ortNhwc } from "./ort-nhwc.ts";
import { ortQdqFusions, weightOfDequantized } from "./ort-qdq.ts";
import { ortDynamicQuantFusions } from "./ort-quant-dynamic.ts";
import { inOrtOrder, ortOrderOfFinalGraph } from "./ort-order.ts";
import { ortRunTimeFolds, runTimeShapesOrtInfers, withRunTimeReads } from "./ort-run-time.ts";
import { ORT_SHAPE_LOWERINGS } from "./ort-shapes.ts";
import { MADE_TRANSPOSE, ortPushTransposes, ortShapesBeforeTransposes, type TransposedValue } from "./ort-transposes.ts";

/** Ops whose ORT CPU kernels alias their first input (no new buffer). */
const VIEW_OPS = new Set(["Reshape", "Flatten", "Squeeze", "Unsqueeze"]);
/** Ops whose ORT CPU kernels declare MayInplace(0, 0). */
const INPLACE_OPS = new Set([
  "Relu", "LeakyRelu", "Sigmoid", "Tanh", "Elu", "Selu", "HardSigmoid", "Softplus", "Softsign", "ThresholdedRelu", "Clip", "Softmax",
]);
/**
 * A value's element size as ORT's planner compares it: a freed buffer goes to a value of the
 * same shape and element size, whatever the type (allocation_planner.cc SameSize), so a uint8
 * tensor and an int8 one share (a signed QDQ model's unsigned and signed activations).
 */
const elementSize = (dtype: string | undefined): string => `${DTYPE_BYTES[(dtype ?? "float32") as DType] ?? 4}-byte`;

/** ORT's allocations are 64-byte aligned. */
const ALIGN = 64;

interface Buffer {
  id: number;
  size: number;
  /** The shape of the value it was made for (ORT reuses a freed buffer for a value of the same shape only); null: not known before the run. */
  shape: string | null;
  /** Uses left (node inputs over every value sharing it). */
  uses: number;
  /** Its size does not grow with the batch (a value ORT computes at run time from constants and static dims: ort-run-time.ts). */
  fixed: boolean;
  /** Steps of its first allocation and of the free that ends the last value placed in it. */
  first: number;
  last: number;
}

/**
 * One step of the run's trace: a new buffer allocated, or a buffer freed. `output`: a graph
 * output, which ORT takes from its arena apart from the pattern and frees when the caller lets
 * go of it (after the request here); `scratch`: what a kernel asks the arena for while it runs
 * and frees before it returns (ort-scratch.ts), in every request. The pattern leaves both out.
 * `fixed`: `size` is the buffer's bytes at any batch (ort-run-time.ts), not a sample's.
 */
export type TraceEvent = { kind: "alloc"; id: number; size: number; output?: true; scratch?: true; fixed?: true } | { kind: "free"; id: number };

/** An allocation's bytes at `batch` samples. */
export function bytesAtBatch(e: Extract<TraceEvent, { kind: "alloc" }>, batch: number): number {
  return e.fixed ? e.size : e.size * batch;
}

/**
 * The planner's pass: which buffer each value gets. A buffer on the freelist is free for the
 * plan; at run time it is freed once, after the last value placed in it.
 */
function planBuffers(nodes: readonly LNode[], inputs: readonly string[], outputs: readonly string[], bytesOf: (name: string) => number, shapeOf: (name: string) => string | null, align = ALIGN, fixedOf: (name: string) => boolean = () => false): Buffer[] {
  const uses = new Map<string, number>();
  for (const n of nodes) for (const i of n.inputs) if (i) uses.set(i, (uses.get(i) ?? 0) + 1);
  const external = new Set([...inputs, ...outputs]);
  const bufferOf = new Map<string, Buffer>();
  const buffers: Buffer[] = [];
  let freelist: Buffer[] = []; // most recently freed first
  nodes.forEach((n, step) => {
    for (const o of n.outputs) {
      if (!o || external.has(o)) continue;
      const size = Math.ceil(bytesOf(o) / align) * align;
      const myUses = uses.get(o) ?? 0;
      const inplaceOn = n.op === CONV_SUM ? n.inputs.at(-1) : n.inputs[0];
      const src = inplaceOn ? bufferOf.get(inplaceOn) : undefined;
      const shape = shapeOf(o);
      // A view of a graph input (wav2vec2's Unsqueeze of its waveform) is the caller's tensor:
      // no buffer from the arena, like the input itself.
      if (!src && VIEW_OPS.has(n.op) && inplaceOn && inputs.includes(inplaceOn)) continue;
      if (src && (VIEW_OPS.has(n.op) || ((INPLACE_OPS.has(n.op) || n.op === CONV_SUM) && shape !== null && src.shape !== null && src.uses === 1 && src.size === size))) {
        src.uses += myUses;
        bufferOf.set(o, src);
        continue;
      }
      const fixed = fixedOf(o);
      // ORT's planner gives a freed buffer only to a value whose shape it knows and that is not a
      // scalar (allocation_planner.cc FindReusableTensor: a rank-0 shape takes none).
      const at = shape === null || shape.endsWith(" []") ? -1 : freelist.findIndex((b) => b.size === size && b.shape === shape && b.fixed === fixed);
      const b = at >= 0 ? freelist.splice(at, 1)[0]! : { id: buffers.length, size, shape, uses: 0, fixed, first: step, last: step };
      if (at < 0) buffers.push(b);
      b.uses = myUses;
      bufferOf.set(o, b);
    }
    const done = new Set<Buffer>();
    for (const i of n.inputs) {
      const b = i ? bufferOf.get(i) : undefined;
      if (b) { b.uses--; done.add(b); }
    }
    for (const o of n.outputs) if (o && bufferOf.has(o)) done.add(bufferOf.get(o)!);
    for (const b of done) {
      if (b.uses > 0) continue;
      b.last = step;
      freelist = [b, ...freelist.filter((x) => x !== b)];
    }
  });
  return buffers;
}

/**
 * The run's trace: at each step, the buffers it allocates (in plan order) and the graph
 * outputs it computes, then the buffers it frees; the outputs are freed after the last step.
 */
function runTrace(buffers: readonly Buffer[], steps: number, outputs: ReadonlyArray<{ id: number; size: number; step: number }> = [], scratch: ReadonlyArray<KernelScratch & { step: number }> = []): TraceEvent[] {
  const trace: TraceEvent[] = [];
  let nextId = buffers.length + outputs.length;
  for (let s = 0; s < steps; s++) {
    // A kernel's scratch is taken before or after its outputs, and freed (last first) once the
    // outputs are there.
    const mine = scratch.find((k) => k.step === s);
    const ids = (mine?.sizes ?? []).map(() => nextId++);
    const afterIds = (mine?.after ?? []).map(() => nextId++);
    const take = (sizes: readonly number[], at: readonly number[], fixed: readonly boolean[] | undefined, freedAfter: readonly (number | undefined)[] = []) =>
      sizes.forEach((size, i) => {
        trace.push({ kind: "alloc", id: at[i]!, size, scratch: true, ...(fixed?.[i] ? { fixed: true as const } : {}) });
        freedAfter.forEach((j, k) => j === i && trace.push({ kind: "free", id: at[k]! }));
      });
    const takeScratch = () => mine && take(mine.sizes, ids, mine.fixed, mine.freedAfter);
    if (mine?.beforeOutputs) takeScratch();
    for (const b of buffers) if (b.first === s) trace.push({ kind: "alloc", id: b.id, size: b.size, ...(b.fixed ? { fixed: true as const } : {}) });
    for (const o of outputs) if (o.step === s) trace.push({ kind: "alloc", id: o.id, size: o.size, output: true });
    if (mine && !mine.beforeOutputs) takeScratch();
    if (mine?.after) take(mine.after, afterIds, mine.afterFixed);
    for (const id of [...afterIds].reverse()) trace.push({ kind: "free", id });
    for (const [i, id] of [...ids.entries()].reverse()) if (mine?.freedAfter?.[i] === undefined) trace.push({ kind: "free", id });
    for (const b of buffers) if (b.last === s) trace.push({ kind: "free", id: b.id });
  }
  for (const o of outputs) trace.push({ kind: "free", id: o.id });
  return trace;
}

/**
 * The pattern's size, as ORT's planner lays it out (mem_pattern_planner.h TraceAllocation): the
 * best fit among the gaps between live blocks and the room between the last one and the
 * high-water mark, else right after the last live block. Without the room at the tail as a
 * candidate, Swin's pattern (transformers) was 9.1 % and efficientnet_b3's 15.4 % under the
 * block ORT asked for: a tensor that fit the tail exactly took an inside gap a larger one
 * needed later.
 */
export function patternBytes(trace: readonly TraceEvent[]): number {
  let blocks: Array<{ id: number; offset: number; size: number }> = []; // sorted by offset
  let peak = 0;
  const apart = new Set(trace.flatMap((e) => (e.kind === "alloc" && (e.output || e.scratch) ? [e.id] : [])));
  for (const e of trace) {
    if (apart.has(e.id)) continue;
    if (e.kind === "free") {
      blocks = blocks.filter((b) => b.id !== e.id);
      continue;
    }
    let current = 0;
    let waste = Number.POSITIVE_INFINITY;
    const last = blocks.at(-1);
    let offset = last ? last.offset + last.size : 0;
    let at = blocks.length;
    blocks.forEach((b, i) => {
      if (b.offset >= current) {
        const gap = b.offset - current;
        if (gap >= e.size && gap - e.size < waste) {
          waste = gap - e.size;
          offset = current;
          at = i;
        }
      }
      current = Math.max(current, b.offset + b.size);
    });
    // The room between the last live block and the pattern's high-water mark is a gap too
    if (current < peak && peak - current >= e.size && peak - current - e.size < waste) {
      offset = current;
      at = blocks.length;
    }
    peak = Math.max(peak, offset + e.size);
    blocks.splice(at, 0, { id: e.id, offset, size: e.size });
  }
  return peak;
}

/**
 * Values whose shape ONNX shape inference (ORT's, before the run) cannot give: the output of
 * an op that takes a shape computed at run time (Reshape, Expand, ... fed by Shape → Gather →
 * Concat), and everything computed from such a value. ORT neither reuses a freed buffer for
 * them nor theirs for another value (its size check needs both shapes). Measured on the
 * legacy ViT exports, whose attention reshapes are computed this way: without this rule the
 * simulated pattern was 1.7 times the one ORT asks its arena for.
 */
/**
 * Ops whose output shape ORT infers from some inputs alone: an ORT-optimized BERT's
 * EmbedLayerNormalization reads its position ids from a Slice of run-time length, and its output
 * is still [input_ids..., hidden] to ORT. Taken as unknown, every tensor after it was (no buffer
 * reused anywhere), and the replay was 14 % under ORT's block.
 */
const OUTPUT_SHAPE_FROM: Readonly<Record<string, readonly number[]>> = { EmbedLayerNormalization: [0], Attention: [0, 1] };

/**
 * A Resize (or Upsample) by scales of a tensor with a symbolic dim: ONNX's shape inference
 * scales the dims it knows and leaves a symbolic one (the batch) without value or name, even at
 * a scale of 1, so ORT's planner can match the output's shape with no other, nor anything
 * computed from it (allocation_planner.cc SameShape wants equal values or equal names). A
 * style-transfer net's decoder (nearest upsampling by 2, twice): the replay gave its last convs
 * buffers freed at the start of the net, and its pattern was 42 % over ORT's block. By sizes
 * (constant), the output's dims are those sizes. An FPN neck concatenates the upsampled map with
 * a lateral one that has the name: from there ORT reuses again (the replay's pattern was 13 %
 * under ORT's block while the concat's output was taken as unnamed too).
 */
function resizeLosesSymbolicDims(n: Graph["nodes"][number], constant: (x: string) => boolean, symbolicInputs: boolean): boolean {
  if (!symbolicInputs || (n.opType !== "Resize" && n.opType !== "Upsample")) return false;
  const sizes = n.opType === "Resize" ? n.inputs[3] : undefined;
  return !(sizes && constant(sizes));
}

function shapesOrtCannotInfer(g: Graph): Set<string> {
  const fromShape = new Set<string>(); // values computed from a run-time shape alone
  // Values whose shape ORT lacks, with the axes it lacks ("all": every one): ONNX's inference
  // is per dim, so a Concat of a known map and unknown ones still has the known one's other
  // dims, and a Conv of it takes its batch and spatial dims from them and its channels from the
  // weight. UperNet's PSP bottleneck convolves the concatenated upsampled pyramid: its output,
  // and the FPN after it, were taken as unknown (no buffer reused), and the replay's pattern
  // was 34 % under ORT's block.
  const unknown = new Map<string, "all" | Set<number>>();
  const declared = (x: string) => declaredShape(g, x) !== null;
  // A Constant node is an initializer to ORT.
  const constNodes = new Set(g.nodes.filter((n) => n.opType === "Constant").flatMap((n) => n.outputs));
  const constant = (x: string) => g.consts.has(x) || constNodes.has(x);
  const symbolicInputs = g.inputs.some((i) => i.dims.some((d) => typeof d === "string"));
  // Values of a known rank whose batch dim lost its name (resizeLosesSymbolicDims), and what is
  // computed from them: a Concat with another input that has the name takes it back (ONNX's
  // shape inference merges a concat's other dims, input by input), a broadcast does not.
  const unnamed = new Set<string>();
  for (const n of g.nodes) {
    const ins = n.inputs.filter(Boolean);
    if (n.opType === "Shape" || n.opType === "Size") {
      for (const o of n.outputs) fromShape.add(o);
      continue;
    }
    // An If's outputs are its branches' (the compiler inlines the taken one); to ORT their shape
    // is the union of both branches', none where they disagree (LocalResponseNorm's Squeeze of a
    // 5-D map against its Identity). Tensors, not shape values, whatever decides the condition.
    if (n.opType === "If") {
      for (const o of n.outputs) if (o && !declared(o)) unknown.set(o, "all");
      continue;
    }
    const dataIns = ins.filter((x) => !constant(x) && !fromShape.has(x));
    if (dataIns.length === 0) {
      if (ins.some((x) => fromShape.has(x))) for (const o of n.outputs) fromShape.add(o);
      continue;
    }
    const shapedBy = OUTPUT_SHAPE_FROM[n.opType]?.map((i) => n.inputs[i] ?? "").filter(Boolean) ?? ins;
    if (shapedBy.some((x) => fromShape.has(x) || unknown.has(x))) {
      const lost = shapedBy.some((x) => fromShape.has(x)) ? "all" : lostAxes(n, dataIns, (x) => unknown.get(x));
      if (lost === "all" || lost.size > 0) for (const o of n.outputs) if (!declared(o)) unknown.set(o, lost);
    }
    const named = (x: string) => !unnamed.has(x) && !constant(x);
    const loses = resizeLosesSymbolicDims(n, constant, symbolicInputs) || (shapedBy.some((x) => unnamed.has(x)) && !(n.opType === "Concat" && dataIns.some(named)));
    if (loses) for (const o of n.outputs) if (!declared(o) && !unknown.has(o)) unnamed.add(o);
  }
  return new Set([...unknown.keys(), ...unnamed]);
}

/** Ops whose output takes its batch and spatial dims from input 0 and its channels from the weight. */
const CHANNELS_FROM_WEIGHT = new Set(["Conv", "ConvTranspose"]);
/** Ops whose output takes its batch and channel dims from input 0 (its spatial ones too, or 1s). */
const POOLS = new Set(["MaxPool", "AveragePool", "LpPool", "GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"]);

/** The axes of node n's output ORT's shape inference leaves unknown, given what it lacks of its inputs. */
function lostAxes(n: Graph["nodes"][number], dataIns: readonly string[], lostOf: (x: string) => "all" | Set<number> | undefined): "all" | Set<number> {
  const x = lostOf(n.inputs[0] ?? "");
  if (SAME_DIMS.has(n.opType) && dataIns.length === 1) return x ?? new Set();
  if (CHANNELS_FROM_WEIGHT.has(n.opType) || POOLS.has(n.opType)) {
    if (x === undefined) return new Set();
    // Spatial dims of a pool or conv come from the input's: one it lacks stays lacking.
    if (x === "all") return "all";
    return new Set([...x].filter((a) => !(a === 1 && CHANNELS_FROM_WEIGHT.has(n.opType))));
  }
  if (n.opType === "Concat") {
    // Each dim but the axis: known where any input knows it; the axis: where all do.
    const axis = n.attrs.get("axis") as number;
    const lost = dataIns.map((i) => lostOf(i) ?? new Set<number>());
    const known = lost.filter((l): l is Set<number> => l !== "all");
    if (known.length === 0 || axis < 0) return "all";
    const out = new Set<number>([axis]);
    for (const a of new Set(known.flatMap((l) => [...l]))) if (a !== axis && known.every((l) => l.has(a))) out.add(a);
    return out;
  }
  return "all";
}

/**
 * The shape the file declares for `name` (graph.value_info), as ORT's planner compares it: a
 * symbolic dim by its name, a fixed one by its value; null where none is declared or a dim is
 * left unknown. ORT plans from a declared shape (a value computed from a run-time shape then
 * has one; two values share a buffer only where their declared dims match, symbol for symbol),
 * where the compiler infers its own.
 */
function declaredShape(g: Pick<Graph, "declaredShapes">, name: string): (number | string)[] | null {
  const d = g.declaredShapes?.get(name);
  return d && d.every((x) => x !== undefined) ? (d as (number | string)[]) : null;
}

/** Ops whose output ONNX's shape inference gives input 0's shape, symbols and all. */
const SHAPE_OF_INPUT = new Set(["QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "Relu", "Sigmoid", "Tanh", "Erf", "Sqrt", "Abs", "Neg", "Exp", "Log", "Cast", "LeakyRelu", "Clip", "Softmax", "Gelu", "HardSigmoid", "HardSwish"]);
/** Ops whose output ONNX's shape inference gives their one data input's dims, dim for dim (lostAxes). */
const SAME_DIMS = new Set([...SHAPE_OF_INPUT, "Elu", "Selu", "Softplus", "BatchNormalization", "InstanceNormalization", "LayerNormalization", "Dropout", "Identity"]);

/**
 * The shape ORT's planner sees for a value the file declares none for, where ONNX's shape
 * inference carries a declared one through (a QuantizeLinear or an activation copies its
 * input's, symbols included): a quantizer declares the float model's values and adds its
 * QuantizeLinear and DequantizeLinear outputs undeclared, so each of those has its float
 * value's symbols (onnxruntime.quantization's "unk__" dims, one symbol apiece), and two of them
 * share a buffer only where those match. Taken as the inferred dims, a QDQ DistilBERT's 8-bit
 * tensors all matched and the replay chained them through reused buffers: its pattern came out
 * 1.5x ORT's. Null where no declared shape reaches the value.
 */
function carriedShapes(g: Pick<Graph, "declaredShapes" | "nodes" | "inputs">): (name: string) => (number | string)[] | null {
  const producer = new Map(g.nodes.flatMap((n) => n.outputs.map((o): [string, (typeof g.nodes)[number]] => [o, n])));
  const inputs = new Map(g.inputs.flatMap((i) => (i.dims.every((d) => d !== undefined) ? [[i.name, i.dims as (number | string)[]] as const] : [])));
  const memo = new Map<string, (number | string)[] | null>();
  const of = (name: string): (number | string)[] | null => {
    const known = memo.get(name);
    if (known !== undefined) return known;
    memo.set(name, null); // a cycle (none in a valid graph) ends here
    const p = producer.get(name);
    const s = declaredShape(g, name) ?? inputs.get(name) ?? (g.declaredShapes && p && SHAPE_OF_INPUT.has(p.opType) && p.outputs[0] === name && p.inputs[0] ? of(p.inputs[0]) : null);
    memo.set(name, s);
    return s;
  };
  return of;
}

/**
 * ORT's memory pattern for one sample, bytes, at `inputShapes` (-1 at the batch; needed where
 * an input has a symbolic dim besides the batch: the sequence a benchmark feeds); throws what
 * shape inference throws for a graph it cannot follow. Without the buffers whose size does not
 * grow with the batch (ort-run-time.ts), which patternBytesAtBatch counts.
 */
export function ortPatternBytesPerSample(g: Graph, inputShapes?: Record<string, number[]>): number {
  return patternBytes(ortRunTrace(g, inputShapes, ALIGN).filter((e) => !(e.kind === "alloc" && e.fixed)));
}

/**
 * The run's trace for one sample: each new buffer (its bytes, unaligned: ORT asks its arena
 * for a tensor's exact bytes) and each free, in ORT's order, the graph's outputs with them
 * (allocated where they are computed, freed after the request); what a first request of a
 * shape asks the arena for, tensor by tensor (ort-arena.ts). Throws as ortPatternBytesPerSample does.
 */
export function ortRunTracePerSample(g: Graph, inputShapes?: Record<string, number[]>): TraceEvent[] {
  return ortRunTrace(g, inputShapes, 1, true);
}

/** The pattern block at `batch` samples from a per-sample, unaligned trace: each tensor aligned at its real size. */
export function patternBytesAtBatch(tracePerSample: readonly TraceEvent[], batch: number): number {
  return patternBytes(tracePerSample.map((e) => (e.kind === "alloc" ? { ...e, size: Math.ceil(bytesAtBatch(e, batch) / ALIGN) * ALIGN } : e)));
}

/**
 * IsNaN read as Equal(x, x) for shape inference: one node, one bool tensor of its input's
 * shape, as ORT runs it. The compiler lowers no IsNaN (it rewrites it to Not(Equal(x, x)),
 * rewrite-isnan.ts), so inference threw on transformers' `Where(IsNaN(p), 0, p)` softmax guard,
 * and every BERT or ViT export fell back to the compiler's arena for ORT's activations (a
 * tenth of ORT's: bert-tiny at batch 64 estimated 25 MiB where python-ort grew 70). The
 * compiler's rewrite would add a second bool tensor that ORT never allocates.
 */
function isNaNAsEqual(g: Graph): Graph {
  if (!g.nodes.some((n) => n.opType === "IsNaN")) return g;
  return { ...g, nodes: g.nodes.map((n) => (n.opType === "IsNaN" ? { ...n, opType: "Equal", inputs: [n.inputs[0]!, n.inputs[0]!] } : n)) };
}

/** The graph ORT's CPU runs: a float16 model's between its Casts (ort-fp16.ts), a float32 one's function ops as their bodies (ort-functions.ts). */
const asOrtRuns = (g: Graph): Graph => (isHalfPrecision(g) ? asOrtRunsHalfPrecision(g) : withOrtFunctionBodies(g));

/** The graph as ORT's replay infers it: ORT's shape rules where they differ from the compiler's, or where it has none. */
function inferAsOrt(g: Graph, sorted: Graph["nodes"], inputShapes: Record<string, number[]> | undefined) {
  return inferGraph({ ...g, nodes: sorted }, { ...(inputShapes ? { inputShapes } : {}), lowerings: ORT_SHAPE_LOWERINGS, keepRewrittenOps: true, batchlessValues: true, float16Values: true, batchMultipleFirst: true });
}

/**
 * The graph's inputs and outputs as ORT's replay infers them (-k at the batch): the eval-set
 * terms of an ORT estimate where memlane's compiler refused the model. Throws as
 * ortPatternBytesPerSample does.
 */
export function ortGraphIo(g0: Graph, inputShapes?: Record<string, number[]>): Record<"inputs" | "outputs", { shape: number[]; dtype: DType }[]> {
  const g = isNaNAsEqual(asOrtRuns(g0));
  const inf = inferAsOrt(g, topoSort(g), inputShapes);
  const of = (n: string) => ({ shape: inf.shapes.get(n)!, dtype: inf.dtypes.get(n) ?? "float32" });
  return { inputs: inf.inputs.map(of), outputs: inf.outputs.map(of) };
}

function ortRunTrace(g0: Graph, inputShapes: Record<string, number[]> | undefined, align: number, withOutputs = false): TraceEvent[] {
  // A float16 model: the float32 graph ORT's CPU runs between its Casts (ort-fp16.ts).
  const g = isNaNAsEqual(asOrtRuns(g0));
  const sorted = topoSort(g);
  const unknown = shapesOrtCannotInfer({ ...g, nodes: sorted });
  const inf = inferAsOrt(g, sorted, inputShapes);
  // What the compiler folded but ORT computes in every request: nodes of their own here, of a
  // size that does not grow with the batch, and no constants to ORT's rewrites.
  const runTime = ortRunTimeFolds(g, sorted, inf.consts, (n) => inf.shapes.get(n));
  const isConst = (n: string) => inf.consts.has(n) && !runTime.bytes.has(n);
  const batchless = (n: string) => !inf.consts.has(n) && (inf.shapes.get(n)?.every((d) => d >= 0) ?? false);
  const runTimeKnown = runTimeShapesOrtInfers(runTime, isConst);
  // A QDQ model's weights: the DequantizeLinear each folded constant came from (ort-qdq.ts).
  const weightDequantizers = new Map(g.nodes.filter((n) => n.opType === "DequantizeLinear" && g.consts.has(n.inputs[0] ?? "")).map((n) => [n.outputs[0]!, n.inputs]));
  // Run-time values a rewrite makes, with the shape ORT's planner knows for them: the Shapes its
  // transpose optimizer makes (ort-transposes.ts: int64 values of a rank), a weight a QDQ model
  // dequantizes in every request (ort-qdq.ts).
  const newShapeDims = new Map<string, { dtype: string; dims: number[] }>();
  const plainBytes = (name: string) => {
    const fixed = runTime.bytes.get(name);
    if (fixed !== undefined) return fixed;
    const s = inf.shapes.get(name);
    if (!s) return 0;
    // A computed value without the batch (a dynamic quantization's scale): its own bytes, at any batch.
    return (batchless(name) ? numel(s) : perSample(s)) * DTYPE_BYTES[inf.dtypes.get(name) ?? "float32"];
  };
  const carried = carriedShapes(g);
  const plainShape = (n: string) => {
    if (unknown.has(n)) return null;
    // A run-time value's shape is one ORT's planner knows where the file declares it or its
    // shape inference gives it from shapes alone (ort-run-time.ts runTimeShapesOrtInfers).
    if (runTime.bytes.has(n)) {
      const made = newShapeDims.get(n);
      if (made) return `${elementSize(made.dtype)} ${JSON.stringify(made.dims)}`;
      const declared = declaredShape(g, n) ?? (runTimeKnown.has(n) ? inf.consts.get(n)!.dims : null);
      return declared ? `${elementSize(defaultDtype(inf.consts.get(n)!))} ${JSON.stringify(declared)}` : null;
    }
    return `${elementSize(inf.dtypes.get(n))} ${JSON.stringify(carried(n) ?? inf.shapes.get(n) ?? [])}`;
  };
  const constOf = (n: string) => (isConst(n) ? inf.consts.get(n) : undefined);
  // The initializer a constant is to ORT: the file's one a lowering derived it from, through the
  // Identities torch's exporter aliases equal parameters with (ORT removes them).
  const identityOf = new Map(g.nodes.filter((n) => n.opType === "Identity" && n.inputs[0] && n.outputs[0]).map((n) => [n.outputs[0]!, n.inputs[0]!]));
  const initializerOf = (n: string) => {
    let r = inf.derivedFrom.get(n) ?? n;
    while (identityOf.has(r)) r = identityOf.get(r)!;
    return r;
  };
  const shared = ortCommonSubexpressions(inOrtOrder([...withRunTimeReads(inf.nodes, sorted, runTime), ...runTime.nodes], g.nodes), inf.outputs, constOf, initializerOf);
  const constDims = (n: string) => (isConst(n) ? inf.consts.get(n)?.dims : undefined);
  const shapesMoved = ortShapesBeforeTransposes(shared);
  for (const [name, rank] of shapesMoved.newShapes) {
    runTime.bytes.set(name, rank * 8);
    newShapeDims.set(name, { dtype: "int64", dims: [rank] });
  }
  // A weight as the file names it (a lowering's copy of it, LayerNormalization's, is the same weight to ORT).
  const fileConst = (n: string) => inf.derivedFrom.get(n) ?? n;
  // ORT's level-1 rewrites come before its QDQ fusions: a Pad read by a Conv is one of them.
  const fileNodes = new Map(g.nodes.map((n) => [n.outputs.join(), n]));
  // Its rules remove no-op arithmetic (x + 0, x * 1) before they fuse anything.
  const noops = ortNoopElimination(shapesMoved.nodes, new Set(inf.outputs), { constOf, rankOf: (n) => inf.shapes.get(n)?.length });
  const padsFolded = ortPadFusion(noops.nodes, new Set(inf.outputs), g.opset, (n) => fileNodes.get(n.outputs.join()), isConst);
  // So is a per-channel Mul or Add folded into its Conv; a QDQ model's weight is no initializer to it.
  const initializerDims = (n: string) => (weightDequantizers.has(fileConst(n)) ? undefined : constDims(n));
  const affineFolded = ortConvAffineFusion(padsFolded, new Set(inf.outputs), g.opset, initializerDims);
  const quantized = ortQdqFusions(affineFolded, inf.outputs, isConst, constOf, (n) => weightDequantizers.get(fileConst(n)), (n) => inf.dtypes.get(n));
  // A weight dequantized in every request: a float tensor of the weight's dims, at any batch.
  for (const [name, weight] of quantized.dequantizedWeights) {
    const dims = inf.consts.get(weight)!.dims;
    runTime.bytes.set(name, numel(dims) * 4);
    newShapeDims.set(name, { dtype: "float32", dims: [...dims] });
  }
  const dynamic = ortDynamicQuantFusions(quantized.nodes, inf.outputs, isConst, (n) => inf.dtypes.get(n));
  const fused = ortFusions(dynamic, inf.outputs, isConst, constDims, (n) => inf.shapes.get(n)?.length);
  const nchwc = ortNchwc(fused, inf.outputs, { constDims, shapeOf: (n) => inf.shapes.get(n), dtypeOf: (n) => inf.dtypes.get(n), shapeUnknown: (n) => unknown.has(n) });
  const { blocked } = nchwc;
  // ORT runs the graph it ends with, its nodes numbered as it numbers them: the file's for those
  // it keeps, after every other for those its rewrites make, in the order they make them.
  const fileIndex = new Map<string, number>();
  g.nodes.forEach((n, i) => n.outputs.forEach((o) => o && fileIndex.set(o, i)));
  // A node the rewrites before NCHWc made: not one of the graph's (a reader given a renamed
  // input is still its node), nor a weight's DequantizeLinear (the file's, numbered by its name),
  // nor an op ORT runs on 8-bit tensors (the file's, its output renamed: ort-qdq.ts keptAs).
  const before = new Set(noops.nodes);
  const opOf = new Map(noops.nodes.map((n) => [n.outputs.join(), n.op]));
  // A DequantizeLinear copy (ort-qdq.ts: one for each reader after the first, a weight's too)
  // is made by ORT's first level of rewrites, before every other node it makes.
  const weightCopy = (n: LNode) => /#dequantized\d+$/.test(n.outputs[0] ?? "");
  const fileNode = (n: LNode) => opOf.get(n.outputs.join()) === n.op || (quantized.dequantizedWeights.has(n.outputs[0] ?? "") && !weightCopy(n)) || quantized.keptAs.has(n.outputs[0] ?? "");
  const isCopy = (n: LNode) => quantized.copyOf.has(n.outputs[0] ?? "") || weightCopy(n);
  const made0 = fused.filter((n) => !before.has(n) && !fileNode(n));
  const made = [...made0.filter(isCopy), ...made0.filter((n) => !isCopy(n))];
  const createdBefore = [...shapesMoved.created.map((n) => noops.renamed.get(n) ?? n), ...made].map((n) => nchwc.replaced.get(n) ?? n).concat(nchwc.added);
  const fileName = (out: string) => {
    const name = fileConst(weightOfDequantized(channelsFirstName(out)));
    return quantized.keptAs.get(name) ?? name;
  };
  const numbered = (n: LNode) => fileIndex.get(fileName(n.outputs[0] ?? ""));
  // ORT's NHWC rewrite adds its Transposes as it walks the graph the earlier rewrites left, in ORT's order of that graph.
  const nhwc = ortNhwc(ortOrderOfFinalGraph(nchwc.nodes, numbered, createdBefore), inf.outputs, { shapeOf: (n) => inf.shapes.get(n), symbolicShape: (n) => carried(n) ?? inf.shapes.get(n) ?? null, dtypeOf: (n) => inf.dtypes.get(n), isConst });
  const ordered = ortOrderOfFinalGraph(nhwc.nodes, numbered, [...createdBefore.map((n) => nhwc.converted.get(n) ?? n), ...nhwc.added]);
  const pushed = ortPushTransposes(ordered, inf.outputs, isConst, fused, { opset: g.opset, constDims });
  // ORT runs the graph its transpose optimizer left, walked again: a node a Transpose moved past
  // keeps its number (the node it stands for: its output is renamed), a Transpose ORT placed is
  // a node it made, numbered after the rest.
  const sourceOf = (n: LNode) => pushed.origin.get(n) ?? n;
  const copyOf = new Map(pushed.nodes.map((n) => [sourceOf(n), n]));
  // In the order the rewrites made them.
  const madeBeforePush = [...createdBefore.map((n) => nhwc.converted.get(n) ?? n), ...nhwc.added].flatMap((n) => copyOf.get(n) ?? []);
  const placed = pushed.nodes.filter((n) => n.name.endsWith(MADE_TRANSPOSE));
  const nodes = ortOrderOfFinalGraph(pushed.nodes, (n) => numbered(sourceOf(n)), [...madeBeforePush, ...placed]);
  // The values held under other names: channels-last ones (ort-nhwc.ts), those computed before a
  // Transpose ORT moved (ort-transposes.ts), a DequantizeLinear's copies (ort-qdq.ts: unpermuted).
  const copies = [...quantized.copyOf].map(([name, of]): [string, TransposedValue] => [name, { of, perm: (inf.shapes.get(of) ?? []).map((_, i) => i) }]);
  const transposed = new Map([...copies, ...nhwc.transposed, ...pushed.transposed]);
  // A blocked tensor (ort-nchwc.ts): its plain tensor's bytes with the channels padded. A value
  // computed before a Transpose ORT moved (ort-transposes.ts): its tensor's bytes and, for the
  // reuse rule, its shape in that layout.
  const bytesOf = (n: string) => {
    const b = blocked.get(n);
    return b ? Math.round(plainBytes(b.of) * b.scale) : plainBytes(transposed.get(n)?.of ?? n);
  };
  const shapeOf = (n: string) => {
    // A channels-last tensor: the shape ORT infers for its own node's output (ort-nhwc.ts).
    if (nhwc.shapes.has(n)) {
      const s = nhwc.shapes.get(n);
      return s ? `${elementSize(inf.dtypes.get(channelsFirstName(n)))} ${JSON.stringify(s)}` : null;
    }
    const t = transposed.get(n);
    if (t) {
      const s = plainShape(t.of);
      // Its value's dims permuted, symbols and all where a declared shape reaches it (carriedShapes).
      const dims = carried(t.of) ?? inf.shapes.get(t.of);
      if (s === null || !dims || dims.length !== t.perm.length) return s === null ? null : `${s} before ${JSON.stringify(t.perm)}`;
      const before: (number | string)[] = new Array(dims.length);
      t.perm.forEach((axis, i) => (before[axis] = dims[i]!));
      return `${elementSize(inf.dtypes.get(t.of))} ${JSON.stringify(before)}`;
    }
    // A blocked tensor's shape as ORT's planner sees it: the plain dims with the channels
    // padded, no layout. Its reuse check compares dims only, so a blocked tensor and a plain
    // one of the same dims share a buffer (an SE block's ReorderOutput and Mul outputs with the
    // blocked maps around them). Told apart by layout, the simulated pattern was 0.73x ORT's on
    // mobilenet_v3_small (1.39 against 1.91 MiB a sample, measured with the arena off) and 0.81x
    // on efficientnet_b0 (9.95 against 12.25); with dims only, within 1 % on the eight zoo CNNs.
    const b = blocked.get(n);
    if (!b) return plainShape(n);
    // Its plain tensor's dims as the planner sees them (symbols and all where a declared shape
    // reaches it, as ORT's inference carries the batch symbol through its NCHWc nodes): a
    // signed QDQ ResNet-50's NCHWc MaxPool output and the float conv output after it share a
    // buffer in ORT.
    const dims = carried(b.of) ?? inf.shapes.get(b.of);
    if (plainShape(b.of) === null || !dims) return null;
    const padded = dims.map((d, i) => (i === 1 && typeof d === "number" ? Math.round(d * b.scale) : d));
    return `${elementSize(inf.dtypes.get(b.of))} ${JSON.stringify(padded)}`;
  };
  const buffers = planBuffers(nodes, inf.inputs, inf.outputs, bytesOf, shapeOf, align, (n) => runTime.bytes.has(n) || batchless(n));
  const outputs = withOutputs
    ? inf.outputs.map((name, k) => ({ id: buffers.length + k, size: bytesOf(name), step: nodes.findIndex((n) => n.outputs.includes(name)) })).filter((o) => o.step >= 0)
    : [];
  // A kernel's scratch is sized from its tensors' channels-first shapes (a channels-last one's too).
  const values = {
    shapeOf: (v: string) => inf.shapes.get(channelsFirstName(v)) ?? inf.consts.get(weightOfDequantized(v))?.dims,
    dtypeOf: (v: string) => (quantized.madeUnsigned.has(channelsFirstName(v)) ? "uint8" : inf.dtypes.get(channelsFirstName(v)) ?? (inf.consts.has(v) ? defaultDtype(inf.consts.get(v)!) : undefined)),
    constOf: (v: string) => (isConst(v) ? inf.consts.get(v) : undefined),
  };
  const scratch = withOutputs ? nodes.flatMap((n, step) => {
    const k = ortKernelScratch(n, values);
    return k ? [{ ...k, step }] : [];
  }) : [];
  return runTrace(buffers, nodes.length, outputs, scratch);
}
