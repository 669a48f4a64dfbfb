/**
 * memlane-rt against ONNX Runtime (CPU, Python worker) on the same plan's source model,
 * side by side in one run: latency ratios at batch 1 and 64 with the same thread count,
 * steady-inference USS of each process, and the plan's arena against its lower bound.
 *
 *   npm run bench:native            (env: BENCH_THREADS=1, BENCH_ITERS=50, BENCH_MODELS=a,b)
 *
 * Each runtime runs in a fresh process per model so that one's memory never shows up in
 * another's USS. Without a memlane-rt build the native columns are skipped, loudly.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { compileOnnx } from "../src/compiler/index.ts";
import type { CompileSummary } from "../src/compiler/index.ts";
import { Phase, type PhaseMark } from "../src/transport/protocol.ts";
import { Supervisor } from "../src/workers/index.ts";
import type { TaskResult } from "../src/workers/index.ts";
import { memlaneRtBinary, workerSpecs } from "../src/workers/specs.ts";
import { benchInputs, type BenchInputs } from "./inputs.ts";

const MODELS = (process.env.BENCH_MODELS ?? "digits-cnn,mlp,resnet-mini").split(",");
const BATCHES = [1, 64];
const THREADS = Number(process.env.BENCH_THREADS ?? 1);
const ITERS = Number(process.env.BENCH_ITERS ?? 50);
const WARMUP = 5;

interface Measured {
  p50: Record<number, number>;
  steadyUssKiB: number | undefined;
  outputs: Float32Array | undefined;
}

function measured(r: TaskResult): Measured {
  const lat = r.value.latencyMs as Record<string, { p50: number }>;
  const p50: Record<number, number> = {};
  for (const b of BATCHES) p50[b] = lat[`batch${b}`]!.p50;
  const end = r.phases.find((m: PhaseMark) => m.name === Phase.STEADY_INFERENCE && m.mark === "end");
  const out = r.tensors.outputs;
  return { p50, steadyUssKiB: end?.memory.ussKiB, outputs: out?.data instanceof Float32Array ? out.data : undefined };
}

/** Largest |a - b| over the eval set's outputs (the two runtimes saw the same inputs). */
function maxAbsDiff(a: Float32Array | undefined, b: Float32Array | undefined): number | undefined {
  if (!a || !b || a.length !== b.length) return undefined;
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}

/** The eval set: the largest batch's rows (the timed batches are its first N rows). */
const inputsFor = (shape: number[]): BenchInputs => benchInputs(Math.max(...BATCHES), shape.slice(1));

async function runOnce(sup: Supervisor, spec: Parameters<Supervisor["spawn"]>[0], task: string, args: Record<string, unknown>, tensors: Record<string, BenchInputs>): Promise<TaskResult> {
  const w = await sup.spawn(spec);
  try {
    return await w.run(task, args, { tensors, timeoutMs: 600_000 });
  } finally {
    await w.stop();
  }
}

const fmt = (x: number | undefined, d = 3) => (x === undefined || !Number.isFinite(x) ? "—" : x.toFixed(d));
const mib = (k: number | undefined) => (k === undefined ? "—" : (k / 1024).toFixed(1));

async function main(): Promise<void> {
  let rtMissing: string | undefined;
  try {
    memlaneRtBinary();
  } catch (e) {
    rtMissing = (e as Error).message;
  }
  const dir = mkdtempSync(join(tmpdir(), "memlane-bench-native-"));
  const sup = await Supervisor.start();
  const rows: string[] = [];
  const arenaRows: string[] = [];
  try {
    // Export with the Python worker's zoo (the same models the pipelines use), then compile.
    const plans = new Map<string, { onnx: string; plan: string; s: CompileSummary }>();
    const exporter = await sup.spawn(workerSpecs.python({ name: "exporter" }));
    try {
      for (const arch of MODELS) {
        const onnx = join(dir, `${arch}.onnx`);
        await exporter.run("zoo.export", { arch, out: onnx, seed: 0 }, { timeoutMs: 300_000 });
        const plan = join(dir, `${arch}.mlplan`);
        plans.set(arch, { onnx, plan, s: await compileOnnx(onnx, plan) });
      }
    } finally {
      await exporter.stop();
    }
    for (const arch of MODELS) {
      const { onnx, plan, s } = plans.get(arch)!;
      arenaRows.push(`| ${arch} | ${s.arenaBytesPerSample} | ${s.lowerBoundPerSample} | ${fmt(s.ratio)} | ${(s.arenaBytesPerSample * 64 / 1024).toFixed(1)} |`);
      const tensors = { inputs: inputsFor(s.inputs[0]!.shape) };
      const common = { batchSizes: BATCHES, iterations: ITERS, warmup: WARMUP, threads: THREADS };
      const ort = measured(await runOnce(sup, workerSpecs.python({ name: "python-ort" }), "infer.ort", { model: onnx, ...common, device: "cpu" }, tensors));
      let nat: Measured | undefined;
      if (!rtMissing) {
        const spec = workerSpecs.memlaneRt({ args: ["--threads", String(THREADS)] });  // as the pipeline's benchmark stage spawns it
        nat = measured(await runOnce(sup, spec, "infer.native", { model: plan, ...common, device: "cpu" }, tensors));
      }
      const diff = maxAbsDiff(nat?.outputs, ort.outputs);
      for (const b of BATCHES) {
        const n = nat?.p50[b];
        rows.push(`| ${arch} | ${b} | ${fmt(ort.p50[b])} | ${fmt(n)} | ${n === undefined ? "—" : fmt(n / ort.p50[b]!, 2)} | ${mib(ort.steadyUssKiB)} | ${mib(nat?.steadyUssKiB)} | ${nat?.steadyUssKiB && ort.steadyUssKiB ? fmt(nat.steadyUssKiB / ort.steadyUssKiB, 2) : "—"} | ${diff === undefined ? "—" : diff.toExponential(1)} |`);
      }
    }
  } finally {
    await sup.close();
    rmSync(dir, { recursive: true, force: true });
  }
  console.log(`# memlane-rt vs ONNX Runtime (CPU), ${THREADS} thread(s), ${ITERS} timed iterations, p50 latency\n`);
  if (rtMissing) console.log(`**memlane-rt is missing: native columns skipped.** ${rtMissing}\n`);
  console.log("| model | batch | ORT ms | memlane-rt ms | rt/ORT | ORT USS MiB | rt USS MiB | rt/ORT USS | max abs diff |");
  console.log("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
  for (const r of rows) console.log(r);
  console.log("\nUSS: each process's own pages at the end of steady inference (smaps_rollup); the ORT");
  console.log("process is a Python worker, so its figure includes the interpreter and numpy.");
  console.log("\n## Arena (per sample, bytes)\n");
  console.log("| model | arena | lower bound | ratio | batch 64 KiB |");
  console.log("| --- | --- | --- | --- | --- |");
  for (const r of arenaRows) console.log(r);
  console.log("\n\"batch 64 KiB\" is the plan's arena for 64 samples at once (the CUDA backend's size);");
  console.log("memlane-rt's CPU backend runs a batch in chunks within 256 KiB, so it allocates less.");
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
