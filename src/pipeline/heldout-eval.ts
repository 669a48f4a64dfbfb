/**
 * A trained model's held-out set in a dtype other than float32 (tiny-gpt's int64 byte
 * windows) as an eval set: the train stage keeps the raw tensor, and once the export stage
 * has the ONNX file its graph input's IoSpec is known, so the benchmarks feed the windows in
 * the multi-input form (docs/worker-tasks.md) like an existing model's inputs.
 */
import type { Tensor } from "../transport/codec.ts";
import type { EvalSet } from "./inputs/eval-set.ts";
import { readOnnxIo } from "./inputs/onnx-io.ts";
import { resolveModelIo } from "./inputs/shapes.ts";

export function heldoutEvalSet(onnx: string, raw: Tensor): EvalSet {
  const r = resolveModelIo(readOnnxIo(onnx));
  const spec = r.inputs[0];
  const what = `held-out ${raw.dtype} [${raw.shape.join(", ")}]`;
  if (r.inputs.length !== 1 || !spec) throw new Error(`${onnx}: ${what} feeds one input, the model has ${r.inputs.length}`);
  const sameDims = spec.shape.length === raw.shape.length && spec.shape.every((d, k) => k === spec.batchAxis || d === raw.shape[k]);
  if (spec.dtype !== raw.dtype || spec.batchAxis !== 0 || !sameDims)
    throw new Error(`${onnx}: input "${spec.name}" takes ${spec.dtype} [${spec.shape.map((d) => (d < 0 ? "N" : d)).join(", ")}], the ${what} does not fit`);
  return {
    io: { inputs: r.inputs, outputs: r.outputs },
    inputs: [{ spec, tensor: raw, values: "held-out windows from training" }],
    nEval: raw.shape[0]!,
    staticBatch: r.staticBatch,
  };
}
