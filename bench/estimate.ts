/**
 * The memory estimate against measurement: for each zoo model, `memlane estimate`'s figures
 * (from the ONNX graph and this machine's calibration) beside `memlane compare`'s measured
 * ones, runtime by runtime and phase by phase, with the error in %, its median and max, and
 * the naive formula of seeds/003 beside it. Models the probes never saw are the point: the
 * calibration fits only the probes (src/estimate/probe-models.ts).
 *
 * Then the pipelines (digits: train digits-cnn + export + every deploy runtime; tiny-gpt: a
 * short training + every runtime), each run by `memlane run` in its own process: their
 * reports carry the estimate beside the measurement (train peak, python-torch and the ONNX
 * runtimes), which this reads back. Last, memlane-rt's device memory on CUDA, estimate vs
 * measured (bench/estimate-device.ts; without a GPU it says so and why).
 *
 *   npm run bench:estimate     (env: BENCH_MODELS=digits-cnn,mlp,resnet-mini,resnet18 (zoo
 *                               archs, or paths of .onnx files: the transformer zoo's exports),
 *                               BENCH_BATCH=1,8, BENCH_ITERATIONS=50 (compare's default), BENCH_EVAL=256,
 *                               BENCH_CALIBRATE=1 to redo it,
 *                               BENCH_PIPELINES=digits,tiny-gpt ("" for none), BENCH_EPOCHS=2)
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { writeFileSync } from "node:fs";
import { type Calibration, calibrate, compareInFreshProcess } from "../src/estimate/calibration.ts";
import { runPipelineInFreshProcess, torchCalibration } from "../src/estimate/torch-calibration.ts";
import { calibrationKey, calibrationMismatch, loadCalibration, saveCalibration } from "../src/estimate/cache.ts";
import { features, loadProbesFor, modelTerms, requestsPerBatch } from "../src/estimate/model-terms.ts";
import { compareWithMeasured, estimateRuntime, naiveMiB } from "../src/estimate/predict.ts";
import { PIPELINE_DEFAULTS } from "../src/pipeline/options.ts";
import { textTable } from "../src/report/format.ts";
import { Supervisor } from "../src/workers/index.ts";
import { workerSpecs } from "../src/workers/specs.ts";
import { benchDeviceEstimate } from "./estimate-device.ts";

const MODELS = (process.env.BENCH_MODELS ?? "digits-cnn,mlp,resnet-mini,resnet18").split(",");
const BATCHES = (process.env.BENCH_BATCH ?? "1,8").split(",").map(Number);
const EVAL = Number(process.env.BENCH_EVAL ?? 256);
const ITERATIONS = Number(process.env.BENCH_ITERATIONS ?? PIPELINE_DEFAULTS.iterations);
const PIPELINES = (process.env.BENCH_PIPELINES ?? "digits,tiny-gpt").split(",").filter(Boolean);
const EPOCHS = Number(process.env.BENCH_EPOCHS ?? 2);
/** The pipelines as the examples define them (pipelines/*.ts), shorter: fewer epochs and iterations, no side stages. */
const PIPELINE_SOURCES: Record<string, string> = {
  digits: `pipeline("digits", { batchSizes: [1, 64], iterations: 10, warmup: 2, threads: 1 })
  .train({ arch: "digits-cnn", epochs: ${EPOCHS}, seed: 0 })`,
  "tiny-gpt": `pipeline("tiny-gpt", { batchSizes: [1, 64], iterations: 5, warmup: 1, threads: 1 })
  .train({ arch: "tiny-gpt", epochs: 1, stepsPerEpoch: ${EPOCHS * 5}, batchSize: 32, seed: 0, threads: 2 })`,
};
const log = (l: string) => process.stderr.write(`${l}\n`);
const pct = (x: number) => `${x > 0 ? "+" : ""}${x.toFixed(1)} %`;
const absPct = (x: number) => `${x.toFixed(1)} %`;
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? (s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2) : NaN;
};

// What was asked is checked before the minutes of calibration: unknown pipelines and missing
// files here, zoo names by exporting them first (the exporter knows the zoo).
for (const name of PIPELINES)
  if (!PIPELINE_SOURCES[name]) throw new Error(`BENCH_PIPELINES: unknown pipeline ${JSON.stringify(name)} (known: ${Object.keys(PIPELINE_SOURCES).join(", ")})`);
for (const m of MODELS)
  if (m.endsWith(".onnx") && !existsSync(m)) throw new Error(`BENCH_MODELS: ${m}: no such file`);
const dir = mkdtempSync(join(tmpdir(), "memlane-bench-estimate-"));
let cal: Calibration | null = null;
const trainRows: string[][] = [];
const rows: string[][] = [];
const errors: Record<string, { steady: number[]; peak: number[]; all: number[]; worst?: { at: string; errorPct: number } }> = {};
/** Every phase's RSS error, and which model and phase had the largest (printed under the summary). */
const notePhase = (e: (typeof errors)[string], at: string, errorPct: number) => {
  e.all.push(errorPct);
  if (!e.worst || Math.abs(errorPct) > Math.abs(e.worst.errorPct)) e.worst = { at, errorPct };
};
const naiveErrors: number[] = [];
const notMeasured: string[] = [];
try {
  const sup = await Supervisor.start();
  const exporter = await sup.spawn(workerSpecs.python({ name: "exporter" }));
  const files = new Map<string, string>();
  try {
    for (const arch of MODELS) {
      if (arch.endsWith(".onnx")) {
        files.set(arch, arch);
        continue;
      }
      const onnx = join(dir, `${arch}.onnx`);
      try {
        await exporter.run("zoo.export", { arch, out: onnx, seed: 0 }, { timeoutMs: 300_000 });
      } catch (e) {
        const why = String((e as Error).message ?? e).split("\n")[0];
        throw new Error(`BENCH_MODELS: ${JSON.stringify(arch)} is not a .onnx file and the zoo could not export it: ${why}`);
      }
      files.set(arch, onnx);
    }
  } finally {
    await exporter.stop();
    await sup.close();
  }
  const key = calibrationKey();
  cal = process.env.BENCH_CALIBRATE ? null : loadCalibration(key);
  if (!cal) {
    const why = process.env.BENCH_CALIBRATE ? "BENCH_CALIBRATE set" : (calibrationMismatch(key) ?? "none cached for these library versions");
    log(`bench:estimate: calibrating this machine (${why}; about a minute)`);
    cal = await calibrate(key, { err: log });
    saveCalibration(cal);
  }
  await torchCalibration(log, !!process.env.BENCH_CALIBRATE);
  for (const arch of MODELS) {
    const onnx = files.get(arch)!;
    const started = Date.now();
    let report: Awaited<ReturnType<typeof compareInFreshProcess>>;
    try {
      report = await compareInFreshProcess(onnx, EVAL, join(dir, `runs-${basename(arch)}`), { batchSizes: BATCHES, iterations: ITERATIONS, threads: 1 });
    } catch (e) {
      // One model no runtime can run (an export that fixes a shape compare's feed changes)
      // should not cost the others' figures: it is listed under the tables and fails the bench.
      const why = String((e as Error).message ?? e).split("\n").filter((l) => / failed/.test(l)).slice(1, 4).join(" | ") || String(e);
      notMeasured.push(`${basename(arch)}: ${why.slice(0, 400)}`);
      log(`bench:estimate: ${arch} not measured: ${why.slice(0, 400)}`);
      continue;
    }
    const terms = await modelTerms(onnx, {}, loadProbesFor(report.runtimes.map((r) => r.name)));
    const run = { maxBatch: Math.max(...BATCHES), batchSizes: BATCHES, evalSamples: EVAL, calls: requestsPerBatch({ iterations: ITERATIONS, warmup: PIPELINE_DEFAULTS.warmup }) };
    const naive = naiveMiB(terms, run);
    for (const r of report.runtimes) {
      const e = estimateRuntime(cal, r.name, features(r.name, terms, run));
      if (!e) continue;
      const checks = compareWithMeasured(e, r);
      const errs = (errors[r.name] ??= { steady: [], peak: [], all: [] });
      for (const c of checks) notePhase(errs, `${basename(arch)} ${c.phase}`, c.rss.errorPct);
      const last = checks.at(-1)!;
      const peakEst = Math.max(...checks.map((c) => c.peak.estimateMiB));
      const peakMeas = Math.max(...checks.map((c) => c.peak.measuredMiB));
      const peakErr = ((peakEst - peakMeas) / peakMeas) * 100;
      errs.steady.push(last.rss.errorPct);
      errs.peak.push(peakErr);
      const naiveErr = ((naive - last.rss.measuredMiB) / last.rss.measuredMiB) * 100;
      naiveErrors.push(naiveErr);
      rows.push([basename(arch), r.name, last.rss.estimateMiB.toFixed(1), last.rss.measuredMiB.toFixed(1), pct(last.rss.errorPct),
        peakEst.toFixed(1), peakMeas.toFixed(1), pct(peakErr), last.uss.estimateMiB.toFixed(1), last.uss.measuredMiB.toFixed(1), pct(last.uss.errorPct), naive.toFixed(1), pct(naiveErr)]);
    }
    log(`bench:estimate: ${arch} measured in ${((Date.now() - started) / 1000).toFixed(0)} s`);
  }
  for (const name of PIPELINES) {
    const src = PIPELINE_SOURCES[name]!;
    const started = Date.now();
    const file = join(dir, `${name}.ts`);
    writeFileSync(file, `import { pipeline } from "memlane";\nexport default ${src}\n  .export().benchmark("python-torch").benchmark("python-ort").benchmark("node-ort").benchmark("native");\n`);
    const report = await runPipelineInFreshProcess(file, join(dir, `runs-${name}`));
    const est = report.estimates;
    if (!est || est.status !== "ok") throw new Error(`the ${name} pipeline's report has no estimates: ${est?.reason ?? "absent"}`);
    const t = est.training;
    if (t) {
      (errors["train (python-torch)"] ??= { steady: [], peak: [], all: [] }).peak.push(t.errorPct);
      trainRows.push([name, t.arch, t.estimateMiB.toFixed(1), t.measuredMiB.toFixed(1), pct(t.errorPct), t.naiveMiB.toFixed(1), pct(t.naiveErrorPct), t.parts]);
    } else log(`bench:estimate: ${name}: no training estimate (${est.trainingReason})`);
    for (const r of est.runtimes) {
      const errs = (errors[r.runtime] ??= { steady: [], peak: [], all: [] });
      for (const c of r.phases) notePhase(errs, `${name} (pipeline) ${c.phase}`, c.rss.errorPct);
      const last = r.phases.at(-1)!;
      const peakEst = Math.max(...r.phases.map((c) => c.peak.estimateMiB));
      const peakMeas = Math.max(...r.phases.map((c) => c.peak.measuredMiB));
      const peakErr = ((peakEst - peakMeas) / peakMeas) * 100;
      errs.steady.push(last.rss.errorPct);
      errs.peak.push(peakErr);
      const naive = est.naiveMiB ?? 0;
      const naiveErr = ((naive - last.rss.measuredMiB) / last.rss.measuredMiB) * 100;
      naiveErrors.push(naiveErr);
      rows.push([`${name} (pipeline)`, r.runtime, last.rss.estimateMiB.toFixed(1), last.rss.measuredMiB.toFixed(1), pct(last.rss.errorPct),
        peakEst.toFixed(1), peakMeas.toFixed(1), pct(peakErr), last.uss.estimateMiB.toFixed(1), last.uss.measuredMiB.toFixed(1), pct(last.uss.errorPct), naive.toFixed(1), pct(naiveErr)]);
    }
    log(`bench:estimate: pipeline ${name} run in ${((Date.now() - started) / 1000).toFixed(0)} s`);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
console.log(`memlane estimate vs measured (compare, batch ${BATCHES.join(",")}, ${EVAL} eval samples, 1 thread; calibrated ${cal.createdAt})\n`);
console.log(textTable(["model", "runtime", "est. RSS", "RSS", "err", "est. peak", "peak", "err", "est. USS", "USS", "err", "naive", "naive err"], rows));
console.log("");
if (trainRows.length) {
  console.log("train stage peak RSS (python-torch):\n");
  console.log(textTable(["pipeline", "arch", "est. peak", "peak", "err", "naive", "naive err", "parts"], trainRows));
  console.log("");
}
const abs = (xs: number[]) => xs.map(Math.abs);
const medMax = (xs: number[]) => (xs.length ? [absPct(median(abs(xs))), absPct(Math.max(...abs(xs)))] : ["—", "—"]);
console.log(textTable(["runtime", "steady RSS |err| median", "max", "peak RSS |err| median", "max", "every phase's RSS |err| median", "max"],
  Object.entries(errors).map(([rt, e]) => [rt, ...medMax(e.steady), ...medMax(e.peak), ...medMax(e.all)])));
console.log(`\nthe largest phase error, runtime by runtime: ${Object.entries(errors).filter(([, e]) => e.worst).map(([rt, e]) => `${rt} ${e.worst!.at} ${pct(e.worst!.errorPct)}`).join("; ")}`);
console.log(`\nnaive formula, steady RSS |err|: median ${absPct(median(abs(naiveErrors)))}, max ${absPct(Math.max(...abs(naiveErrors)))}`);
if (notMeasured.length) {
  console.log(`\nnot measured (compare failed; not in the figures above):\n${notMeasured.map((l) => `  ${l}`).join("\n")}`);
  process.exitCode = 1;
}
// memlane-rt's device memory on CUDA (unavailable, with the reason, without a GPU).
console.log("");
await benchDeviceEstimate();

