/**
 * `memlane compare <model.onnx>`: the model as is, on several runtimes, each in a fresh
 * process (node-ort on the orchestrator's worker_thread), inputs generated from the model's
 * input shape; ONNX Runtime is the numerical reference. A model with an op memlane-rt lacks
 * still gets its ORT rows: native is reported unavailable with the compiler's message.
 */
import path from "node:path";
import { type CommandSpec, parseModelCommand } from "../args.ts";
import type { Io } from "../io.ts";
import { pipeline } from "../../pipeline/builder.ts";
import type { Runtime } from "../../pipeline/stages.ts";
import { printOutcome } from "../outcome.ts";

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
    out: { type: "string", short: "o", placeholder: "DIR", description: "directory for run directories", default: "runs" },
    quiet: { type: "boolean", short: "q", description: "no progress output" },
  },
};

export async function execute(argv: readonly string[], io: Io): Promise<number> {
  const parsed = parseModelCommand(spec, argv, io);
  if (parsed === null) return 0;
  const { args, model } = parsed;
  const runtimes = args.flags.runtimes as Runtime[];
  const name = `compare-${path.basename(model).replace(/\.onnx$/i, "").replace(/[^\w.-]/g, "-") || "model"}`;
  let p = pipeline(name, {
    batchSizes: args.flags.batch as number[],
    threads: args.flags.threads as number,
    iterations: args.flags.iterations as number,
    concurrency: 1,
  }).export({ name: "model", onnx: model });
  for (const r of runtimes) p = p.benchmark(r);
  const { runPipeline } = await import("../../pipeline/run.ts");
  const outcome = await runPipeline(p, { outDir: args.flags.out as string, io, quiet: args.flags.quiet === true });
  return printOutcome(outcome, io);
}
