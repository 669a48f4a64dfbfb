/** Dense, elementwise and layout ops: attribute defaults, weight checks and output shapes. */
import { attrFloat, attrInt, attrInts, attrString, normAxis } from "./attrs.ts";
import { mk } from "./fold-math.ts";
import { BATCH, batchAxis, fmtShape, numel } from "./ir.ts";
import { FlattenAsReshape } from "./ops-layout.ts";
import { type Lowering, type OpCtx, floatAct, requireRank, requireWeight, shapeError } from "./op-ctx.ts";

/**
 * Gemm on rows: A is [..., K] with the batch on any axis but the last (torch's seq-first
 * [S·batch, E], or a rank-3 [batch, S, E] that exporters emit for GPT-2's Conv1D); every row
 * is one sample's row of one plain GEMM, so the layout of the leading axes does not matter.
 */
export const Gemm: Lowering = (c) => {
  const a = floatAct(c, 0);
  if (a.length < 2) throw shapeError(c, `A must be [..., K] of rank >= 2, found ${fmtShape(a)}`);
  if (attrInt(c.node, "transA", 0) !== 0) throw shapeError(c, "transA = 1 would move the batch into K");
  if (batchAxis(a) === a.length - 1) throw shapeError(c, `A ${fmtShape(a)} has the batch on its last axis (K)`);
  const b = requireWeight(c, 1, "Gemm input B");
  if (b.dims.length !== 2) throw shapeError(c, `B must be 2-D, found [${b.dims}]`);
  const transB = attrInt(c.node, "transB", 0);
  const [k, n] = transB ? [b.dims[1]!, b.dims[0]!] : [b.dims[0]!, b.dims[1]!];
  if (a[a.length - 1] !== k) throw shapeError(c, `A ${fmtShape(a)} and B [${b.dims}] (transB ${transB}) disagree on K`);
  const inputs = [...c.node.inputs];
  if (c.node.inputs[2]) {
    // C broadcasts to [batch, N]; the runtime gets it as a plain [N] bias.
    const cw = requireWeight(c, 2, "Gemm input C");
    const total = numel(cw.dims);
    if (cw.dims.length > 2 || (cw.dims.length === 2 && cw.dims[0] !== 1) || (total !== n && total !== 1)) {
      throw shapeError(c, `C must broadcast per sample to [${n}] (shape [], [1], [${n}] or [1, ${n}]), found [${cw.dims}]`);
    }
    if (cw.dims.length !== 1 || total !== n) inputs[2] = c.addConst(`${c.node.inputs[2]}.bias`, mk(true, [n], total === n ? cw.data : new Array(n).fill(cw.data[0])));
  }
  return {
    shapes: [[...a.slice(0, -1), n]],
    inputs,
    attrs: { alpha: attrFloat(c.node, "alpha", 1), beta: attrFloat(c.node, "beta", 1), transA: 0, transB, activation: "none" },
  };
};

/** MatMul by a 2-D weight: rows of A times B, the batch on any axis of A but the last. */
export const MatMul: Lowering = (c) => {
  const a = floatAct(c, 0);
  if (a.length < 2) throw shapeError(c, `A must be [..., K] of rank >= 2, found ${fmtShape(a)}`);
  if (batchAxis(a) === a.length - 1) throw shapeError(c, `A ${fmtShape(a)} has the batch on its last axis (K)`);
  const b = requireWeight(c, 1, "MatMul input B");
  if (b.dims.length !== 2 || b.dims[0] !== a[a.length - 1]) throw shapeError(c, `B must be a 2-D weight [K=${a[a.length - 1]}, M], found [${b.dims}]`);
  return { shapes: [[...a.slice(0, -1), b.dims[1]!]], attrs: {} };
};

// Element-wise float ops run on any layout (the batch at any axis).
export const Unary: Lowering = (c) => ({ shapes: [floatAct(c, 0)], attrs: {} });

export const LeakyRelu: Lowering = (c) => ({ shapes: [floatAct(c, 0)], attrs: { alpha: attrFloat(c.node, "alpha", 0.01) } });

export const Gelu: Lowering = (c) => {
  const approximate = attrString(c.node, "approximate", "none");
  if (approximate !== "none" && approximate !== "tanh") throw shapeError(c, `approximate "${approximate}" is not "none" or "tanh"`);
  return { shapes: [floatAct(c, 0)], attrs: { approximate } };
};

export const Flatten: Lowering = (c) => {
  const any = c.actAny(0);
  if (c.dtype(0) !== "float32" || batchAxis(any) !== 0 || any[0] !== BATCH) return FlattenAsReshape(c);
  const x = c.act(0);
  const axis = attrInt(c.node, "axis", 1) < 0 ? attrInt(c.node, "axis", 1) + x.length : attrInt(c.node, "axis", 1);
  // Merging the batch with the axes after it (LeViT's flatten(0, 1) before a BatchNorm1d) gives
  // [k·batch, ...]: a Reshape, not the batch-first Flatten kernel.
  if (axis < 1 || axis > x.length || numel(x.slice(1, axis)) !== 1) return FlattenAsReshape(c);
  return { shapes: [[-1, numel(x.slice(axis))]], attrs: { axis } };
};

/** A Transpose's perm for input dims `x` (reversed where absent), checked to be a permutation of them. */
export function transposePerm(c: OpCtx, x: readonly number[]): number[] {
  const perm = attrInts(c.node, "perm", x.map((_, i) => x.length - 1 - i));
  if (perm.length !== x.length || [...perm].sort((p, q) => p - q).some((p, i) => p !== i)) {
    throw shapeError(c, `perm [${perm}] is not a permutation of the axes of ${fmtShape(x)}`);
  }
  return perm;
}

/** The element types memlane-rt's transposes move (int64 as two float words: XLNet's time-major ids). */
const TRANSPOSED_DTYPES: ReadonlySet<string> = new Set(["float32", "int32", "int64"]);

/** Any permutation, the batch included (torch's seq-first [S, B, E] <-> [B, S, E] moves). */
export const Transpose: Lowering = (c) => {
  const x = c.actAny(0);
  const dt = c.dtype(0) ?? "float32";
  if (!TRANSPOSED_DTYPES.has(dt)) throw shapeError(c, `input 0 ("${c.node.inputs[0]}") is ${dt}; memlane-rt transposes float32, int32 and int64`);
  const perm = transposePerm(c, x);
  // An 8-byte element moves as an extra axis of two words, so int64 reaches rank 6 one axis sooner.
  const most = dt === "int64" ? 5 : 6;
  if (x.length > most && (perm[0] !== 0 || batchAxis(x) !== 0)) throw shapeError(c, `perm [${perm}] moves the batch of a rank-${x.length} ${dt} tensor; memlane-rt moves it up to rank ${most}`);
  return { shapes: [perm.map((p) => x[p]!)], dtypes: [dt], attrs: { perm } };
};

/** Softmax and LogSoftmax (one kernel, cpu/softmax.cc). */
export const Softmax: Lowering = (c) => {
  const x = floatAct(c, 0);
  const op = c.node.opType;
  const axis = normAxis(c.node, attrInt(c.node, "axis", c.opset >= 13 ? -1 : 1), x.length);
  if (axis === batchAxis(x)) throw shapeError(c, `${op} across the batch (axis ${axis} of ${fmtShape(x)}) is not supported`);
  // Before opset 13 they flattened everything from `axis` on; equal only on the last axis.
  if (c.opset < 13 && axis !== x.length - 1) throw shapeError(c, `opset ${c.opset} ${op} over axes ${axis}.. (flattened) is not supported`);
  return { shapes: [x], attrs: { axis } };
};
