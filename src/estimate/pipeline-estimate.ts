/**
 * `memlane estimate pipeline.ts`: every stage's predicted memory from the pipeline's
 * definition alone (the builder's stage graph; no stage runs). Train stages and python-torch
 * benchmarks get the PyTorch estimate (torch-estimate.ts); the ONNX runtimes the calibrated
 * one, from the graph of the model the export stage would write: a zoo export with random
 * weights has the trained model's graph and sizes, so the estimate exports one into a temp
 * directory (an existing `onnx` file is read as is). Stages nothing predicts (export itself,
 * checkpoint loads, python stages) are listed as not estimated, never as 0.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Pipeline } from "../pipeline/builder.ts";
import type { StageDef } from "../pipeline/stages.ts";
import { Supervisor } from "../workers/index.ts";
import { workerSpecs } from "../workers/specs.ts";
import type { Calibration } from "./calibration.ts";
import { activationsUnknown, features, inputFileRows, loadProbesFor, modelTerms, type ModelTerms, ortLoadOf, requestsPerBatch } from "./model-terms.ts";
import { estimateRuntime } from "./predict.ts";
import { describeTrain, evalSamplesOf, inferEstimate, trainEstimate } from "./torch-estimate.ts";
import type { TorchCalibration } from "./torch-calibration.ts";
import { inferTerms, inferTermsKey, rankTerms, type TorchTerms, trainTerms } from "./torch-terms.ts";
import { exportFeedOf, trainShapeOf, zooArchOf } from "./stage-facts.ts";
import { distributedEstimate } from "./torch-distributed.ts";
import { concurrentPeak, type ConcurrentPeak } from "./concurrent-peak.ts";

export interface StagePhaseEstimate {
  phase: string;
  rss: number;
  peak: number;
}

export interface StageEstimate {
  stage: string;
  kind: string;
  runtime: string | null;
  /** The model the figures are for (arch, or the ONNX file). */
  model: string | null;
  after: string[];
  exclusive: boolean;
  /** null: not estimated (`why` says why). */
  peakMiB: number | null;
  phases: StagePhaseEstimate[];
  parts: string;
  why: string | null;
  /** seeds/003's formula for the same model and batch, where one applies. */
  naiveMiB: number | null;
  /**
   * python-torch: the least and most RSS growth after a request at the largest batch over the
   * probe's fresh processes, MiB (glibc's heap top; the end estimate is their mean). Absent elsewhere.
   */
  heapTopRangeMiB?: [number, number] | null;
}

export interface PipelineEstimate {
  pipeline: string;
  stages: StageEstimate[];
  concurrent: ConcurrentPeak;
}

interface Ctx {
  onnx: Calibration;
  torch: TorchCalibration;
  dir: string;
  /** export stage → its ONNX file, arch and eval samples. */
  models: Map<string, { onnx: string; arch: string | null; evalSamples: number }>;
  torchTerms: Map<string, TorchTerms>;
  /** By ONNX file and what the benchmark feeds it. */
  onnxTerms: Map<string, ModelTerms>;
}

const lastOf = (stages: readonly StageDef[], kind: string, before: number) => [...stages.slice(0, before)].reverse().find((s) => s.kind === kind);

/**
 * Below this spread a probe's fresh processes differ by run-to-run noise, not worth a word:
 * glibc's coin after ORT's load (`memlane estimate`'s held range) and python-torch's heap top.
 */
export const SPREAD_NOTED_MIB = 4;

/**
 * python-torch's coin (docs/memory.md): where the replay's processes ended their requests
 * more than a few MiB apart, a run may end anywhere in that range; say so beside the parts.
 */
export function heapTopNote(t: Pick<TorchTerms, "runEndMiB" | "runEndRangeMiB" | "runDraws">, maxBatch: number): string {
  const r = t.runEndRangeMiB;
  if (!r || t.runEndMiB === null || r[1] - r[0] <= SPREAD_NOTED_MIB) return "";
  return `; after a request at batch ${maxBatch} the probe's ${t.runDraws} fresh processes held ${r[0].toFixed(1)} to ${r[1].toFixed(1)} MiB above their start ` +
    `(where glibc's heap top lies differs per process and per call), the estimate their mean ${t.runEndMiB.toFixed(1)} MiB`;
}

async function cachedTerms(c: Ctx, key: string, make: () => Promise<TorchTerms>): Promise<TorchTerms> {
  if (!c.torchTerms.has(key)) c.torchTerms.set(key, await make());
  return c.torchTerms.get(key)!;
}

/** Writes each export stage's model (a zoo export with random weights where none exists yet). */
async function exportModels(stages: readonly StageDef[], c: Ctx): Promise<void> {
  const toExport: Array<{ stage: string; arch: string; evalSamples: number }> = [];
  stages.forEach((s, i) => {
    if (s.kind !== "export") return;
    if (s.opts.onnx) c.models.set(s.name, { onnx: s.opts.onnx, arch: null, evalSamples: s.opts.evalSamples ?? 256 });
    else if (s.opts.zoo) toExport.push({ stage: s.name, arch: s.opts.zoo, evalSamples: s.opts.evalSamples ?? 256 });
    else {
      const train = s.opts.from ? stages.find((x) => x.name === s.opts.from) : lastOf(stages, "train", i);
      if (train?.kind === "train") toExport.push({ stage: s.name, arch: train.opts.arch, evalSamples: evalSamplesOf(train.opts.arch) });
    }
  });
  if (toExport.length === 0) return;
  const sup = await Supervisor.start();
  try {
    const w = await sup.spawn(workerSpecs.python({ name: "estimate-export" }));
    try {
      for (const e of toExport) {
        const onnx = join(c.dir, `${e.stage.replace(/[^A-Za-z0-9._-]/g, "_")}.onnx`);
        await w.run("zoo.export", { arch: e.arch, out: onnx, seed: 0 }, { timeoutMs: 300_000 });
        c.models.set(e.stage, { onnx, arch: e.arch, evalSamples: e.evalSamples });
      }
    } finally {
      await w.stop();
    }
  } finally {
    await sup.close();
  }
}

const notEstimated = (s: StageDef, why: string): StageEstimate => ({
  stage: s.name, kind: s.kind, runtime: s.kind === "benchmark" ? s.runtime : null, model: null, after: s.after, exclusive: s.exclusive,
  peakMiB: null, phases: [], parts: "", why, naiveMiB: null,
});

async function estimateStage(p: Pipeline, stages: readonly StageDef[], i: number, c: Ctx): Promise<StageEstimate> {
  const s = stages[i]!;
  const base = { stage: s.name, kind: s.kind, after: s.after, exclusive: s.exclusive };
  if (s.kind === "train" && s.opts.distributed) {
    const d = s.opts.distributed;
    const arch = s.opts.arch;
    const shape = trainShapeOf(s.opts);
    const threads = s.opts.threads ?? p.options.threads;
    const t = await cachedTerms(c, `rank ${d.strategy} ${arch} ${JSON.stringify(shape)} ${threads}`, () => rankTerms(arch, shape, threads, d.strategy));
    const e = distributedEstimate(c.torch, t, shape, d);
    return {
      ...base, runtime: "python-torch", model: arch, peakMiB: e.peakMiB,
      phases: [{ phase: "epoch-N (launcher + ranks)", rss: e.peakMiB, peak: e.peakMiB }], parts: e.parts, why: null, naiveMiB: e.naiveMiB,
    };
  }
  if (s.kind === "train") {
    const arch = s.opts.arch;
    const shape = trainShapeOf(s.opts);
    const threads = s.opts.threads ?? p.options.threads;
    const t = await cachedTerms(c, `train ${arch} ${JSON.stringify(shape)} ${threads}`, () => trainTerms(arch, shape, threads));
    const e = trainEstimate(c.torch, t, shape);
    return { ...base, runtime: "python-torch", model: arch, peakMiB: e.peakMiB, phases: [{ phase: "epoch-N", rss: e.peakMiB, peak: e.peakMiB }], parts: describeTrain(e), why: null, naiveMiB: e.naiveMiB };
  }
  if (s.kind !== "benchmark") return notEstimated(s, s.kind === "export" ? "an export worker (torch.onnx): not estimated" : `a ${s.kind} stage: not estimated`);
  const batchSizes = s.opts.batchSizes ?? p.options.batchSizes;
  const maxBatch = Math.max(...batchSizes);
  const from = s.opts.from ? stages.find((x) => x.name === s.opts.from) : lastOf(stages, s.runtime === "python-torch" ? "train" : "export", i) ?? lastOf(stages, "export", i);
  if (s.runtime === "python-torch") {
    const arch = zooArchOf(from);
    if (!arch) return notEstimated(s, "python-torch runs a zoo module; this benchmark's model is an ONNX file");
    const batchSizes = s.opts.batchSizes ?? p.options.batchSizes;
    const threads = s.opts.threads ?? p.options.threads;
    const evalSamples = from?.kind === "train" ? evalSamplesOf(arch) : ((from?.kind === "export" && from.opts.evalSamples) || 256);
    const run = { batchSizes, iterations: s.opts.iterations ?? p.options.iterations, warmup: s.opts.warmup ?? p.options.warmup, evalSamples };
    const t = await cachedTerms(c, inferTermsKey(arch, run, threads), () => inferTerms(arch, run, threads));
    const phases = inferEstimate(c.torch, t, { maxBatch, evalSamples });
    return { ...base, runtime: s.runtime, model: arch, peakMiB: Math.max(...phases.map((x) => x.peak)), phases, parts: `calibrated fixed cost per phase + weights + eval set + activations${heapTopNote(t, maxBatch)}`, why: null, naiveMiB: null, heapTopRangeMiB: t.runEndRangeMiB };
  }
  const model = from ? c.models.get(from.name) : undefined;
  if (!model) return notEstimated(s, "no export stage gives this benchmark its model");
  const feed = exportFeedOf(from);
  const probes = loadProbesFor([s.runtime]);
  const termsKey = `${model.onnx} ${JSON.stringify(feed)} ${JSON.stringify(probes)}`;
  if (!c.onnxTerms.has(termsKey)) c.onnxTerms.set(termsKey, await modelTerms(model.onnx, feed, { ...probes, tmpDir: c.dir }));
  const terms = c.onnxTerms.get(termsKey)!;
  const evalSamples = inputFileRows(model.onnx, feed) ?? model.evalSamples; // a stage's inputs file holds its own rows
  const calls = requestsPerBatch({ iterations: s.opts.iterations ?? p.options.iterations, warmup: s.opts.warmup ?? p.options.warmup });
  const e = estimateRuntime(c.onnx, s.runtime, features(s.runtime, terms, { maxBatch, batchSizes, evalSamples, calls, threads: s.opts.threads ?? p.options.threads }));
  if (!e) return notEstimated(s, `the calibration has no ${s.runtime} model`);
  return {
    ...base, runtime: s.runtime, model: model.arch ?? model.onnx, peakMiB: Math.max(...e.phases.map((x) => x.peak)),
    phases: e.phases.map((x) => ({ phase: x.phase, rss: x.rss, peak: x.peak })),
    parts: `weights ${e.features.weightMiB.toFixed(1)} MiB, activations ${e.features.activationMiB.toFixed(1)} MiB, eval set ${e.features.evalMiB.toFixed(1)} MiB in + ${e.features.evalOutputMiB.toFixed(1)} MiB out`,
    why: activationsUnknown(terms, s.runtime) !== null ? `activations unknown: ${activationsUnknown(terms, s.runtime)}`
      : ortLoadOf(terms, s.runtime)?.unavailable ? `held by malloc after ${s.runtime}'s load left out: ${ortLoadOf(terms, s.runtime)!.unavailable}`
      : terms.nativeLoadUnavailable ? `memlane-rt's repacked weights left out: ${terms.nativeLoadUnavailable}` : null,
    naiveMiB: (terms.params * 4) / 2 ** 20 + (terms.ioPerSampleMiB ?? 0) * maxBatch,
  };
}

export async function estimatePipeline(p: Pipeline, onnx: Calibration, torch: TorchCalibration, memoryBudgetMiB: number): Promise<PipelineEstimate> {
  const stages = p.stages;
  const dir = mkdtempSync(join(tmpdir(), "memlane-estimate-pipeline-"));
  const c: Ctx = { onnx, torch, dir, models: new Map(), torchTerms: new Map(), onnxTerms: new Map() };
  try {
    await exportModels(stages, c);
    const out: StageEstimate[] = [];
    for (let i = 0; i < stages.length; i++) {
      // A probe that fails (a train stage's torch run, a rank's torch.distributed imports) leaves
      // that stage unestimated, with the reason; the others still are.
      out.push(await estimateStage(p, stages, i, c).catch((err: Error) => notEstimated(stages[i]!, `its probe failed: ${err.message.split("\n")[0]}`)));
    }
    return { pipeline: p.name, stages: out, concurrent: concurrentPeak(out, p.options.concurrency, memoryBudgetMiB) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
