/**
 * Standalone compiler entry, for people and scripts without the full CLI:
 *   node --import tsx src/compiler/cli.ts model.onnx out.mlplan
 *   node --import tsx src/compiler/cli.ts inspect out.mlplan
 */
import { compileOnnx } from "./compile.ts";
import { CompileError, PlanError } from "./errors.ts";
import { formatPlan } from "./inspect.ts";
import { readPlan } from "./read.ts";

async function main(argv: string[]): Promise<number> {
  if (argv[0] === "inspect" && argv.length === 2) {
    console.log(formatPlan(readPlan(argv[1]!)));
    return 0;
  }
  if (argv.length !== 2) {
    console.error("usage: cli.ts <model.onnx> <out.mlplan> | cli.ts inspect <plan.mlplan>");
    return 2;
  }
  const s = await compileOnnx(argv[0]!, argv[1]!);
  for (const w of s.warnings) console.error(`warning: ${w}`);
  console.log(
    `${s.planPath}: ${s.ops} ops, weights ${s.weightsBytes} B, arena ${s.arenaBytesPerSample} B/sample ` +
      `(lower bound ${s.lowerBoundPerSample}, ratio ${s.ratio.toFixed(3)})`,
  );
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (e: unknown) => {
    console.error(e instanceof CompileError || e instanceof PlanError ? e.message : e);
    process.exit(1);
  },
);
