/**
 * PyTorch estimates: the train stage's peak RSS and python-torch's inference phases, from
 * the probe's model terms (torch-terms.ts) and the fixed costs a calibration run measured
 * (torch-calibration.ts). The model-dependent terms are physics, not fitted slopes:
 *
 *   train peak = fixed + data + P + k·P (optimizer state) + max(G + forward(B), backward(B), G + eval(N))
 *
 * P the parameters (and buffers), G = P their gradients, k = 2 for Adam/AdamW (exp_avg,
 * exp_avg_sq), 1 for SGD with momentum, 0 for plain SGD. A step's forward runs while the
 * previous step's gradients are alive (zero_grad(set_to_none) comes after it); its backward
 * holds what the forward saved plus the new gradients (the probe counts both); the eval
 * forward over the N held-out samples runs with the last gradients alive.
 */
import { atBatch, type TorchTerms } from "./torch-terms.ts";

export const OPTIMIZER_STATES = Object.freeze({ adam: 2, adamw: 2, "sgd-momentum": 1, sgd: 0 });
export type Optimizer = keyof typeof OPTIMIZER_STATES;

/** What `train` uses per arch (python/memlane_worker/tasks/train.py, train_gpt.py). */
export const optimizerOf = (arch: string): Optimizer => (arch === "tiny-gpt" ? "adamw" : "adam");
/** The held-out set `train` evaluates at every epoch's end, in one forward. */
export const evalSamplesOf = (arch: string): number => (arch === "tiny-gpt" ? 512 : 360);
/** train.py's default batch (defined with the train stage's options). */
export { DEFAULT_TRAIN_BATCH_SIZE as TRAIN_BATCH_DEFAULT } from "../pipeline/stages.ts";

export interface TrainShape {
  batchSize: number;
  evalSamples: number;
  optimizer: Optimizer;
}

export interface TrainParts {
  fixedMiB: number;
  dataMiB: number;
  paramsMiB: number;
  gradientsMiB: number;
  optimizerMiB: number;
  activationsMiB: number;
  /** Which moment the activation term is taken at: the one with the most held. */
  activationsAt: "train forward" | "backward" | "eval forward";
  /** What the probe's measured short run held beyond the terms above (freed blocks glibc keeps, kernels' scratch); null without a run. */
  allocatorMiB: number | null;
}

export interface TrainEstimate {
  peakMiB: number;
  parts: TrainParts;
  /** seeds/003: parameters × 4 B + a batch of inputs × 4 B. */
  naiveMiB: number;
}

/** The fixed costs a calibration measured: the train worker's own (interpreter, torch, autograd's threads) and python-torch's per phase. */
export interface TorchFixed {
  trainFixedMiB: number;
  /** python-torch inference: phase → its end RSS, USS, PSS and its peak, minus the model terms the probe held then. */
  inferFixedMiB: Record<string, InferFigures>;
}

/**
 * The train stage's peak. With the probe's short run (`t.runMiB`, measured with this
 * machine's allocator) the model-dependent part is that run's growth and the physics terms
 * say what it is made of, the rest being allocator retention; without one, the physics terms
 * alone (a floor: glibc keeps freed blocks).
 */
export function trainEstimate(fixed: TorchFixed, t: TorchTerms, s: TrainShape): TrainEstimate {
  const p = t.paramMiB + t.bufferMiB;
  const g = t.paramMiB;
  const opt = OPTIMIZER_STATES[s.optimizer] * t.paramMiB;
  const at = (pair: readonly [number, number], batch: number) => atBatch(pair, t.probeBatches, batch);
  const moments: Array<[TrainParts["activationsAt"], number]> = [
    ["train forward", g + at(t.probes.trainForward, s.batchSize)],
    ["backward", at(t.probes.trainBackward, s.batchSize)],
    ["eval forward", g + at(t.probes.inference, s.evalSamples)],
  ];
  const [activationsAt, held] = moments.reduce((a, b) => (b[1] > a[1] ? b : a));
  const activations = Math.max(0, held - g);
  const physics = p + g + opt + activations;
  const parts: TrainParts = {
    fixedMiB: fixed.trainFixedMiB, dataMiB: t.dataMiB, paramsMiB: p, gradientsMiB: g, optimizerMiB: opt, activationsMiB: activations, activationsAt,
    allocatorMiB: t.runMiB === null ? null : t.runMiB - physics,
  };
  return {
    peakMiB: parts.fixedMiB + parts.dataMiB + (t.runMiB ?? physics),
    parts,
    naiveMiB: (t.params * 4 + t.inputElements * 4 * s.batchSize) / 2 ** 20,
  };
}

/** One line naming the parts, for the CLI and a refused stage's message. */
export function describeTrain(e: TrainEstimate): string {
  const f = (x: number) => `${x.toFixed(1)} MiB`;
  const p = e.parts;
  return `fixed ${f(p.fixedMiB)} + data ${f(p.dataMiB)} + parameters ${f(p.paramsMiB)} + gradients ${f(p.gradientsMiB)} + optimizer ${f(p.optimizerMiB)} + activations ${f(p.activationsMiB)} (at the ${p.activationsAt})` +
    (p.allocatorMiB === null ? "" : ` + allocator ${f(p.allocatorMiB)} (measured short run)`);
}

export interface InferFigures {
  rss: number;
  uss: number;
  pss: number;
  peak: number;
}

export interface InferShape {
  maxBatch: number;
  /** Eval samples the worker holds (python-torch receives the held-out set). */
  evalSamples: number;
}

/**
 * python-torch's phases: the fixed part per phase from calibration, plus what the phase holds
 * of this model: weights from model-load on (the module's own copy; the checkpoint's copy is
 * freed), the eval set it received, the activations of the largest request from the first one on.
 */
export function inferEstimate(fixed: TorchFixed, t: TorchTerms, s: InferShape): Array<{ phase: string } & InferFigures> {
  const weights = t.paramMiB + t.bufferMiB;
  const evalSet = (t.inputElements * t.inputBytesPerElement * s.evalSamples) / 2 ** 20;
  // the probe's measured forwards (module + activations + allocator), else the tracked live bytes
  const running = t.runMiB ?? weights + atBatch(t.probes.inference, t.probeBatches, s.maxBatch);
  const first = t.runFirstMiB ?? running;
  // the run's end: below its peak by what the last calls freed (glibc gives back a freed top)
  const ended = t.runEndMiB ?? running;
  return Object.entries(fixed.inferFixedMiB).map(([phase, c0]) => {
    const held = phase === "import" || phase === "runtime-create" ? 0
      : phase === "model-load" ? weights + evalSet
      : (phase === "first-inference" ? first : ended) + evalSet;
    // model-load's peak: the state dict read from the checkpoint beside the module it is copied
    // into; steady-inference's: the run's highest, above where it ended
    const peak = phase === "model-load" ? held + weights : phase === "steady-inference" ? running + evalSet : held;
    // what a phase holds is this process's own anonymous memory: RSS, USS and PSS alike
    return { phase, rss: c0.rss + held, uss: c0.uss + held, pss: c0.pss + held, peak: c0.peak + peak };
  });
}
