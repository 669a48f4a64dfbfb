/**
 * The plans a GPU session carries (scripts/gpu-session-prepare.sh):
 *   node --import tsx scripts/gpu-session-plans.ts OUT_DIR INT_FIXTURES_DIR [ZOO_EXPORTS_DIR]
 * OUT_DIR/probe/tiny.mlplan: the device calibration's probe (cuda-device.ts);
 * (OUT_DIR/fixtures is test/fixtures/onnx/make_plans.ts's, run by the prepare script); OUT_DIR/int: the int64
 * fixtures make_int_models.py wrote to INT_FIXTURES_DIR; OUT_DIR/zoo: the cached bench:zoo
 * exports, smallest first, until $GPU_CARRY_MIB (default 48) would be passed (the device tool
 * carries 64 MiB with the tree), sequence dims fixed at 16. What is left out is named.
 */
import { existsSync, mkdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { exportsDir } from "../bench/zoo-exports.ts";
import { compileOnnx } from "../src/compiler/index.ts";
import { PROBES, writeProbes } from "../src/estimate/probe-models.ts";
import { INT_MODEL_SHAPES } from "../test/fixtures/onnx/int-model-shapes.ts";

const [out, intDir, zooArg] = process.argv.slice(2);
if (!out || !intDir) {
  console.error("usage: gpu-session-plans.ts OUT_DIR INT_FIXTURES_DIR [ZOO_EXPORTS_DIR]");
  process.exit(2);
}
for (const d of ["probe", "int", "zoo"]) mkdirSync(join(out, d), { recursive: true });
const limit = Number(process.env.GPU_CARRY_MIB ?? 48) * 2 ** 20;
let used = 0;
async function add(onnx: string, plan: string, inputShapes?: Record<string, number[]>): Promise<void> {
  try {
    await compileOnnx(onnx, plan, { verify: false, ...(inputShapes ? { inputShapes } : {}) });
    used += statSync(plan).size;
  } catch (err) {
    console.error(`skipped ${onnx}: ${(err as Error).message.split("\n")[0]}`);
  }
}

const tiny = writeProbes(join(out, "probe"), PROBES.filter((p) => p.name === "tiny")).get("tiny")!;
await add(tiny, join(out, "probe", "tiny.mlplan"));

for (const [m, s] of Object.entries(INT_MODEL_SHAPES)) await add(join(intDir, `${m}.onnx`), join(out, "int", `${m}.mlplan`), s);

const zoo = zooArg || exportsDir(0);
const index = join(zoo, "index.json");
if (existsSync(index)) {
  type Entry = { name: string; exporter: string; onnx?: string; error?: string; inputs?: { name: string; exported: (number | string)[] }[] };
  const entries = (JSON.parse(readFileSync(index, "utf8")) as Entry[])
    .filter((e) => !e.error && e.onnx && existsSync(e.onnx))
    .sort((a, b) => statSync(a.onnx!).size - statSync(b.onnx!).size);
  for (const e of entries) {
    if (used + statSync(e.onnx!).size > limit) {
      console.error(`left out ${e.name} (${e.exporter}): over the ${limit / 2 ** 20} MiB carry limit`);
      continue;
    }
    const inputShapes = Object.fromEntries((e.inputs ?? []).map((i) => [i.name, i.exported.map((d) => (d === "batch" ? -1 : typeof d === "number" ? d : 16))]));
    await add(e.onnx!, join(out, "zoo", `${e.name}.${e.exporter}.mlplan`), inputShapes);
  }
} else {
  console.error(`no zoo exports in ${zoo}: run npm run bench:zoo once to carry real models`);
}
console.error(`plans: ${(used / 2 ** 20).toFixed(1)} MiB`);
