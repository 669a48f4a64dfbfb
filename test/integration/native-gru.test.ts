/**
 * GRU on memlane-rt (ops-lstm.ts, lstm-batch-first.ts, cpu/gru.cc) against ONNX Runtime, in the
 * forms torch never writes: ONNX's default reset placement (linear_before_reset 0) one way,
 * backwards and both ways, with and without a bias, and a GRU whose h_n alone is read (layout 0:
 * ORT refuses layout 1). torch's nn.GRU (linear_before_reset 1) runs from both exporters in
 * native-cnn-ops.test.ts (gru-bf, gru-bidir-2layers, gru-seq-first).
 */
import { type GraphCase, describeGraphCases } from "../fixtures/graph-vs-ort.ts";
import { type Attr, init, node } from "../unit/compiler-onnx-builder.ts";

const [S, I, H] = [6, 5, 4];

/**
 * x [N, S, I] moved to [S, N, I] through a GRU of hidden size H (ORT runs layout 0 only), and
 * Y [S, D, N, H] or Y_h [D, N, H] moved back batch-first.
 */
function gru(attrs: Record<string, Attr>, { bias = true, read = "Y" }: { bias?: boolean; read?: "Y" | "Y_h" } = {}): GraphCase {
  const D = attrs["direction"] === "bidirectional" ? 2 : 1;
  const outs = read === "Y" ? ["yr"] : ["", "hr"];
  return {
    inputs: [["x", ["N", S, I]]],
    inits: [init("w", [D, 3 * H, I]), init("r", [D, 3 * H, H]), ...(bias ? [init("b", [D, 6 * H])] : [])],
    nodes: [
      node("Transpose", ["x"], ["xs"], { perm: [1, 0, 2] }),
      node("GRU", ["xs", "w", "r", ...(bias ? ["b"] : [])], outs, { hidden_size: H, ...attrs }),
      read === "Y" ? node("Transpose", ["yr"], ["y"], { perm: [2, 0, 1, 3] }) : node("Transpose", ["hr"], ["y"], { perm: [1, 0, 2] }),
    ],
    ops: { GRU: 1 },
  };
}

const CASES: Record<string, GraphCase> = {
  "reset before the product (ONNX's default), forward": gru({}),
  "reset before the product, reverse": gru({ direction: "reverse" }),
  "reset before the product, bidirectional": gru({ direction: "bidirectional" }),
  "reset after the product (torch's), bidirectional, no bias": gru({ direction: "bidirectional", linear_before_reset: 1 }, { bias: false }),
  "only h_n read": gru({ linear_before_reset: 1 }, { read: "Y_h" }),
};

describeGraphCases("native-gru", "GRU on memlane-rt matches ONNX Runtime", CASES, 2);
