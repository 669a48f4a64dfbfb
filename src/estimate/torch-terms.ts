/**
 * The model terms of a PyTorch estimate (training and python-torch inference): parameters,
 * and the activation bytes a probe forward/backward holds at two small batches, extrapolated
 * to the run's batch (python/memlane_worker/tasks/estimate_torch.py). torch runs a module,
 * not an ONNX file, so these come from a short-lived Python worker rather than the graph.
 */
import { availableParallelism } from "node:os";
import { inFreshWorker } from "../workers/fresh-worker.ts";
import { workerSpecs } from "../workers/specs.ts";
import { layoutDrawEnv } from "./layout-draws.ts";
import { medianOrNull, rangeOrNull } from "./ort-load.ts";
import type { Optimizer } from "./torch-estimate.ts";

const MIB = 2 ** 20;

export type DistStrategy = "ddp" | "fsdp";

export type DataSource = "none" | "digits" | "tinygpt";

export interface TorchTerms {
  arch: string;
  params: number;
  /** Parameter bytes (float32 here), MiB. */
  paramMiB: number;
  bufferMiB: number;
  probeBatches: [number, number];
  /** Peak bytes held by tensors created in a training forward / backward / an inference forward, at each probe batch. */
  probes: { trainForward: [number, number]; trainBackward: [number, number]; inference: [number, number] };
  /** Elements of one sample's input, and their size in bytes (4 float32, 8 int64 ids). */
  inputElements: number;
  inputBytesPerElement: number;
  /** RSS the training data costs once loaded as `train` loads it (its loader's libraries included), MiB. */
  dataMiB: number;
  /** The measured RSS growth of the probe's short run at the real sizes (allocator included), MiB; null when none was asked. */
  runMiB: number | null;
  /** `infer` runs: the growth after the first call alone (python-torch's first-inference); null otherwise. */
  runFirstMiB: number | null;
  /**
   * The run's RSS growth at its end, below `runMiB` by what its last calls freed, MiB; null
   * without a run. For `infer` runs: the mean over the draws (below) of the growth after every
   * call that could be the benchmark's last.
   */
  runEndMiB: number | null;
  /** `infer` runs: the least and most of those samples over every draw, MiB (where glibc's heap top may lie); null otherwise. */
  runEndRangeMiB: [number, number] | null;
  /** Fresh processes the short run was measured in (0 without a run). */
  runDraws: number;
  /** A distributed rank's imports beyond `train`'s (torch.distributed, DDP or FSDP, the distributed checkpoint), measured; null unless asked. */
  distImportMiB: number | null;
}

/** A short run the probe measures: training steps and an eval forward, or inference forwards. */
export type ProbeRun =
  | { mode: "train"; batchSize: number; evalSamples: number; optimizer: Optimizer; threads: number; steps?: number; distributed?: DistStrategy }
  | { mode: "infer"; batchSizes: readonly number[]; threads: number; iterations?: number; warmup?: number; evalSamples?: number };

/** The data a trainable arch is fitted on (python/memlane_worker/tasks/train.py). */
export const dataSourceOf = (arch: string): DataSource => (arch === "tiny-gpt" ? "tinygpt" : "digits");

/**
 * The probe's bytes at `batch`, MiB: a straight line through the two probe batches (every
 * activation of these models scales with the batch; the fixed part is what does not: the
 * outputs of ops on parameters alone). Never below the larger probe's figure scaled down.
 */
export function atBatch(pair: readonly [number, number], batches: readonly [number, number], batch: number): number {
  const [b1, b2] = batches;
  const [v1, v2] = pair;
  const perSample = Math.max(0, (v2 - v1) / (b2 - b1));
  return Math.max(0, v1 + perSample * (batch - b1)) / MIB;
}

/** One draw of the short run: what estimate.torch measures in one fresh process. */
export interface RunDraw {
  runMiB: number | null;
  runFirstMiB: number | null;
  runEndMiB: number | null;
  runEndSamplesMiB?: number[] | null;
}

interface RawTerms extends RunDraw {
  arch: string; params: number; paramBytes: number; bufferBytes: number; probeBatches: [number, number];
  probes: TorchTerms["probes"]; dataMiB: number; distImportMiB?: number | null; inputElements: number; inputBytesPerElement: number;
}

/**
 * Fresh processes the short run is measured in. Where glibc's heap top lies after a request
 * is drawn per process (docs/memory.md, "python-torch's coin"): one draw put tiny-gpt's
 * python-torch estimate anywhere in 254-307 MiB against 268-312 measured, and its training
 * probe's peak anywhere in 490-550 MiB. Four draws moved the estimate 5 MiB; each costs a
 * torch import and the short run (about 3 s for tiny-gpt).
 */
export const RUN_DRAWS = 4;


/**
 * The short run's terms from its draws: the end is the mean of every draw's samples (each
 * draw gives as many), so that no single process's heap decides it; the peak and the first
 * call take the median draw. A train run has no samples: its end is the median draw's.
 */
export function combineDraws(draws: readonly RunDraw[]): Pick<TorchTerms, "runMiB" | "runFirstMiB" | "runEndMiB" | "runEndRangeMiB" | "runDraws"> {
  const measured = draws.filter((d) => d.runMiB !== null);
  if (measured.length === 0) return { runMiB: null, runFirstMiB: null, runEndMiB: null, runEndRangeMiB: null, runDraws: 0 };
  const samples = measured.flatMap((d) => d.runEndSamplesMiB ?? []);
  const firsts = measured.map((d) => d.runFirstMiB).filter((x): x is number => x !== null);
  return {
    runMiB: medianOrNull(measured.map((d) => d.runMiB)),
    runFirstMiB: firsts.length > 0 ? medianOrNull(firsts) : null,
    runEndMiB: samples.length > 0 ? samples.reduce((a, b) => a + b, 0) / samples.length : medianOrNull(measured.map((d) => d.runEndMiB ?? d.runMiB)),
    runEndRangeMiB: rangeOrNull(samples),
    runDraws: measured.length,
  };
}

/**
 * The probe's worker for draw `draw`: the benchmark's thread settings, and an environment of a
 * size of its own, so that the draws see different address layouts (layout-draws.ts): in one
 * environment tiny-gpt's short infer run grew 24.6 MiB in both of two fresh workers, in another
 * 28.3 in both.
 */
const probeSpec = (threads: string, draw: number) =>
  workerSpecs.python({ name: "estimate-probe", env: { OMP_NUM_THREADS: threads, MKL_NUM_THREADS: threads, ...layoutDrawEnv(draw) } });

/**
 * Runs the probe in a fresh Python worker (it imports torch: a few seconds), with the OpenMP
 * pool of the run it stands for: per-thread allocations are part of what the short run
 * measures. A short run is drawn in RUN_DRAWS fresh processes, the first of them the
 * probe's own; the others run only the short run, as many at once as the cores allow.
 */
export async function torchTerms(arch: string, data: DataSource = "none", run?: ProbeRun): Promise<TorchTerms> {
  const threads = String(run?.threads ?? 1);
  const { mode, ...shape } = run ?? { mode: "none" };
  const args = { arch, data, threads: Number(threads), run: mode, ...shape };
  const task = (only: "all" | "run", draw: number) => inFreshWorker(probeSpec(threads, draw), async (w) =>
    (await w.run("estimate.torch", { ...args, only }, { timeoutMs: 300_000 })).value as unknown as RawTerms);
  const extra = mode === "none" ? 0 : RUN_DRAWS - 1;
  const lanes = Math.max(1, Math.floor(availableParallelism() / Number(threads)));
  const [r, ...draws] = await inLanes([() => task("all", 0), ...Array.from({ length: extra }, (_, i) => () => task("run", i + 1))], lanes);
  return {
    arch: r!.arch, params: r!.params, paramMiB: r!.paramBytes / MIB, bufferMiB: r!.bufferBytes / MIB,
    probeBatches: r!.probeBatches, probes: r!.probes, dataMiB: r!.dataMiB, distImportMiB: r!.distImportMiB ?? null,
    ...combineDraws([r!, ...draws]),
    inputElements: r!.inputElements, inputBytesPerElement: r!.inputBytesPerElement,
  };
}

/** Runs `jobs` at most `lanes` at a time; their results in order. The first failure rejects, after the running ones end. */
async function inLanes<T>(jobs: ReadonlyArray<() => Promise<T>>, lanes: number): Promise<T[]> {
  const results: T[] = new Array(jobs.length);
  let next = 0;
  let failed = false;
  const lane = async (): Promise<void> => {
    while (!failed && next < jobs.length) {
      const i = next++;
      try {
        results[i] = await jobs[i]!();
      } catch (e) {
        failed = true; // start no more: the estimate fails with the first error
        throw e;
      }
    }
  };
  const settled = await Promise.allSettled(Array.from({ length: Math.min(lanes, jobs.length) }, lane));
  const rejected = settled.find((s): s is PromiseRejectedResult => s.status === "rejected");
  if (rejected) throw rejected.reason;
  return results;
}

/** The terms of a train stage: its data, and a short run of its steps and eval forward. */
export const trainTerms = (arch: string, s: { batchSize: number; evalSamples: number; optimizer: Optimizer }, threads: number) =>
  torchTerms(arch, dataSourceOf(arch), { mode: "train", ...s, threads });

/** The terms of one rank of a distributed train stage: its local batch, and the imports a rank adds. */
export const rankTerms = (arch: string, s: { batchSize: number; evalSamples: number; optimizer: Optimizer }, threads: number, strategy: DistStrategy) =>
  torchTerms(arch, dataSourceOf(arch), { mode: "train", ...s, threads, distributed: strategy });

/** How a python-torch benchmark runs, which its probe replays: calls per batch size, and the eval pass. */
export interface InferRun {
  batchSizes: readonly number[];
  iterations: number;
  warmup: number;
  evalSamples: number;
}

/** The terms of a python-torch benchmark: its calls and eval pass replayed, no data set loaded. */
export const inferTerms = (arch: string, run: InferRun, threads: number) =>
  torchTerms(arch, "none", { mode: "infer", ...run, threads });

/** One key per distinct probe of a python-torch benchmark (the memo of a run or an estimate). */
export const inferTermsKey = (arch: string, run: InferRun, threads: number): string =>
  `infer ${arch} ${run.batchSizes.join(",")} ${run.iterations}+${run.warmup} ${run.evalSamples} ${threads}`;

/** Where an estimate gets its terms: the probes above, or a run's memo of them (src/pipeline/memory-plan.ts). */
export interface TermsSource {
  train: typeof trainTerms;
  infer: typeof inferTerms;
  rank: typeof rankTerms;
}

export const probeTerms: TermsSource = { train: trainTerms, infer: inferTerms, rank: rankTerms };
