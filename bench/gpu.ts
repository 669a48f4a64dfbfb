/**
 * memlane-rt's CUDA backend, each technique on and off, against PyTorch eager and PyTorch
 * CUDA graphs, side by side in one run: p50/p99 latency and throughput ratios at batch 1,
 * 16 and 128 for resnet-mini and resnet18 (zoo models, random weights, seed 0), and per
 * process and phase the host RSS/USS and GPU memory (the worker's own gpuKiB reading and
 * the peak NVML per-process figure sampled from here at 20 Hz).
 *
 *   npm run bench:gpu     (env: BENCH_ITERS=50, BENCH_MODELS=resnet-mini,resnet18)
 *
 * `infer.native` times each request alone (p50/p99) and, on CUDA, `iterations` requests
 * submitted back to back and then drained ("pipelined"): copy/compute overlap,
 * asynchronous outputs and several contexts act only there, so the pipelined column is
 * where their rows differ. A second table times the same in process with
 * native/build/runtime/src/cuda/memlane_cuda_bench, adding one caller thread per context.
 *
 * Without a GPU it prints that and the reason, and exits 0. Not yet run on a GPU (the one
 * lent so far had no Node); memlane_cuda_bench, its second table, has: docs/gpu.md, "Status".
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { compileOnnx } from "../src/compiler/index.ts";
import { createGpuProbe, type NvmlGpuProbe } from "../src/memory/gpu.ts";
import type { PhaseMark } from "../src/transport/protocol.ts";
import { Supervisor } from "../src/workers/index.ts";
import type { TaskResult } from "../src/workers/index.ts";
import { REPO_ROOT, memlaneRtBinary, workerSpecs } from "../src/workers/specs.ts";
import { benchInputs, type BenchInputs } from "./inputs.ts";

const MODELS = (process.env.BENCH_MODELS ?? "resnet-mini,resnet18").split(",");
const BATCHES = [1, 16, 128];
const ITERS = Number(process.env.BENCH_ITERS ?? 50);
const WARMUP = 5;

/** The runs: PyTorch variants, then memlane-rt with everything on and each technique off. */
const NATIVE_ALL = { arena: "once", pinned: true, fp16: false, overlap: true, asyncOutputs: true, cudaGraph: true, contexts: 1 };
const RUNS: { name: string; kind: "torch" | "native"; variant?: string; cuda?: Record<string, unknown> }[] = [
  { name: "torch eager", kind: "torch", variant: "eager" },
  { name: "torch cuda-graph", kind: "torch", variant: "cuda-graph" },
  { name: "torch fp16", kind: "torch", variant: "fp16" },
  { name: "rt all on", kind: "native", cuda: NATIVE_ALL },
  { name: "rt baseline (all off)", kind: "native", cuda: { ...NATIVE_ALL, arena: "per-request", pinned: false, overlap: false, asyncOutputs: false, cudaGraph: false } },
  { name: "rt arena per-request", kind: "native", cuda: { ...NATIVE_ALL, arena: "per-request" } },
  { name: "rt pageable I/O", kind: "native", cuda: { ...NATIVE_ALL, pinned: false } },
  { name: "rt no overlap", kind: "native", cuda: { ...NATIVE_ALL, overlap: false } },
  { name: "rt sync outputs", kind: "native", cuda: { ...NATIVE_ALL, asyncOutputs: false } },
  { name: "rt no cuda graph", kind: "native", cuda: { ...NATIVE_ALL, cudaGraph: false } },
  { name: "rt fp16", kind: "native", cuda: { ...NATIVE_ALL, fp16: true } },
  { name: "rt 2 contexts", kind: "native", cuda: { ...NATIVE_ALL, contexts: 2 } },
  { name: "rt eager module loading", kind: "native", cuda: { ...NATIVE_ALL, lazyLoading: false } },
];

interface Row {
  run: string;
  lat: Record<number, { p50: number; p99: number; pipelinedMean?: number }>;
  throughput: number;
  /** Samples/s at the largest batch with requests in flight (torch and memlane-rt on CUDA). */
  pipelinedThroughput?: number;
  /** memlane-rt only: what the backend did with its switches (graphs captured, pages released). */
  notes?: string;
  phases: Map<string, { rssKiB?: number; ussKiB?: number; gpuKiB?: number }>;
  nvmlPeakBytes: number | null;
  error?: string;
}

/** The eval set: the largest batch's rows (the timed batches are its first N rows). */
const inputsFor = (shape: number[]): BenchInputs => benchInputs(Math.max(...BATCHES), shape.slice(1));

function phaseEnds(marks: PhaseMark[]): Row["phases"] {
  const m: Row["phases"] = new Map();
  for (const p of marks) if (p.mark === "end") m.set(p.name, { rssKiB: p.memory.rssKiB, ussKiB: p.memory.ussKiB, gpuKiB: p.memory.gpuKiB });
  return m;
}

async function measure(sup: Supervisor, probe: NvmlGpuProbe, name: string, spec: Parameters<Supervisor["spawn"]>[0], task: string, args: Record<string, unknown>, tensors: Record<string, BenchInputs>): Promise<Row> {
  const w = await sup.spawn(spec);
  let peak: number | null = null;
  const timer = setInterval(() => {
    const pid = w.pid;
    if (pid === undefined) return;
    const b = probe.processUsedBytes(pid);
    if (b !== null) peak = Math.max(peak ?? 0, b);
  }, 50);
  try {
    const r: TaskResult = await w.run(task, args, { tensors, timeoutMs: 600_000 });
    const lat = r.value.latencyMs as Record<string, Row["lat"][number]>;
    const row: Row = { run: name, lat: {}, throughput: Number(r.value.throughputPerS), phases: phaseEnds(r.phases), nvmlPeakBytes: peak };
    if (typeof r.value.pipelinedThroughputPerS === "number") row.pipelinedThroughput = r.value.pipelinedThroughputPerS;
    if (typeof r.value.backendNotes === "string" && r.value.backendNotes) row.notes = r.value.backendNotes;
    for (const b of BATCHES) row.lat[b] = lat[`batch${b}`]!;
    return row;
  } catch (e) {
    return { run: name, lat: {}, throughput: NaN, phases: new Map(), nvmlPeakBytes: peak, error: (e as Error).message.split("\n")[0] };
  } finally {
    clearInterval(timer);
    await w.stop();
  }
}

const fmt = (x: number | undefined, d = 3) => (x === undefined || !Number.isFinite(x) ? "—" : x.toFixed(d));
const mib = (k: number | undefined) => (k === undefined || k < 0 ? "—" : (k / 1024).toFixed(1));

function report(arch: string, rows: Row[]): void {
  const ref = rows.find((r) => r.run === "torch eager" && !r.error);
  console.log(`\n## ${arch}: latency (ms, one request host -> host) and ratio to torch eager (< 1 is faster); pipelined = mean per request with requests in flight, its samples/s against torch eager's pipelined\n`);
  console.log(`| run | ${BATCHES.map((b) => `b${b} p50 | b${b} p99 | b${b} p50/eager | b${b} pipelined`).join(" | ")} | samples/s | /eager | pipelined samples/s | /eager |`);
  console.log(`| --- |${" --- | --- | --- | --- |".repeat(BATCHES.length)} --- | --- | --- | --- |`);
  for (const r of rows) {
    if (r.error) {
      console.log(`| ${r.run} | failed: ${r.error} |`);
      continue;
    }
    const cells = BATCHES.map((b) => {
      const l = r.lat[b];
      const e = ref?.lat[b];
      return `${fmt(l?.p50)} | ${fmt(l?.p99)} | ${l && e ? fmt(l.p50 / e.p50, 2) : "—"} | ${fmt(l?.pipelinedMean)}`;
    });
    const pt = r.pipelinedThroughput;
    const refPt = ref?.pipelinedThroughput;
    console.log(`| ${r.run} | ${cells.join(" | ")} | ${fmt(r.throughput, 0)} | ${ref ? fmt(r.throughput / ref.throughput, 2) : "—"} | ${fmt(pt, 0)} | ${pt !== undefined && refPt !== undefined ? fmt(pt / refPt, 2) : "—"} |`);
  }
  const noted = rows.filter((r) => r.notes);
  if (noted.length > 0) {
    console.log(`\n## ${arch}: what memlane-rt did with its switches\n`);
    for (const r of noted) console.log(`- ${r.run}: ${r.notes}`);
  }
  const phases = ["runtime-create", "cuda-context", "model-load", "weights-upload", "arena", "first-inference", "steady-inference"];
  console.log(`\n## ${arch}: memory at each phase end, MiB (host RSS / USS / GPU from the worker's own reading), peak NVML per process\n`);
  console.log(`| run | ${phases.join(" | ")} | NVML peak |`);
  console.log(`| --- |${" --- |".repeat(phases.length)} --- |`);
  for (const r of rows) {
    if (r.error) continue;
    const cells = phases.map((p) => {
      const m = r.phases.get(p);
      return m ? `${mib(m.rssKiB)} / ${mib(m.ussKiB)} / ${mib(m.gpuKiB)}` : "—";
    });
    console.log(`| ${r.run} | ${cells.join(" | ")} | ${r.nvmlPeakBytes === null ? "unavailable" : (r.nvmlPeakBytes / 2 ** 20).toFixed(1)} |`);
  }
}

const CUDA_BENCH = join(REPO_ROOT, "native", "build", "runtime", "src", "cuda", "memlane_cuda_bench");
const PIPELINE_SETS: Record<string, string[]> = {
  "all on": [],
  "no overlap": ["overlap=false"],
  "sync outputs": ["asyncOutputs=false"],
  "no overlap, sync outputs": ["overlap=false", "asyncOutputs=false"],
  "2 contexts": ["contexts=2"],
  "4 contexts": ["contexts=4"],
};

/** In-process pipelining figures (memlane_cuda_bench prints one JSON object per batch). */
function pipelineTable(arch: string, plan: string): void {
  if (!existsSync(CUDA_BENCH)) {
    console.log(`\n(${CUDA_BENCH} not built: in-process pipelining table skipped)`);
    return;
  }
  console.log(`\n## ${arch}: in-process pipelining (memlane_cuda_bench), ms and samples/s\n`);
  console.log("| switches | batch | sync p50 | sync /s | pipelined p50 | pipelined p99 | pipelined /s | pipelined/sync | threads /s | GPU MiB |");
  console.log("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
  for (const [name, sw] of Object.entries(PIPELINE_SETS)) {
    let out: string;
    try {
      out = execFileSync(CUDA_BENCH, [plan, "--batches", BATCHES.join(","), "--iters", String(ITERS), "--warmup", String(WARMUP), ...sw], { encoding: "utf8", timeout: 600_000 });
    } catch (e) {
      console.log(`| ${name} | failed: ${(e as Error).message.split("\n")[0]} |`);
      continue;
    }
    for (const line of out.trim().split("\n")) {
      const r = JSON.parse(line) as { available: boolean; reason?: string; batch: number; sync: { p50: number; throughputPerS: number }; pipelined: { p50: number; p99: number; throughputPerS: number }; threads: { throughputPerS: number }; deviceUsedBytes: number };
      if (!r.available) {
        console.log(`| ${name} | unavailable: ${r.reason} |`);
        break;
      }
      console.log(`| ${name} | ${r.batch} | ${fmt(r.sync.p50)} | ${fmt(r.sync.throughputPerS, 0)} | ${fmt(r.pipelined.p50)} | ${fmt(r.pipelined.p99)} | ${fmt(r.pipelined.throughputPerS, 0)} | ${fmt(r.pipelined.throughputPerS / r.sync.throughputPerS, 2)} | ${r.threads.throughputPerS > 0 ? fmt(r.threads.throughputPerS, 0) : "—"} | ${r.deviceUsedBytes >= 0 ? (r.deviceUsedBytes / 2 ** 20).toFixed(1) : "—"} |`);
    }
  }
}

async function main(): Promise<void> {
  let probe: NvmlGpuProbe;
  try {
    probe = createGpuProbe();
  } catch (e) {
    console.log(`bench:gpu: no GPU measurement possible: ${(e as Error).message}`);
    return;
  }
  const avail = probe.available();
  const devices = probe.devices();
  if (!avail.ok || devices.length === 0) {
    console.log(`bench:gpu: no GPU present (${avail.reason ?? "NVML lists no device"}); nothing to measure.`);
    return;
  }
  let rtMissing: string | undefined;
  try {
    memlaneRtBinary();
  } catch (e) {
    rtMissing = (e as Error).message;
  }
  console.log(`# memlane-rt CUDA vs PyTorch on ${devices.map((d) => `${d.name} (${(d.totalBytes / 2 ** 30).toFixed(0)} GiB)`).join(", ")}, driver ${probe.info().driverVersion ?? "?"}`);
  console.log(`${ITERS} timed iterations after ${WARMUP} warm-up, per batch size; each run in a fresh process.`);
  if (rtMissing) console.log(`\n**memlane-rt is missing: native rows skipped.** ${rtMissing}`);
  const dir = mkdtempSync(join(tmpdir(), "memlane-bench-gpu-"));
  const sup = await Supervisor.start();
  try {
    for (const arch of MODELS) {
      const onnx = join(dir, `${arch}.onnx`);
      const plan = join(dir, `${arch}.mlplan`);
      const exporter = await sup.spawn(workerSpecs.python({ name: "exporter" }));
      try {
        await exporter.run("zoo.export", { arch, out: onnx, seed: 0 }, { timeoutMs: 300_000 });
      } finally {
        await exporter.stop();
      }
      const summary = await compileOnnx(onnx, plan);
      const tensors = { inputs: inputsFor(summary.inputs[0]!.shape) };
      const common = { batchSizes: BATCHES, iterations: ITERS, warmup: WARMUP, threads: 1, device: "cuda" };
      const rows: Row[] = [];
      for (const run of RUNS) {
        if (run.kind === "torch") {
          rows.push(await measure(sup, probe, run.name, workerSpecs.python({ name: run.name }), "infer.torch", { arch, seed: 0, variant: run.variant, ...common }, tensors));
        } else if (!rtMissing) {
          rows.push(await measure(sup, probe, run.name, workerSpecs.memlaneRt({ args: ["--device", "cuda"] }), "infer.native", { model: plan, cuda: run.cuda, ...common }, tensors));
        }
      }
      report(arch, rows);
      pipelineTable(arch, plan);
    }
  } finally {
    await sup.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
