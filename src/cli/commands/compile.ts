/** `memlane compile <model.onnx> [-o plan.mlplan]`: ONNX → memlane-rt plan, arena vs lower bound. */
import path from "node:path";
import { type CommandSpec, parseModelCommand } from "../args.ts";
import type { Io } from "../io.ts";

export const spec: CommandSpec = {
  name: "compile",
  summary: "Compile an ONNX model into a memlane-rt plan (.mlplan) and print its arena against the lower bound.",
  positionals: [{ name: "model.onnx", description: "an ONNX model file" }],
  flags: {
    out: { type: "string", short: "o", placeholder: "PLAN", description: "plan file to write (default: the model's path with .mlplan)" },
  },
};

const kib = (b: number): string => (b < 10 * 1024 ? `${b} B` : `${(b / 1024).toFixed(1)} KiB`);

export async function execute(argv: readonly string[], io: Io): Promise<number> {
  const parsed = parseModelCommand(spec, argv, io);
  if (parsed === null) return 0;
  const { args, model } = parsed;
  const out = (args.flags.out as string | undefined) ?? model.replace(/\.onnx$/i, "") + ".mlplan";
  const { compileOnnx } = await import("../../compiler/compile.ts");
  const c = await compileOnnx(path.resolve(model), path.resolve(out));
  io.out(`plan: ${out} (${c.planBytes} bytes, ${c.ops} ops: ${Object.entries(c.opCounts).map(([k, v]) => `${k}×${v}`).join(", ")})`);
  io.out(`weights: ${kib(c.weightsBytes)}`);
  io.out(`inputs: ${c.inputs.map((i) => `${i.name} [${i.shape.map((d) => (d < 0 ? "N" : d)).join(", ")}]`).join(", ")}`);
  io.out(`outputs: ${c.outputs.map((i) => `${i.name} [${i.shape.map((d) => (d < 0 ? "N" : d)).join(", ")}]`).join(", ")}`);
  io.out(
    `arena: ${kib(c.arenaBytesPerSample)}/sample vs lower bound ${kib(c.lowerBoundPerSample)}/sample ` +
      `(${c.ratio.toFixed(3)}×; batch 64 → ${kib(c.arenaBytesPerSample * 64)})`,
  );
  for (const w of c.warnings) io.err(`warning: ${w}`);
  return 0;
}
