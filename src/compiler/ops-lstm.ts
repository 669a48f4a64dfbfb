/**
 * LSTM and GRU lowering. The plan's recurrent ops are batch-first (ONNX layout 1): X [N, S, I],
 * Y [N, S, D, H], Y_h (and the LSTM's Y_c) [N, D, H]. torch exports nn.LSTM and nn.GRU with
 * layout 0 (the batch on axis 1); lstm-batch-first.ts rewrites every layout 0 one to layout 1
 * before inference (with Transposes back where layout 0 results are read), so one reaching
 * here is refused.
 */
import { attrFloat, attrInt, attrString } from "./attrs.ts";
import { mk } from "./fold-math.ts";
import { type ConstTensor, fmtShape } from "./ir.ts";
import { type Lowering, type OpCtx, requireRank, requireWeight, shapeError } from "./op-ctx.ts";

/** What differs between the two: gates a direction, ONNX's default activations, the state outputs. */
const KINDS = {
  LSTM: { gates: 4, activations: ["Sigmoid", "Tanh", "Tanh"], outputs: 3, initialStates: [5, 6] },
  GRU: { gates: 3, activations: ["Sigmoid", "Tanh"], outputs: 2, initialStates: [5] },
} as const;

function asFloat(c: OpCtx, i: number, t: ConstTensor): string {
  return t.isFloat ? c.node.inputs[i]! : c.addConst(`${c.node.inputs[i]}.f32`, mk(true, [...t.dims], Array.from(t.data)));
}

function recurrent(kind: keyof typeof KINDS): Lowering {
  const k = KINDS[kind];
  return (c) => {
    const layout = attrInt(c.node, "layout", 0);
    if (layout !== 1) {
      throw shapeError(c, "layout 0 reached the lowering without the batch-first rewrite (lstm-batch-first.ts)");
    }
    const x = c.act(0);
    requireRank(c, x, 3, `${kind} input X [N, S, I]`);
    const dirName = attrString(c.node, "direction", "forward");
    if (!["forward", "reverse", "bidirectional"].includes(dirName)) throw shapeError(c, `direction "${dirName}" is not an ONNX value`);
    const D = dirName === "bidirectional" ? 2 : 1;
    const H = attrInt(c.node, "hidden_size", 0);
    const acts = c.node.attrs.get("activations");
    const wantActs = D === 2 ? [...k.activations, ...k.activations] : [...k.activations];
    if (acts !== undefined && JSON.stringify(acts) !== JSON.stringify(wantActs)) throw shapeError(c, `activations ${JSON.stringify(acts)} are not supported (only the default ${wantActs.join(", ")})`);
    if (c.node.attrs.has("clip")) throw shapeError(c, `clip ${attrFloat(c.node, "clip", 0)} is not supported`);
    if (attrInt(c.node, "input_forget", 0) !== 0) throw shapeError(c, "input_forget = 1 is not supported");
    const [, S, I] = x as [number, number, number];
    const W = requireWeight(c, 1, `${kind} W`);
    const R = requireWeight(c, 2, `${kind} R`);
    const want = (t: ConstTensor, dims: number[], what: string) => {
      if (t.dims.length !== dims.length || t.dims.some((d, i) => d !== dims[i])) throw shapeError(c, `${what} must be [${dims}], found [${t.dims}]`);
    };
    if (!(H > 0)) throw shapeError(c, `hidden_size must be > 0, found ${H}`);
    want(W, [D, k.gates * H, I], "W");
    want(R, [D, k.gates * H, H], "R");
    const inputs = [c.node.inputs[0]!, asFloat(c, 1, W), asFloat(c, 2, R)];
    if (c.node.inputs[3]) {
      const B = requireWeight(c, 3, `${kind} B`);
      want(B, [D, 2 * k.gates * H], "B");
      inputs.push(asFloat(c, 3, B));
    }
    if (c.node.inputs[4]) throw shapeError(c, "sequence_lens is not supported (every sequence has the full length)");
    for (const i of k.initialStates) {
      if (!c.node.inputs[i]) continue;
      const what = i === 5 ? "initial_h" : "initial_c";
      const t = c.weight(i);
      if (!t || Array.from(t.data).some((v) => v !== 0)) throw shapeError(c, `${what} must be absent or zeros (a constant), found ${t ? "a non-zero constant" : "a computed tensor"}`);
    }
    if (kind === "LSTM" && c.node.inputs[7]) throw shapeError(c, "peepholes (input P) are not supported");
    if (S < 1 || I < 1) throw shapeError(c, `X ${fmtShape(x)} is empty`);
    const state = [-1, D, H];
    return {
      shapes: [[-1, S, D, H], ...new Array<number[]>(k.outputs - 1).fill(state)],
      attrs: { hiddenSize: H, direction: dirName, layout: 1, ...(kind === "GRU" ? { linearBeforeReset: attrInt(c.node, "linear_before_reset", 0) === 1 ? 1 : 0 } : {}) },
      inputs,
    };
  };
}

export const LSTM = recurrent("LSTM");
export const GRU = recurrent("GRU");
