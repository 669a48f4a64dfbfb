/**
 * What the estimates read off a pipeline's stage definitions, in one place for the
 * run's budget and report (src/pipeline/memory-plan.ts) and `memlane estimate pipeline.ts`
 * (pipeline-estimate.ts).
 */
import type { StageDef, TrainOptions } from "../pipeline/stages.ts";
import type { InputFeed } from "./model-terms.ts";
import { localBatch } from "./torch-distributed.ts";
import { evalSamplesOf, optimizerOf, TRAIN_BATCH_DEFAULT, type TrainShape } from "./torch-estimate.ts";

/** The shape one training process of a train stage steps at: a distributed rank takes its local batch. */
export function trainShapeOf(o: Pick<TrainOptions, "arch" | "batchSize" | "distributed">): TrainShape {
  const batch = o.batchSize ?? TRAIN_BATCH_DEFAULT;
  return { batchSize: o.distributed ? localBatch(batch, o.distributed) : batch, evalSamples: evalSamplesOf(o.arch), optimizer: optimizerOf(o.arch) };
}

/** The zoo arch a python-torch benchmark runs, from the stage it reads: a train stage's, or a zoo export's. */
export function zooArchOf(from: StageDef | undefined): string | null {
  return from?.kind === "train" ? from.opts.arch : from?.kind === "export" ? (from.opts.zoo ?? null) : null;
}

/**
 * What a benchmark feeds the model of an export stage: its `seq`, `shapes` and `inputs` file
 * (an existing ONNX file with symbolic dims besides the batch: the file's arrays fix them, as
 * they do for the run); empty for anything else (the default seq).
 */
export function exportFeedOf(from: StageDef | undefined): InputFeed {
  if (from?.kind !== "export") return {};
  const o = from.opts;
  return { ...(o.seq !== undefined ? { seq: o.seq } : {}), ...(o.shapes ? { shapes: o.shapes } : {}), ...(o.inputs !== undefined ? { inputsFile: o.inputs } : {}) };
}
