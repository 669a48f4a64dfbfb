/**
 * `memlane compare <model.onnx>`: the model as is, on several runtimes, each in a fresh
 * process (node-ort's a child Node process), every graph input fed in its own
 * dtype and shape (generated, or `--inputs FILE`); ONNX Runtime is the numerical reference,
 * every output compared. Runtimes are independent: one that fails (or that memlane-rt cannot
 * compile) gets its row with the error and the others still run. Exit 0 when at least one
 * runtime ran, 1 when none did.
 */
import { existsSync } from "node:fs";
import path from "node:path";
import { type CommandSpec, parseModelCommand, UsageError } from "../args.ts";
import type { Io } from "../io.ts";
import { pipeline } from "../../pipeline/builder.ts";
import type { Runtime } from "../../pipeline/stages.ts";
import { printOutcome } from "../outcome.ts";
import { DEFAULT_SEQ, InputSpecError, parseShapeFlag, type ShapeOverrides } from "../../pipeline/inputs/shapes.ts";

const RUNTIMES = ["python-ort", "node-ort", "native"] as const;

export const spec: CommandSpec = {
  name: "compare",
  summary: "Compare runtimes on one ONNX model: host RAM per phase, latency, throughput and numerics.",
  positionals: [{ name: "model.onnx", description: "an ONNX model file (batch dimension symbolic or 1)" }],
  flags: {
    runtimes: { type: "list", choices: RUNTIMES, placeholder: "LIST", description: "runtimes to compare", default: [...RUNTIMES] },
    batch: { type: "intList", placeholder: "LIST", description: "batch sizes", default: [1, 64] },
    threads: { type: "int", placeholder: "N", description: "intra-op threads of every runtime", default: 1 },
    iterations: { type: "int", placeholder: "N", description: "timed calls per batch size", default: 50 },
    shape: { type: "string", placeholder: "SHAPES", description: "shapes of inputs with symbolic dims, name=1x128,name2=... (N or any number at the batch axis)" },
    seq: { type: "int", placeholder: "N", description: "the value of every other symbolic dim, e.g. the sequence length", default: DEFAULT_SEQ },
    inputs: { type: "string", placeholder: "FILE", description: "feed these arrays (.npz or .safetensors, one per input, named as it) instead of generated ones" },
    "eval-samples": { type: "int", placeholder: "N", description: "generated eval samples every runtime runs and returns outputs for", default: 256 },
    "max-message-mib": { type: "int", placeholder: "N", description: "the largest message between memlane and a runtime's worker (default: 256, or what the eval set's inputs or outputs need)" },
    profile: { type: "boolean", description: "per-op time of every runtime in the report, taken in calls of its own after the timed ones (at the first batch size)" },
    out: { type: "string", short: "o", placeholder: "DIR", description: "directory for run directories", default: "runs" },
    quiet: { type: "boolean", short: "q", description: "no progress output" },
  },
};

export async function execute(argv: readonly string[], io: Io): Promise<number> {
  const parsed = parseModelCommand(spec, argv, io);
  if (parsed === null) return 0;
  const { args, model } = parsed;
  const runtimes = args.flags.runtimes as Runtime[];
  const seq = args.flags.seq as number;
  const inputsFile = args.flags.inputs as string | undefined;
  if (inputsFile !== undefined && !existsSync(inputsFile)) throw UsageError.bad("--inputs", "an existing .npz or .safetensors file", inputsFile);
  let shapes: ShapeOverrides | undefined;
  try {
    if (args.flags.shape !== undefined) shapes = parseShapeFlag(args.flags.shape as string);
    // Checked here, before any worker starts: a bad --shape or --inputs is a usage error naming the input.
    const { prepareEvalSet } = await import("../../pipeline/inputs/eval-set.ts");
    prepareEvalSet(model, { ...(shapes ? { shapes } : {}), seq, ...(inputsFile !== undefined ? { inputsFile } : {}), nEval: 1 });
  } catch (err) {
    if (err instanceof InputSpecError) throw new UsageError(err.message, err.option);
    throw err;
  }
  // The eval set's outputs come back in one message: by default the run sizes each benchmark's
  // limit by them (LM logits over 256 samples pass 256 MiB); --max-message-mib fixes it.
  const limitMiB = args.flags["max-message-mib"] as number | undefined;
  if (limitMiB !== undefined && !(limitMiB >= 1)) throw UsageError.bad("--max-message-mib", "a size of at least 1 MiB", String(limitMiB));
  const evalSamples = args.flags["eval-samples"] as number;
  const name = `compare-${path.basename(model).replace(/\.onnx$/i, "").replace(/[^\w.-]/g, "-") || "model"}`;
  let p = pipeline(name, {
    batchSizes: args.flags.batch as number[],
    threads: args.flags.threads as number,
    iterations: args.flags.iterations as number,
    concurrency: 1,
    ...(limitMiB !== undefined ? { maxMessageBytes: Math.round(limitMiB * 2 ** 20) } : {}),
  }).export({ name: "model", onnx: model, seq, evalSamples, ...(shapes ? { shapes } : {}), ...(inputsFile !== undefined ? { inputs: path.resolve(inputsFile) } : {}) });
  for (const r of runtimes) p = p.benchmark(r, { optional: true, ...(args.flags.profile === true ? { profile: true } : {}) });
  const { runPipeline } = await import("../../pipeline/run.ts");
  const outcome = await runPipeline(p, { outDir: args.flags.out as string, io, quiet: args.flags.quiet === true });
  const code = printOutcome(outcome, io); // 1 when a declared budget was exceeded
  if (outcome.report.runtimes.length > 0) return code;
  io.err(`memlane compare: no runtime ran (${runtimes.join(", ")}: see the reasons above)`);
  return 1;
}
