/**
 * memlane-rt's device memory on CUDA, estimate vs measured (src/estimate/cuda-device.ts):
 *   node --import tsx bench/estimate-device.ts [PLAN_DIR ...]
 * (also run at the end of `npm run bench:estimate`). Calibrates this GPU once (as `memlane
 * estimate --device cuda` does: a tiny probe plan, contexts 1 and 2), then for every plan and setting (default, fp16, 2 contexts,
 * per-request arena without overlap) predicts the device memory after the load from the
 * plan alone, then loads and runs it with memlane_cuda_bench (batches 1, 8, 64) and reads the
 * process's device memory (NVML) after prepare and after the last batch: error %, median,
 * max. Plans: every .mlplan in the folders given, else the fixture models compiled here.
 * Without a GPU it says so and why, and exits 0.
 */
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { compileOnnx } from "../src/compiler/index.ts";
import { calibrateCudaDeviceOnProbe, compareDevice, cudaBenchBinary, deviceBudget, measureDevice, predictDevice } from "../src/estimate/cuda-device.ts";
import { textTable } from "../src/report/format.ts";
import { ensureModels } from "../test/fixtures/onnx/models.ts";
import { median } from "./zoo-table.ts";

const SETTINGS: Record<string, Record<string, string>> = {
  default: {},
  fp16: { fp16: "true" },
  "2 contexts": { contexts: "2" },
  "per-request arena": { arena: "per-request", overlap: "false" },
};
const BATCHES = [1, 8, 64];

export async function benchDeviceEstimate(planDirs: string[] = []): Promise<void> {
  const binary = cudaBenchBinary();
  if (!binary) {
    console.log("device estimate (CUDA): unavailable (memlane-rt was built without nvcc)");
    return;
  }
  const tmp = mkdtempSync(join(tmpdir(), "memlane-bench-device-"));
  try {
    const plans: string[] = [];
    for (const d of planDirs) for (const f of readdirSync(d).sort()) if (f.endsWith(".mlplan")) plans.push(join(d, f));
    if (!plans.length) {
      const { dir, manifest } = ensureModels();
      for (const [name, m] of Object.entries(manifest)) {
        if (!m.compiles) continue;
        await compileOnnx(join(dir, m.onnx), join(tmp, `${name}.mlplan`));
        plans.push(join(tmp, `${name}.mlplan`));
      }
    }
    let cal;
    try {
      cal = await calibrateCudaDeviceOnProbe(binary);
    } catch (err) {
      console.log(`device estimate (CUDA): unavailable (${(err as Error).message})`);
      return;
    }
    const rows: string[][] = [];
    const errs: number[] = [];
    for (const plan of plans) {
      for (const [setting, sw] of Object.entries(SETTINGS)) {
        const predicted = predictDevice(deviceBudget(plan, Math.max(...BATCHES), sw, binary), cal);
        const m = measureDevice(plan, BATCHES, sw, binary);
        const c = m.why ? null : compareDevice(predicted, m.stages);
        const name = plan.split("/").at(-1)!.replace(/\.mlplan$/, "");
        if (!c) {
          rows.push([name, setting, predicted.loadMiB.toFixed(0), "failed", "", "", (m.why ?? "no device reading").slice(0, 80)]);
          process.exitCode = 1;
          continue;
        }
        errs.push(Math.abs(c.loadErrPct), Math.abs(c.endErrPct));
        rows.push([name, setting, c.estimateMiB.toFixed(0), c.loadMiB.toFixed(0), `${c.loadErrPct.toFixed(1)} %`, c.endMiB.toFixed(0), `${c.endErrPct.toFixed(1)} %`]);
      }
    }
    console.log(`device memory (CUDA), memlane-rt, MiB: estimate vs measured (NVML, per process); ${cal.key.gpu}, driver ${cal.key.driver}; ` +
      `calibrated context ${cal.contextMiB.toFixed(0)}, per execution context ${cal.perContextMiB.toFixed(0)}\n`);
    console.log(textTable(["plan", "setting", "estimate", "after load", "err", `after batch ${BATCHES.at(-1)}`, "err"], rows));
    if (errs.length) console.log(`\n|err| median ${median(errs).toFixed(2)} %, max ${Math.max(...errs).toFixed(2)} % over ${rows.length} runs`);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

if (process.argv[1]?.endsWith("estimate-device.ts")) {
  const dirs = process.argv.slice(2);
  const missing = dirs.filter((d) => !existsSync(d));
  if (missing.length) {
    console.error(`bench/estimate-device.ts: no such plan folder: ${missing.join(", ")}`);
    process.exit(2);
  }
  await benchDeviceEstimate(dirs);
}
