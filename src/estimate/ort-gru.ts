/**
 * ONNX Runtime's CPU GRU (providers/cpu/rnn/deep_cpu_gru.cc) and what it takes from the arena
 * while it runs, outside the memory pattern (ort-scratch.ts). In the order it asks, per run:
 * Y_h's room where the node leaves Y_h out ([D, N, H]); then per direction, the forward one
 * still held while the backward one runs: the state and the initial state ([N, H] each), the
 * biases replicated over the batch (z and r always, h once or, reset after the product, twice),
 * the reset-after-product's linear output ([N, H]), the input projections of every step
 * ([S, N, 3H], the large one), the reverse direction's reversed input and output ([S, N, I],
 * [S, N, H]), and the sequence lengths (N int32).
 */
import type { LNode } from "../compiler/ir.ts";

const FLOAT = 4;

/**
 * Bytes a sample of each buffer ORT's GRU kernel takes while `n` runs, in order; [] for any
 * other node or where X's axis 1 is not the batch (every buffer then lacks it). The attributes
 * are ort-shapes.ts's recurrent rule's.
 */
export function ortGruScratchPerSample(n: LNode): number[] {
  const batch = n.attrs.batch as number;
  if (n.op !== "GRU" || !(batch < 0)) return [];
  const H = n.attrs.hiddenSize as number;
  const S = n.attrs.seq as number;
  const I = n.attrs.inputSize as number;
  const bias = !!n.inputs[3];
  const linearBeforeReset = n.attrs.linearBeforeReset === 1;
  const directions = n.attrs.directions === 2 ? ["forward", "reverse"] : [n.attrs.reverse === 1 ? "reverse" : "forward"];
  const sizes: number[] = [];
  if (!n.outputs[1]) sizes.push(directions.length * H * FLOAT);
  for (const dir of directions) {
    sizes.push(H * FLOAT, H * FLOAT);
    if (bias) sizes.push(...new Array<number>(linearBeforeReset ? 4 : 3).fill(H * FLOAT));
    if (linearBeforeReset) sizes.push(H * FLOAT);
    sizes.push(S * 3 * H * FLOAT);
    if (dir === "reverse") sizes.push(S * I * FLOAT, S * H * FLOAT);
    sizes.push(4);
  }
  return sizes.map((b) => b * -batch);
}
