/**
 * `memlane compile <model.onnx> [-o plan.mlplan] [--shape S | --profile S ... | --seq N,N...]`:
 * ONNX → memlane-rt plan, arena vs lower bound; several shape profiles in one plan on demand.
 */
import path from "node:path";
import { type CommandSpec, UsageError, parseModelCommand } from "../args.ts";
import type { Io } from "../io.ts";
import type { ProfileSummary } from "../../compiler/compile.ts";
import { InputSpecError, parseShapeFlag } from "../../pipeline/inputs/shapes.ts";

export const spec: CommandSpec = {
  name: "compile",
  summary:
    "Compile an ONNX model into a memlane-rt plan (.mlplan) and print its arena against the lower bound. " +
    "Several --profile (or --seq values) put one shape profile each into the plan, sharing its weights.",
  positionals: [{ name: "model.onnx", description: "an ONNX model file" }],
  flags: {
    out: { type: "string", short: "o", placeholder: "PLAN", description: "plan file to write (default: the model's path with .mlplan)" },
    shape: { type: "string", placeholder: "SHAPES", description: "shapes of inputs with symbolic dims, name=Nx128,name2=... (N or any number at the batch axis)" },
    profile: { type: "string", repeat: true, placeholder: "SHAPES", description: "one shape profile, in --shape's form; give it once per profile (e.g. --profile ids=Nx16 --profile ids=Nx128)" },
    seq: { type: "intList", placeholder: "N[,N...]", description: "the value of every other symbolic dim (the sequence length); several values: one profile each" },
  },
};

const kib = (b: number): string => (b < 10 * 1024 ? `${b} B` : `${(b / 1024).toFixed(1)} KiB`);
const dims = (shape: number[]): string => `[${shape.map((d) => (d < 0 ? "N" : d)).join(", ")}]`;

async function requestedProfiles(model: string, flags: Record<string, unknown>): Promise<Record<string, number[]>[]> {
  const raw = flags.profile as string[] | undefined;
  if (flags.shape === undefined && raw === undefined && flags.seq === undefined) return [];
  const { readOnnxIo } = await import("../../pipeline/inputs/onnx-io.ts");
  const { profileShapes } = await import("../../pipeline/inputs/profiles.ts");
  try {
    return profileShapes(readOnnxIo(model), {
      ...(flags.shape !== undefined ? { shapes: parseShapeFlag(flags.shape as string) } : {}),
      ...(raw ? { profiles: raw.map((p, i) => parseShapeFlag(p, `--profile #${i + 1}`)) } : {}),
      ...(flags.seq !== undefined ? { seqs: flags.seq as number[] } : {}),
    });
  } catch (e) {
    if (e instanceof InputSpecError) throw new UsageError(e.message, e.option);
    throw e;
  }
}

export async function execute(argv: readonly string[], io: Io): Promise<number> {
  const parsed = parseModelCommand(spec, argv, io);
  if (parsed === null) return 0;
  const { args, model } = parsed;
  const out = (args.flags.out as string | undefined) ?? model.replace(/\.onnx$/i, "") + ".mlplan";
  const profiles = await requestedProfiles(model, args.flags);
  const { compileOnnx } = await import("../../compiler/compile.ts");
  const opts = profiles.length > 1 ? { profiles } : profiles.length === 1 ? { inputShapes: profiles[0]! } : undefined;
  const c = await compileOnnx(path.resolve(model), path.resolve(out), opts).catch((e: unknown) => {
    // The compiler speaks of its API's options.inputShapes; on the command line that is --shape or --seq.
    if (opts === undefined && e instanceof Error && (e as { kind?: string }).kind === "shape")
      e.message += ` (on the command line: --shape NAME=NxDIM... or --seq N; several profiles: --profile or --seq N,N)`;
    throw e;
  });
  // Concat inputs the plan lays in their output's slices (docs/plan-format.md, "Concat in place").
  const concat = (p: ProfileSummary, indent: string) => {
    if (p.concatInputsInPlace > 0) io.out(`${indent}concat: ${p.concatInputsInPlace} of ${p.concatInputs} Concat inputs written in place (the plan runs one sample at a time)`);
  };
  io.out(`plan: ${out} (${c.planBytes} bytes, ${c.ops} ops: ${Object.entries(c.opCounts).map(([k, v]) => `${k}×${v}`).join(", ")})`);
  io.out(`weights: ${kib(c.weightsBytes)}${c.profiles.length > 1 ? `, stored once for ${c.profiles.length} profiles` : ""}`);
  if (c.profiles.length === 1) {
    io.out(`inputs: ${c.inputs.map((i) => `${i.name} ${dims(i.shape)}`).join(", ")}`);
    io.out(`outputs: ${c.outputs.map((i) => `${i.name} ${dims(i.shape)}`).join(", ")}`);
    io.out(
      `arena: ${kib(c.arenaBytesPerSample)}/sample vs lower bound ${kib(c.lowerBoundPerSample)}/sample ` +
        `(${c.ratio.toFixed(3)}×; batch 64 → ${kib(c.arenaBytesPerSample * 64)})`,
    );
    concat(c.profiles[0]!, "");
  } else {
    c.profiles.forEach((p, i) => {
      io.out(`profile ${i}: ${p.inputs.map((x) => `${x.name} ${dims(x.shape)}`).join(", ")} → ${p.outputs.map((x) => `${x.name} ${dims(x.shape)}`).join(", ")}`);
      io.out(`  ${p.ops} ops, arena ${kib(p.arenaBytesPerSample)}/sample vs lower bound ${kib(p.lowerBoundPerSample)}/sample`);
      concat(p, "  ");
    });
  }
  for (const w of c.warnings) io.err(`warning: ${w}`);
  return 0;
}
