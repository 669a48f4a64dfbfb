/** A benchmark worker's outputs as the orchestrator keeps them: every graph output, batch first. */
import type { TaskResult } from "../workers/options.ts";
import type { ModelIo } from "./inputs/shapes.ts";
import { numberAt } from "./inputs/tensor-data.ts";
import type { OutputTensor } from "./stages.ts";

/**
 * The worker's outputs: `output:<name>` per graph output in the multi-input form (`io`), else
 * the single "outputs" (float32) of the legacy form, named for the model's output when known.
 */
export function outputsOf(tensors: TaskResult["tensors"], io: ModelIo | null, legacyName = "outputs"): OutputTensor[] {
  if (io) {
    return io.outputs.map((o) => {
      const t = tensors[`output:${o.name}`];
      if (!t) throw new Error(`the worker returned no "output:${o.name}" tensor (it returned ${Object.keys(tensors).join(", ") || "none"})`);
      return { name: o.name, dtype: t.dtype, shape: t.shape, data: t.data };
    });
  }
  const out = tensors.outputs;
  if (!out || out.dtype !== "float32") throw new Error(`the worker returned no float32 "outputs" tensor`);
  return [{ name: legacyName, dtype: "float32", shape: out.shape, data: out.data }];
}

/** The first output as float32 (accuracy and the legacy `outputs` field read it). */
export function firstAsFloat32(set: readonly OutputTensor[]): Float32Array {
  const o = set[0];
  if (!o) return new Float32Array(0);
  if (o.data instanceof Float32Array) return o.data;
  const f = new Float32Array(o.data.length);
  for (let i = 0; i < f.length; i++) f[i] = numberAt(o.dtype, o.data, i);
  return f;
}
