/**
 * `memlane estimate <model.onnx | pipeline.ts>`: predicted host RAM per runtime and phase (end
 * RSS, USS, PSS and the phase's peak) without running the model: the model's terms come from
 * its graph (src/estimate/model-terms.ts), the runtimes' fixed costs and slopes from a
 * calibration of this machine (src/estimate/calibration.ts), made on first use and cached.
 * A pipeline module is loaded, never run: every stage's estimate, and the concurrent peak
 * the scheduler's rules allow (src/cli/estimate-pipeline.ts).
 */
import { existsSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type CommandSpec, parseArgs, UsageError, usage } from "../args.ts";
import type { Io } from "../io.ts";
import { calibrate, CALIBRATED_RUNTIMES } from "../../estimate/calibration.ts";
import { calibrationKey, calibrationMismatch, loadCalibration, saveCalibration } from "../../estimate/cache.ts";
import { activationsUnknown, features, fedInputShapes, type InputFeed, inputFileRows, isOrtRuntime, loadProbesFor, modelTerms, requestsPerBatch, withoutHeldPieces } from "../../estimate/model-terms.ts";
import { DEFAULT_SEQ, InputSpecError, parseShapeFlag } from "../../pipeline/inputs/shapes.ts";
import { PIPELINE_DEFAULTS } from "../../pipeline/options.ts";
import { estimateRuntime, loadWords, naiveMiB } from "../../estimate/predict.ts";
import { num, textTable } from "../../report/format.ts";
import { shown } from "../outcome.ts";
import { estimatePipelineCommand, PIPELINE_FILE } from "../estimate-pipeline.ts";
import { deviceSection, printDeviceSection } from "../estimate-device.ts";
import { SPREAD_NOTED_MIB } from "../../estimate/pipeline-estimate.ts";
import { nodeDeadOutputKept } from "../../estimate/node-ort-outputs.ts";


export const spec: CommandSpec = {
  name: "estimate",
  summary: "Predict host RAM per runtime and phase for an ONNX model without running it (calibrated on this machine, cached).",
  positionals: [{ name: "model", description: "an ONNX model file, or a pipeline module (.ts, .mts, .js, .mjs) to estimate stage by stage" }],
  flags: {
    runtimes: { type: "list", choices: CALIBRATED_RUNTIMES, placeholder: "LIST", description: "runtimes to estimate (an ONNX file; a pipeline estimates its own stages)", default: [...CALIBRATED_RUNTIMES] },
    batch: { type: "intList", placeholder: "LIST", description: "batch sizes the benchmark will run (the largest counts; an ONNX file only: a pipeline says its own)", default: [1, 64] },
    "eval-samples": { type: "int", placeholder: "N", description: "eval samples every runtime holds (compare's default; an ONNX file only)", default: 256 },
    threads: { type: "int", placeholder: "N", description: "intra-op threads of every runtime (as compare's --threads: memlane-rt runs a split batch one lane a thread, each in arena of its own; an ONNX file only)", default: 1 },
    iterations: { type: "int", placeholder: "N", description: "timed calls the benchmark will make per batch size (as compare's --iterations; node-ort's uncollected outputs grow with them; an ONNX file only)", default: PIPELINE_DEFAULTS.iterations },
    shape: { type: "string", placeholder: "SHAPES", description: "shapes of inputs with symbolic dims the benchmark will feed, name=1x128,... (as compare's --shape; an ONNX file only)" },
    seq: { type: "int", placeholder: "N", description: `the value of every other symbolic dim the benchmark will feed, e.g. the sequence length (as compare's --seq, default ${DEFAULT_SEQ}; an ONNX file only)` },
    inputs: { type: "string", placeholder: "FILE", description: "the arrays the benchmark will feed (.npz or .safetensors, as compare's --inputs): their shapes, and their rows as the eval set; an ONNX file only" },
    device: { type: "string", choices: ["cpu", "cuda"], placeholder: "cpu|cuda", description: "device the runtimes will use", default: "cpu" },
    calibrate: { type: "boolean", description: "redo this machine's calibration first (about a minute of probe runs; with --device cuda, the GPU's too)" },
    json: { type: "boolean", description: "print the estimate as JSON" },
    "memory-budget": { type: "string", placeholder: "SIZE", description: "pipeline: the budget `memlane run` would get (default: available memory), for the concurrent peak" },
  },
};

/** Flags of an ONNX file that a pipeline's export stages set for themselves. */
const PIPELINE_FED = ["shape", "seq", "inputs"] as const;

export async function execute(argv: readonly string[], io: Io): Promise<number> {
  const args = parseArgs(spec, argv);
  if (args.help) {
    io.out(usage(spec));
    return 0;
  }
  const model = args.positionals["model"]!;
  if (!existsSync(model)) throw UsageError.bad("<model>", "an existing ONNX file or pipeline module", model);
  if (!statSync(model).isFile()) throw UsageError.bad("<model>", "a file (not a directory)", model);
  if (PIPELINE_FILE.test(model)) {
    // A pipeline's export stages say what their benchmarks feed (seq, shapes, inputs): a flag here would be ignored.
    const feedFlag = PIPELINE_FED.find((f) => args.flags[f] !== undefined);
    if (feedFlag) throw new UsageError(`--${feedFlag}: for an ONNX file only; ${model} is a pipeline, whose export stages give what their benchmarks feed (seq, shapes, inputs)`, `--${feedFlag}`);
  }
  const inputsFile = args.flags.inputs as string | undefined;
  if (inputsFile !== undefined && !existsSync(inputsFile)) throw UsageError.bad("--inputs", "an existing .npz or .safetensors file", inputsFile);
  const key = calibrationKey();
  let cal = args.flags.calibrate ? null : loadCalibration(key);
  if (!cal) {
    const why = args.flags.calibrate ? "asked for" : (calibrationMismatch(key) ?? "none cached for these library versions");
    io.err(`memlane estimate: calibrating this machine's runtimes (${why}); about a minute`);
    cal = await calibrate(key, io);
    io.err(`memlane estimate: calibration cached in ${shown(saveCalibration(cal))}`);
  }
  if (PIPELINE_FILE.test(model)) return estimatePipelineCommand(model, cal, args.flags, io);
  let feed: InputFeed;
  let fileRows: number | null = null;
  let inputShapes: Record<string, number[]> | undefined;
  try {
    feed = {
      seq: (args.flags.seq as number | undefined) ?? DEFAULT_SEQ,
      ...(args.flags.shape !== undefined ? { shapes: parseShapeFlag(args.flags.shape as string) } : {}),
      ...(inputsFile !== undefined ? { inputsFile } : {}),
    };
    // A bad --shape or --inputs is a usage error naming the input, before any compile; a file's
    // rows are the eval set the benchmark holds (compare's --eval-samples counts generated rows only).
    inputShapes = fedInputShapes(model, feed);
    fileRows = inputFileRows(model, feed);
  } catch (err) {
    if (err instanceof InputSpecError) throw new UsageError(err.message, err.option);
    throw err;
  }
  // The load probe's workers get a TMPDIR of their own, removed here (ORT writes `.ses` there).
  const probeTmp = mkdtempSync(join(tmpdir(), "memlane-estimate-"));
  let terms: Awaited<ReturnType<typeof modelTerms>>;
  try {
    terms = await modelTerms(model, feed, { ...loadProbesFor(args.flags.runtimes as string[]), tmpDir: probeTmp });
  } finally {
    rmSync(probeTmp, { recursive: true, force: true });
  }
  const run = { maxBatch: Math.max(...(args.flags.batch as number[])), batchSizes: args.flags.batch as number[], evalSamples: fileRows ?? (args.flags["eval-samples"] as number),
    calls: requestsPerBatch({ iterations: args.flags.iterations as number, warmup: PIPELINE_DEFAULTS.warmup }), threads: args.flags.threads as number };
  // memlane-rt runs only what its compiler accepts: a refused model has no native figures to give.
  const runs = (r: string) => r !== "native" || !terms.compileError;
  const estimates = (args.flags.runtimes as string[]).map((r) => (runs(r) ? estimateRuntime(cal!, r, features(r, terms, run)) : null));
  const naive = naiveMiB(terms, run);
  const device = args.flags.device as string;
  const onDevice = device === "cuda" ? await deviceSection(model, inputShapes, run.maxBatch, args.flags.runtimes as string[], args.flags.calibrate === true, (l) => io.err(l)) : null;
  if (args.flags.json) {
    // The trace the ORT arena replay is fed (hundreds of events) is an input, not a term to print.
    io.out(JSON.stringify({ model, run, device, terms: { ...terms, ortTracePerSample: undefined }, naiveMiB: naive, calibration: { createdAt: cal.createdAt, key: cal.key }, runtimes: estimates,
      ...(onDevice ? { deviceEstimate: onDevice } : {}) }, null, 1));
    return 0;
  }
  io.out(`memlane estimate ${model}: ${terms.params} parameters, weights ${num(terms.weightMiB)} MiB, ` +
    `arena ${terms.arenaPerSampleMiB === null ? "unknown" : `${num(terms.arenaPerSampleMiB, 3)} MiB`} a sample ` +
    `(ORT's memory pattern ${terms.ortPatternPerSampleMiB === null ? "unknown" : `${num(terms.ortPatternPerSampleMiB, 3)} MiB`}); batch up to ${run.maxBatch}, ${run.evalSamples} eval samples`);
  for (const [runtime, load] of Object.entries(terms.ortLoad)) {
    if (load.unavailable) io.out(`  held by malloc after ${runtime}'s load: unavailable (${load.unavailable}); ${runtime} leaves that term out`);
    const range = load.heldRangeMiB;
    // glibc's coin (docs/memory.md, "What is left is glibc's coin"): say it where it is wider
    // than the run-to-run noise, since a run may land on either amount.
    if (range && range[1] - range[0] > SPREAD_NOTED_MIB)
      io.out(`  held by malloc after ${runtime}'s load: ${num(range[0])} to ${num(range[1])} MiB in the probe's fresh processes (each process's address layout picks one level, and a run's output folder moves its worker's); the estimate takes the middle, ${num(load.heldMiB ?? 0)} MiB, half the gap either way`);
  }
  // node-ort's second coin: whether its final collection leaves the heap's top free to trim.
  const coin = (args.flags.runtimes as string[]).includes("node-ort") ? nodeDeadOutputKept(terms, run).rangeMiB : null;
  const keptMiB = estimates.find((e) => e?.runtime === "node-ort")?.features.deadOutputKeptMiB ?? 0;
  if (coin && keptMiB > SPREAD_NOTED_MIB / 2)
    io.out(`  node-ort's dead outputs kept after its final collection: where glibc's heap top lies when V8 collects decides it, a coin per run; the estimate takes ${num(keptMiB)} MiB, the middle of none and the pinned requests' ${num(2 * keptMiB)} MiB`);
  if (terms.nativeLoadUnavailable && !terms.compileError) io.out(`  memlane-rt's load: unavailable (${terms.nativeLoadUnavailable}); native leaves its repacked weights out`);
  if (terms.tableWindowsUnavailable) io.out(`  tables read in place: their page-cache windows unmeasured (${terms.tableWindowsUnavailable}); 64 KiB a read taken`);
  const unknownFor = (args.flags.runtimes as string[]).filter((r) => runs(r) && activationsUnknown(terms, r) !== null);
  const refusalSaid = unknownFor.length > 0 || (args.flags.runtimes as string[]).some(isOrtRuntime);
  if (unknownFor.length) io.out(`  activations unknown for ${unknownFor.join(", ")} (memlane's compiler refused the model: ${activationsUnknown(terms, unknownFor[0]!)}); the activation and eval-set terms are left out`);
  else if (terms.compileError && refusalSaid) io.out(`  memlane's compiler refused the model (${terms.compileError}); ONNX Runtime's activations and eval set come from its own shape rules`);
  // Where no line above names the refusal (native alone), this one does.
  for (const r of (args.flags.runtimes as string[]).filter((x) => !runs(x))) io.out(`  ${r}: not estimated: memlane-rt cannot run a model its compiler refuses${refusalSaid ? "" : ` (${terms.compileError})`}`);
  for (const e of estimates) {
    if (!e) continue;
    io.out("");
    const held = e.features.heldMiB > 0 ? `, held by malloc after the load ${num(e.features.heldMiB)} MiB` : "";
    const whole = e.features.largestBatchMiB > 0 ? `, the largest batch beyond one sample +${num(e.features.largestBatchMiB)} MiB` : "";
    const workspace = e.features.nativeWorkspaceMiB > 0 ? `, kernel workspace ${num(e.features.nativeWorkspaceMiB)} MiB` : "";
    const outputs = `outputs${e.runtime === "native" ? " and arena beyond one sample" : ""}`;
    const firstReads = e.features.mappedWeightMiB > 0 ? (e.runtime === "python-ort" ? "reads of weights in place" : `${outputs} and reads of weights in place`) : outputs;
    const firstRequest = e.features.firstRequestMiB > 0 ? `, the first request's ${firstReads} ${num(e.features.firstRequestMiB)} MiB` : "";
    const inMessage = e.features.socketEvalMiB > 0 ? ` (${num(e.features.socketEvalMiB)} of it in the task's message, held from runtime-create)` : "";
    const mapped = e.features.mappedWeightMiB > 0 ? `, weights read in place by the end ${num(e.features.mappedWeightMiB)} MiB` : "";
    const loaded = e.features.loadMiB <= 0 ? ""
      : e.runtime === "native" ? `, ${loadWords(e.runtime).resident} ${num(e.features.loadMiB)} MiB (plan pages given back ${num(e.features.nativeReleasedMiB)} MiB)`
      : `, ${loadWords(e.runtime).resident} ${num(e.features.loadMiB)} MiB`;
    // ORT's arena pages that land in blocks its load left held are in the held term already
    // (ort-heap-reuse.ts): say how much of the replayed arena that was.
    const inHeld = e.features.heldMiB > 0 ? features(e.runtime, withoutHeldPieces(terms, e.runtime), run).activationMiB - e.features.activationMiB : 0;
    const arenaNote = inHeld > 0.05 ? ` (the arena replayed ${num(e.features.activationMiB + inHeld)} MiB, ${num(inHeld)} of it in blocks held after the load)` : "";
    io.out(`${e.runtime} (features: weights ${num(e.features.weightMiB)} MiB, activations ${num(e.features.activationMiB)} MiB${arenaNote}${whole}${workspace}${firstRequest}, eval set ${num(e.features.evalMiB)} MiB in${inMessage} + ${num(e.features.evalOutputMiB)} MiB out${held}${loaded}${mapped}):`);
    io.out(textTable(["phase", "end RSS MiB", "± MiB (probes' rms)", "end USS MiB", "end PSS MiB", "peak RSS MiB"],
      e.phases.map((p) => [p.phase, num(p.rss), num(p.spreadMiB), num(p.uss), num(p.pss), num(p.peak)])));
  }
  io.out("");
  io.out(`naive formula (seeds/003: parameters x 4 B + one batch of inputs x 4 B): ${num(naive)} MiB for any runtime`);
  if (onDevice) printDeviceSection(onDevice, (l) => io.out(l));
  else io.out("device: none (cpu)");
  io.out(`calibrated ${cal.createdAt} on ${cal.key.cpu}, kernel ${cal.key.kernel}`);
  if (cal.sharing) io.out(`  while ${cal.sharing}: its USS and PSS figures are low by the pages they shared; memlane estimate --calibrate on a quiet machine redoes it`);
  return 0;
}
