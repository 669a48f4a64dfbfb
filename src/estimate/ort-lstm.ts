/**
 * ONNX Runtime's LSTM as the memory replay (ort-pattern.ts) needs it: its shapes and the
 * scratch its CPU kernel takes from the arena while it runs.
 *
 * Shapes. torch exports nn.LSTM with layout 0 (X [S, N, I], Y [S, D, N, H], Y_h / Y_c
 * [D, N, H]) and ORT's CPU kernel runs only that layout (lstm_base.h refuses layout 1). The
 * compiler's own rule takes layout 1 alone (it rewrites every layout 0 LSTM to it first,
 * compiler/lstm-batch-first.ts, which adds and removes Transposes ORT never sees), so the
 * replay infers the graph with this rule in its place. Without it the zoo's 2-layer LSTM could
 * not be followed at all, and the compiler's arena stood in for ORT's.
 *
 * Scratch. DeepCpuLstmOp (providers/cpu/rnn: lstm_base.cc, uni_directional_lstm.cc) asks the
 * arena for these outside the memory pattern, in every request, and frees them when it ends:
 * - Y_h and Y_c where the node leaves them unnamed: [D, N, H] each;
 * - per direction, constructed before either computes: the batch's h0, c and clipped c
 *   ([N, H] each), the input projections for every step ([S, N, 4H], the large one), and for
 *   the reverse direction the reversed input and output ([S, N, I], [S, N, H]); then the
 *   sequence lengths (N int32) as it computes. (Its [H]-sized buffers carry no batch.)
 * At batch 64, seq 128, H 64 the projections alone are 8 MiB a layer; the replay without them
 * put the zoo LSTM's python-ort steady RSS 11 % under the measured one.
 */
import { attrInt, attrString } from "../compiler/attrs.ts";
import type { LNode } from "../compiler/ir.ts";
import { type Lowering, shapeError } from "../compiler/op-ctx.ts";

const FLOAT = 4;

/** ORT's LSTM shape rule (layout 0), for inferGraph's `lowerings`: the batch wherever X has it. */
export const ortLstmShapes: Lowering = (c) => {
  if (attrInt(c.node, "layout", 0) !== 0) throw shapeError(c, "layout 1: ONNX Runtime's CPU LSTM runs layout 0 only");
  const x = c.actAny(0);
  if (x.length !== 3) throw shapeError(c, `X must have rank 3 [S, N, I], found [${x}]`);
  const direction = attrString(c.node, "direction", "forward");
  const D = direction === "bidirectional" ? 2 : 1;
  const H = attrInt(c.node, "hidden_size", 0);
  if (!(H > 0)) throw shapeError(c, `hidden_size must be > 0, found ${H}`);
  const [S, N, I] = x as [number, number, number];
  return { shapes: [[S, D, N, H], [D, N, H], [D, N, H]], attrs: { hiddenSize: H, direction, seq: S, batch: N, inputSize: I } };
};

/**
 * Bytes a sample of each buffer ORT's LSTM kernel takes from the arena while `n` runs, in the
 * order it asks for them; [] for any other node, or where the batch is not X's axis 1 (every
 * buffer then lacks the batch, too small to matter).
 */
export function ortLstmScratchPerSample(n: LNode): number[] {
  const batch = n.attrs.batch as number;
  if (n.op !== "LSTM" || !(batch < 0)) return [];
  const perBatch = -batch; // X's axis 1 is k·batch (k = 1 but for a reshaped feed)
  const H = n.attrs.hiddenSize as number;
  const S = n.attrs.seq as number;
  const I = n.attrs.inputSize as number;
  const directions = n.attrs.direction === "bidirectional" ? ["forward", "reverse"] : [n.attrs.direction as string];
  const D = directions.length;
  const sizes: number[] = [];
  // Y_h and Y_c: ORT's planner allocates them where the node names them, read or not.
  for (const k of [1, 2]) if (!n.outputs[k]) sizes.push(D * H * FLOAT);
  for (const dir of directions) {
    sizes.push(H * FLOAT, H * FLOAT, H * FLOAT, S * 4 * H * FLOAT);
    if (dir === "reverse") sizes.push(S * I * FLOAT, S * H * FLOAT);
  }
  for (const _ of directions) sizes.push(4);
  return sizes.map((b) => b * perBatch);
}
