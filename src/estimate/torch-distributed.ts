/**
 * A distributed train stage's host RAM on this host: the launcher (torch.distributed.run, a
 * Python process with torch imported) plus `nproc` ranks, each a training process estimated
 * like `train` (torch-estimate.ts) at its own local batch (the global batch / world size),
 * with what the strategy changes:
 *
 *   rank = train estimate(local batch) + distributed imports (measured by the probe)
 *          + DDP: the gradient buckets (the reducer's flat copy of every gradient, G)
 *          − FSDP: the share of parameters, gradients and optimizer state another rank holds
 *            ((1 − 1/W)·(P + G + k·P): the probe's short run held them whole)
 *
 * Every rank evaluates the whole held-out set (FSDP's forward is a collective). Ranks on
 * other hosts (`nnodes` > 1) do not count here: the budget is this host's.
 */
import type { DistributedOptions } from "../pipeline/stages.ts";
import { describeTrain, type TorchFixed, trainEstimate, type TrainShape } from "./torch-estimate.ts";
import type { TorchTerms } from "./torch-terms.ts";

export interface DistributedEstimate {
  /** The launcher and every local rank together. */
  peakMiB: number;
  perRankMiB: number;
  launcherMiB: number;
  ranks: number;
  parts: string;
  /** seeds/003 per rank times the ranks. */
  naiveMiB: number;
}

/** The batch each rank takes a step (train_rank.py refuses a batch that is not a multiple). */
export const localBatch = (globalBatch: number, d: DistributedOptions): number => Math.max(1, Math.floor(globalBatch / (d.nproc * (d.nnodes ?? 1))));

export function distributedEstimate(fixed: TorchFixed, t: TorchTerms, local: TrainShape, d: DistributedOptions): DistributedEstimate {
  const world = d.nproc * (d.nnodes ?? 1);
  const one = trainEstimate(fixed, t, local);
  const p = one.parts;
  const modelStates = p.paramsMiB + p.gradientsMiB + p.optimizerMiB;
  const strategyMiB = d.strategy === "ddp" ? p.gradientsMiB : -(1 - 1 / world) * modelStates;
  const importsMiB = t.distImportMiB ?? 0;
  const perRank = one.peakMiB + importsMiB + strategyMiB;
  // The launcher imports torch (torch.distributed.run) and nothing of the model: the fixed
  // cost of a torch process after its import, as calibrated for python-torch's import phase.
  const launcherMiB = fixed.inferFixedMiB.import?.rss ?? 0;
  const f = (x: number) => `${x.toFixed(1)} MiB`;
  const strategyPart = d.strategy === "ddp" ? `+ DDP gradient buckets ${f(strategyMiB)}` : `− FSDP shards held elsewhere ${f(-strategyMiB)}`;
  return {
    peakMiB: launcherMiB + d.nproc * perRank,
    perRankMiB: perRank,
    launcherMiB,
    ranks: d.nproc,
    parts: `launcher ${f(launcherMiB)} + ${d.nproc} ranks × ${f(perRank)} (local batch ${local.batchSize}: ${describeTrain(one)} + distributed imports ${f(importsMiB)} ${strategyPart})`,
    naiveMiB: d.nproc * one.naiveMiB,
  };
}
