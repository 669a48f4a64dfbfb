/**
 * Reads back what scripts/gpu-session-run.sh measured on a GPU (no Node there) and prints
 * memlane-rt's device-memory estimate against it with the shipped code (src/estimate/
 * cuda-device.ts): the calibration from the probe's two loads, then per plan and setting the
 * estimate (from the --budget line the run printed), the reading after prepare and after the
 * last batch, the error in %, its median and max.
 *   node --import tsx scripts/gpu-session-report.ts DIR     (DIR holds device.log)
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { median } from "../bench/zoo-table.ts";
import { calibrationFromProbes, compareDevice, type DeviceBudget, predictDevice, type ProbeReading, readStages } from "../src/estimate/cuda-device.ts";
import { textTable } from "../src/report/format.ts";

const dir = process.argv[2];
if (!dir) {
  console.error("usage: gpu-session-report.ts DIR (the folder holding device.log)");
  process.exit(2);
}
const sections = readFileSync(join(dir, "device.log"), "utf8").split(/^=== /m).filter((x) => x.trim());
const budgetOf = (text: string): DeviceBudget | undefined => {
  const line = text.split("\n").find((l) => l.startsWith('{"maxBatch"'));
  return line ? (JSON.parse(line) as DeviceBudget) : undefined;
};
const probes: ProbeReading[] = [];
for (const s of sections.filter((x) => x.startsWith("probe"))) {
  const contexts = Number(/contexts=(\d+)/.exec(s)?.[1]);
  const budget = budgetOf(s);
  if (budget) probes.push({ contexts, budget, stages: readStages(s) });
}
let cal: ReturnType<typeof calibrationFromProbes>;
try {
  cal = calibrationFromProbes(probes, "from a GPU session's log", "");
} catch (err) {
  console.error(`no device calibration in ${join(dir, "device.log")}: ${(err as Error).message}`);
  process.exit(1);
}
const rows: string[][] = [];
const errs: number[] = [];
for (const s of sections.filter((x) => x.startsWith("plan"))) {
  const [, plan, setting] = /^plan (\S+) \| (.*)$/m.exec(s) ?? [];
  const name = (plan ?? "?").split("/").at(-1)!.replace(/\.mlplan$/, "");
  const budget = budgetOf(s);
  const c = budget ? compareDevice(predictDevice(budget, cal), readStages(s)) : null;
  if (!c) {
    rows.push([name, setting ?? "?", "—", "failed", "", "", ""]);
    continue;
  }
  errs.push(Math.abs(c.loadErrPct), Math.abs(c.endErrPct));
  rows.push([name, setting!, c.estimateMiB.toFixed(0), c.loadMiB.toFixed(0), `${c.loadErrPct.toFixed(2)} %`, c.endMiB.toFixed(0), `${c.endErrPct.toFixed(2)} %`]);
}
console.log(`device memory (MiB), memlane-rt: estimate vs measured; ${cal.key.gpu}, calibrated context ${cal.contextMiB.toFixed(0)}, per context ${cal.perContextMiB.toFixed(0)}\n`);
console.log(textTable(["plan", "setting", "estimate", "after load", "err", "after last batch", "err"], rows));
if (errs.length) console.log(`\n|err| median ${median(errs).toFixed(2)} %, max ${Math.max(...errs).toFixed(2)} %`);
