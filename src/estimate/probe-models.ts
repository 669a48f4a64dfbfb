/**
 * The calibration probes: small ONNX models written here (no Python, no downloads), each
 * chosen to move one model-dependent term of the estimate while holding the others small —
 * weights, activations, the eval set — so a least-squares fit over their measured phases can
 * tell the terms apart (fit.ts). Every probe takes one float input "x" with a symbolic batch.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import onnxProto from "onnx-proto";

const { onnx } = onnxProto;
const FLOAT = onnx.TensorProto.DataType.FLOAT;

export interface Probe {
  name: string;
  /** Generated eval samples for its compare run: the eval-set term. */
  evalSamples: number;
  /** What the probe is for, in a word, for the calibration log. */
  moves: string;
  build(): Uint8Array;
}

/** Seeded weights in [-0.05, 0.05): small enough that no activation overflows. */
function weights(n: number, seed: number): Uint8Array {
  const a = new Float32Array(n);
  let s = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    a[i] = (s / 2 ** 32 - 0.5) * 0.1;
  }
  return new Uint8Array(a.buffer);
}

interface Layer {
  op: string;
  /** Weight dims of each initializer the op takes after its activation input. */
  inits?: number[][];
  attrs?: Record<string, number[] | number>;
}

function model(name: string, inputDims: number[], layers: Layer[]): Uint8Array {
  const nodes: onnxProto.onnx.INodeProto[] = [];
  const inits: onnxProto.onnx.ITensorProto[] = [];
  let x = "x";
  layers.forEach((l, i) => {
    const names = (l.inits ?? []).map((dims, j) => {
      const n = `w${i}_${j}`;
      inits.push({ name: n, dims, dataType: FLOAT, rawData: weights(dims.reduce((a, b) => a * b, 1), 7 * i + j + 1) });
      return n;
    });
    const y = `t${i}`;
    const attribute = Object.entries(l.attrs ?? {}).map(([k, v]) =>
      Array.isArray(v) ? { name: k, type: onnx.AttributeProto.AttributeType.INTS, ints: v } : { name: k, type: onnx.AttributeProto.AttributeType.INT, i: v },
    );
    nodes.push({ opType: l.op, name: `${l.op.toLowerCase()}_${i}`, input: [x, ...names], output: [y], attribute });
    x = y;
  });
  const dim = (d: number | string) => (typeof d === "number" ? { dimValue: d } : { dimParam: d });
  const m = onnx.ModelProto.create({
    irVersion: 8,
    producerName: "memlane-estimate-probe",
    opsetImport: [{ domain: "", version: 17 }],
    graph: {
      name,
      node: nodes,
      initializer: inits,
      input: [{ name: "x", type: { tensorType: { elemType: FLOAT, shape: { dim: ["N", ...inputDims].map(dim) } } } }],
      output: [{ name: x, type: { tensorType: { elemType: FLOAT } } }],
    },
  });
  return onnx.ModelProto.encode(m).finish();
}

const conv = (cin: number, cout: number): Layer => ({ op: "Conv", inits: [[cout, cin, 3, 3], [cout]], attrs: { kernel_shape: [3, 3], pads: [1, 1, 1, 1] } });
const relu: Layer = { op: "Relu" };
const gap: Layer = { op: "GlobalAveragePool" };
const flatten: Layer = { op: "Flatten", attrs: { axis: 1 } };
const matmul = (k: number, m: number): Layer => ({ op: "MatMul", inits: [[k, m]] });

export const PROBES: readonly Probe[] = Object.freeze([
  { name: "tiny", evalSamples: 64, moves: "nothing (fixed costs)", build: () => model("tiny", [16], [matmul(16, 16), relu]) },
  { name: "tiny-eval", evalSamples: 1024, moves: "eval set (small samples)", build: () => model("tiny-eval", [256], [matmul(256, 8), relu]) },
  { name: "weights", evalSamples: 64, moves: "weights (48 MiB)", build: () => model("weights", [1024], [matmul(1024, 4096), relu, matmul(4096, 2048)]) },
  { name: "conv-weights", evalSamples: 32, moves: "convolution weights (36 MiB, which ORT pre-packs)", build: () => model("conv-weights", [512, 4, 4], [conv(512, 512), relu, conv(512, 512), relu, conv(512, 512), relu, conv(512, 512), gap, flatten]) },
  { name: "activations", evalSamples: 16, moves: "activations (2 x 2 MiB a sample)", build: () => model("activations", [3, 128, 128], [conv(3, 32), relu, conv(32, 32), relu, gap, flatten]) },
  { name: "eval-set", evalSamples: 128, moves: "eval set (1 MiB a sample)", build: () => model("eval-set", [4, 256, 256], [gap, flatten]) },
  // Large outputs from small inputs (an LM's logits): 256 KiB out a sample, 64 MiB over the set.
  { name: "eval-outputs", evalSamples: 256, moves: "eval-set outputs (256 KiB a sample)", build: () => model("eval-outputs", [16], [matmul(16, 65536)]) },
  { name: "mixed", evalSamples: 32, moves: "weights 16 MiB + activations", build: () => model("mixed", [3, 64, 64], [conv(3, 64), relu, gap, flatten, matmul(64, 65536)]) },
]);

/** Writes every probe into `dir`; returns name → .onnx path. */
export function writeProbes(dir: string, probes: readonly Probe[] = PROBES): Map<string, string> {
  const out = new Map<string, string>();
  for (const p of probes) {
    const file = join(dir, `probe-${p.name}.onnx`);
    writeFileSync(file, p.build());
    out.set(p.name, file);
  }
  return out;
}
