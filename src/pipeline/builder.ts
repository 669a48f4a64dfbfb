/**
 * The pipeline builder: `pipeline(name, opts)` then chained stage methods. Each method checks
 * its options at once (errors name the stage and the option) and fills in default
 * dependencies, so a pipeline module fails at import, not halfway through a run.
 */
import { checkBudget } from "./budgets.ts";
import { checkProfile } from "./profile-option.ts";
import { validateDag } from "./scheduler.ts";
import { resolveRetries } from "./attempts.ts";
import { checkBatchDivides, resolveDistributed } from "./distributed/options.ts";
import {
  type BenchmarkOptions,
  CHECKPOINT_METHODS,
  type CheckpointLoadOptions,
  type ExportOptions,
  type PythonStageFn,
  type PythonStageOptions,
  type Runtime,
  RUNTIMES,
  type StageDef,
  type TrainOptions,
} from "./stages.ts";
import {
  checkInt,
  checkIntList,
  checkOneOf,
  OptionError,
  type PipelineOptions,
  type ResolvedPipelineOptions,
  resolvePipelineOptions,
} from "./options.ts";

const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._:-]*$/;

/** A pipeline under construction; a pipeline module default-exports it. */
export class Pipeline {
  readonly #stages: StageDef[] = [];
  readonly options: ResolvedPipelineOptions;

  constructor(
    readonly name: string,
    opts?: PipelineOptions,
  ) {
    if (typeof name !== "string" || !NAME_RE.test(name))
      throw new OptionError("pipeline name", "letters, digits, '.', '_', ':' or '-'", name);
    this.options = resolvePipelineOptions(opts);
  }

  /** The stages, validated (no unknown dependency, no cycle). */
  get stages(): readonly StageDef[] {
    validateDag(this.#stages);
    return this.#stages;
  }

  /** Trains `arch` in a Python worker. Default name "train"; no default dependency. */
  train(opts: TrainOptions): this {
    const name = this.#name(opts.name, "train");
    if (typeof opts.arch !== "string") throw new OptionError(`stage "${name}": arch`, "a model name", opts.arch);
    if (opts.epochs !== undefined) checkInt(`stage "${name}": epochs`, opts.epochs, 1);
    if (opts.stepsPerEpoch !== undefined) checkInt(`stage "${name}": stepsPerEpoch`, opts.stepsPerEpoch, 1);
    if (opts.threads !== undefined) checkInt(`stage "${name}": threads`, opts.threads, 1);
    if (opts.minAccuracy !== undefined && !(opts.minAccuracy >= 0 && opts.minAccuracy <= 1))
      throw new OptionError(`stage "${name}": minAccuracy`, "a number in [0, 1]", opts.minAccuracy);
    checkBudget(name, opts.budget);
    // Checked here so a bad `distributed` fails at import; the executor resolves it again.
    if (opts.distributed !== undefined) {
      checkBatchDivides(name, resolveDistributed(name, opts.distributed), opts.batchSize);
      // Budgets are checked on one training process (report.training); per-rank budgets do not exist yet.
      if (opts.budget !== undefined) throw new OptionError(`stage "${name}": budget`, "no budget with distributed (per-rank budgets are not supported)", opts.budget);
    }
    return this.#add({ kind: "train", name, after: opts.after ?? [], exclusive: !!opts.exclusive, retries: resolveRetries("train", name, opts.retries), opts: { ...opts } });
  }

  /**
   * Exports the trained checkpoint to ONNX (default after the last train stage), or with
   * `zoo` a zoo model with random weights. Default name "export".
   */
  export(opts: ExportOptions = {}): this {
    const name = this.#name(opts.name, "export");
    let after = opts.after;
    if (opts.zoo !== undefined && opts.onnx !== undefined)
      throw new OptionError(`stage "${name}": onnx`, "either zoo or onnx, not both", opts.onnx);
    for (const k of ["shapes", "seq", "inputs"] as const)
      if (opts[k] !== undefined && opts.onnx === undefined) throw new OptionError(`stage "${name}": ${k}`, "only with onnx (an existing model's inputs)", opts[k]);
    if (opts.seq !== undefined) checkInt(`stage "${name}": seq`, opts.seq, 1);
    for (const [input, dims] of Object.entries(opts.shapes ?? {}))
      if (!Array.isArray(dims) || dims.length === 0 || dims.some((d) => d !== "N" && !(Number.isInteger(d) && (d as number) > 0)))
        throw new OptionError(`stage "${name}": shapes.${input}`, 'a full shape of positive integers, "N" at the batch axis', dims);
    if (opts.zoo === undefined && opts.onnx === undefined) {
      const from = opts.from ?? this.#last("train", name);
      after ??= [from];
      opts = { ...opts, from };
    }
    return this.#add({ kind: "export", name, after: after ?? [], exclusive: !!opts.exclusive, retries: resolveRetries("export", name, opts.retries), opts: { ...opts } });
  }

  /**
   * Deploys the model on `runtime` in a fresh process (for node-ort, a child Node process)
   * and measures memory per phase, latency and numerics. python-torch runs the
   * trained checkpoint; the others the exported ONNX (native compiles it to a plan first).
   * Default name `bench:<runtime>`; runs exclusive unless `exclusive: false`.
   */
  benchmark(runtime: Runtime, opts: BenchmarkOptions = {}): this {
    checkOneOf("benchmark runtime", runtime, RUNTIMES);
    const name = this.#name(opts.name, `bench:${runtime}`);
    // python-torch runs the trained checkpoint, or a zoo model rebuilt from its seed.
    const torchFrom = runtime === "python-torch" && !this.#stages.some((x) => x.kind === "train") ? "export" : "train";
    const from = opts.from ?? this.#last(runtime === "python-torch" ? torchFrom : "export", name);
    if (opts.batchSizes !== undefined) checkIntList(`stage "${name}": batchSizes`, opts.batchSizes, 1);
    if (opts.iterations !== undefined) checkInt(`stage "${name}": iterations`, opts.iterations, 1);
    if (opts.threads !== undefined) checkInt(`stage "${name}": threads`, opts.threads, 1);
    if (opts.optional !== undefined && typeof opts.optional !== "boolean") throw new OptionError(`stage "${name}": optional`, "a boolean", opts.optional);
    checkBudget(name, opts.budget);
    checkProfile(name, opts);
    return this.#add({
      kind: "benchmark",
      name,
      runtime,
      after: opts.after ?? [from],
      exclusive: opts.exclusive ?? true,
      retries: resolveRetries("benchmark", name, opts.retries),
      opts: { ...opts, from },
    });
  }

  /**
   * Loads a checkpoint by each method, each in a fresh worker: the trained one (default after
   * the last train stage), or with `zoo` a zoo model's seeded random weights (no default
   * dependency). Default name "checkpoint-load".
   */
  checkpointLoad(opts: CheckpointLoadOptions = {}): this {
    const name = this.#name(opts.name, "checkpoint-load");
    for (const m of opts.methods ?? []) checkOneOf(`stage "${name}": methods[]`, m, CHECKPOINT_METHODS);
    if (opts.zoo !== undefined) {
      if (typeof opts.zoo !== "string" || opts.zoo === "") throw new OptionError(`stage "${name}": zoo`, "a zoo model name", opts.zoo);
      if (opts.from !== undefined) throw new OptionError(`stage "${name}": from`, "either zoo or from, not both", opts.from);
      if (opts.seed !== undefined) checkInt(`stage "${name}": seed`, opts.seed, 0);
      return this.#add({ kind: "checkpoint-load", name, after: opts.after ?? [], exclusive: !!opts.exclusive, retries: resolveRetries("checkpoint-load", name, opts.retries), opts: { ...opts } });
    }
    if (opts.seed !== undefined) throw new OptionError(`stage "${name}": seed`, "no seed without zoo (a trained checkpoint has its weights)", opts.seed);
    const from = opts.from ?? this.#last("train", name);
    return this.#add({
      kind: "checkpoint-load",
      name,
      after: opts.after ?? [from],
      exclusive: !!opts.exclusive,
      retries: resolveRetries("checkpoint-load", name, opts.retries),
      opts: { ...opts, from },
    });
  }

  /**
   * Runs `fn` with a Python bridge (pythonia, the project's venv interpreter) whose process is
   * memory-tracked like a worker and stopped when the stage ends. Default dependency: every
   * stage declared before it.
   */
  python(name: string, fn: PythonStageFn, opts: PythonStageOptions = {}): this {
    name = this.#name(name, name);
    if (typeof fn !== "function") throw new OptionError(`stage "${name}": fn`, "an async function (py, ctx) => ...", fn);
    const after = opts.after ?? this.#stages.map((s) => s.name);
    return this.#add({ kind: "python", name, after, exclusive: !!opts.exclusive, retries: resolveRetries("python", name, opts.retries), fn });
  }

  #name(given: string | undefined, fallback: string): string {
    const name = given ?? fallback;
    if (typeof name !== "string" || !NAME_RE.test(name))
      throw new OptionError("stage name", "letters, digits, '.', '_', ':' or '-'", name);
    if (this.#stages.some((s) => s.name === name))
      throw new OptionError(`stage "${name}"`, "a name not used by another stage (pass `name`)", name);
    return name;
  }

  #last(kind: StageDef["kind"], forStage: string): string {
    const s = this.#stages.filter((x) => x.kind === kind).at(-1);
    if (!s) throw new OptionError(`stage "${forStage}": from`, `a ${kind} stage declared before it`, undefined);
    return s.name;
  }

  #add(def: StageDef): this {
    this.#stages.push(def);
    return this;
  }
}

/**
 * Starts a pipeline definition.
 * @example
 * export default pipeline("digits").train({ arch: "digits-cnn" }).export().benchmark("python-ort");
 */
export function pipeline(name: string, opts?: PipelineOptions): Pipeline {
  return new Pipeline(name, opts);
}
