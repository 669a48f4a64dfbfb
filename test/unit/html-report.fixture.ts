/**
 * A realistic report.json for the digits pipeline (train → export → four runtimes), built from
 * the schema types, for the HTML report tests until real runs exist. Deterministic: the same
 * options give the same report. `gpu` adds NVML-style GPU figures; `latencySamples` adds
 * per-call samples (not in schema v1) so the histogram path is exercised; `pipelined` (default:
 * as `gpu`, as memlane-rt's CUDA backend pipelines by default) gives the native runtime
 * pipelined figures (pipelinedMean per batch, pipelinedThroughputPerS) and backend notes.
 */
import type { PhaseReport, Report, RuntimeReport, TimelineSample, TimelineTrack } from "../../src/report/schema.ts";

export interface FixtureOptions {
  gpu?: boolean;
  latencySamples?: boolean;
  pipelined?: boolean;
}

export const NATIVE_NOTES = "cudaGraph: batch 1 captured, batch 64 captured; releaseHostWeights: 430 KiB advised DONTNEED";

const T0 = Date.UTC(2026, 10, 21, 19, 0, 0);
const PERIOD = 50;

function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => ((s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32);
}

type Step = [name: string, ms: number, dRss: number, dUss: number, peakExtra: number, dGpu?: number];
interface Proc { rss: number; uss: number; gpu: number; t: number; marks: PhaseReport[] }

function runPhases(p: Proc, steps: Step[], gpu: boolean): PhaseReport[] {
  const out: PhaseReport[] = [];
  for (const [name, ms, dRss, dUss, peakExtra, dGpu = 0] of steps) {
    const startMs = p.t;
    const endRss = p.rss + dRss;
    const g0 = p.gpu;
    p.gpu += gpu ? dGpu : 0;
    const ph: PhaseReport = {
      name, startMs, endMs: startMs + ms, ms,
      rssMiB: endRss, pssMiB: endRss * 0.93, ussMiB: p.uss + dUss,
      deltaRssMiB: dRss, deltaUssMiB: dUss,
      peakRssMiB: Math.max(endRss, p.rss) + peakExtra, peakSource: peakExtra > 0 ? "hwm" : "end",
      swapMiB: 0, samples: Math.floor(ms / PERIOD),
      gpu: gpu ? "available" : "unavailable",
      gpuMiB: gpu ? p.gpu : null, deltaGpuMiB: gpu ? p.gpu - g0 : null, peakGpuMiB: gpu ? p.gpu + dGpu * 0.1 : null,
    };
    p.rss = endRss;
    p.uss += dUss;
    p.t += ms + 20;
    out.push(ph);
    p.marks.push(ph);
  }
  return out;
}

/** Orchestrator samples of one process: a ramp to each phase's end with its peak mid-phase. */
function track(label: string, pid: number, p: Proc, from: number, to: number, baseRss: number, gpu: boolean, seed: number): TimelineTrack {
  const r = rng(seed);
  const samples: TimelineSample[] = [];
  for (let t = from; t <= to; t += PERIOD) {
    let rss = baseRss, uss = baseRss * 0.8, g = 0;
    for (const m of p.marks) {
      if (t >= m.endMs) { rss = m.rssMiB; uss = m.ussMiB; g = m.gpuMiB ?? 0; continue; }
      if (t >= m.startMs) {
        const f = (t - m.startMs) / m.ms;
        const bump = (m.peakRssMiB - Math.max(m.rssMiB, m.rssMiB - m.deltaRssMiB)) * Math.sin(Math.PI * f);
        rss = m.rssMiB - m.deltaRssMiB * (1 - f) + bump;
        uss = m.ussMiB - m.deltaUssMiB * (1 - f) + bump * 0.9;
        g = (m.gpuMiB ?? 0) - (m.deltaGpuMiB ?? 0) * (1 - f);
      }
      break;
    }
    const noise = 1 + (r() - 0.5) * 0.01;
    samples.push([t, Math.round(rss * 1024 * noise), Math.round(uss * 1024 * noise), gpu ? Math.round(g * 1024) : null]);
  }
  return { label, pid, samples, periodMs: PERIOD };
}

const INFER: Step[] = [
  ["import", 900, 0, 0, 0],
  ["runtime-create", 120, 0, 0, 0],
  ["model-load", 200, 0, 0, 0],
  ["first-inference", 60, 0, 0, 0],
  ["steady-inference", 2500, 0, 0, 0],
];
function inferSteps(imp: number, create: number, load: number, first: number, steady: number, gpuScale: number): Step[] {
  const d = [imp, create, load, first, steady];
  const g = [0, 310, 2, 40, 1].map((x) => x * gpuScale);
  return INFER.map(([n, ms], i) => [n, ms * (i === 0 ? imp / 120 + 0.1 : 1), d[i]!, d[i]! * 0.92, i === 3 ? d[i]! * 0.5 + 3 : 0, g[i]]);
}

function latency(p50: number, b64: number, withSamples: boolean, seed: number) {
  const r = rng(seed);
  const mk = (m: number) => {
    const samples = Array.from({ length: 200 }, () => m * (0.9 + 0.25 * r() ** 3 + (r() < 0.02 ? 1.2 : 0)));
    return { p50: m, p99: m * 2.1, mean: m * 1.12, ...(withSamples ? { samples } : {}) };
  };
  return { batch1: mk(p50), batch64: mk(b64) };
}

export function makeReport(opts: FixtureOptions = {}): Report {
  const gpu = !!opts.gpu;
  const dev = gpu ? "cuda:0" : "cpu";
  const py: Proc = { rss: 14, uss: 11, gpu: 0, t: T0 + 300, marks: [] };
  const train = runPhases(py, [["import", 2100, 412, 380, 0, 0], ["data-load", 350, 6, 6, 4], ["epoch-1", 3200, 38, 37, 22, 180], ["epoch-2", 3100, 1, 1, 20, 0], ["epoch-3", 3150, 0.5, 0.5, 20, 0], ["checkpoint-save", 180, 0.3, 0.3, 2]], gpu);
  py.t += 1200; // export
  const exportStart = py.t - 1200;
  const torchPhases = runPhases(py, inferSteps(0, 2, 1.1, 9, 0.4, 1), gpu);
  const ortP: Proc = { rss: 12, uss: 9.5, gpu: 0, t: py.t + 400, marks: [] };
  const ortPhases = runPhases(ortP, inferSteps(31, 18, 0.6, 3.2, 0.1, 0.8), gpu);
  const node: Proc = { rss: 96, uss: 82, gpu: 0, t: ortP.t + 200, marks: [] };
  const nodePhases = runPhases(node, inferSteps(24, 16, 0.6, 2.9, 0.1, 0.8), gpu);
  const rt: Proc = { rss: 3.1, uss: 1.2, gpu: 0, t: node.t + 200, marks: [] };
  const rtPhases = runPhases(rt, inferSteps(1.5, 0.6, 0.15, 0.2, 0, 0.5), gpu);
  const end = rt.t + 300;
  const versions = { python: "3.11.7", torch: "2.13.0", onnxruntime: "1.22.0" };
  const rtReport = (name: string, pid: number, kind: string, phases: PhaseReport[], lat: ReturnType<typeof latency>, thr: number, acc: number, diff: number | null, v: Record<string, string>): RuntimeReport => {
    const s = phases[phases.length - 1]!;
    return {
      name, pid, process: { pid, kind, command: kind === "node" ? ["node", "--import", "tsx", "src/cli/main.ts", "run", "pipelines/digits.ts"] : [kind] },
      device: dev, versions: v, phases, steady: { rssMiB: s.rssMiB, ussMiB: s.ussMiB, pssMiB: s.pssMiB, gpuMiB: s.gpuMiB },
      accuracy: acc, maxAbsDiff: diff, latencyMs: lat, throughputPerS: thr, pipelinedThroughputPerS: null, backendNotes: null,
    };
  };
  const ls = !!opts.latencySamples;
  const runtimes = [
    rtReport("python-torch", 4121, "python", torchPhases, latency(0.21, 1.9, ls, 1), 33684, 0.9722, null, versions),
    rtReport("python-ort", 4180, "python", ortPhases, latency(0.048, 0.61, ls, 2), 104918, 0.9722, 2.4e-6, { python: "3.11.7", onnxruntime: "1.22.0" }),
    rtReport("node-ort", 4100, "node", nodePhases, latency(0.061, 0.66, ls, 3), 96970, 0.9722, 2.4e-6, { node: "v20.20.2", "onnxruntime-node": "1.22.0" }),
    rtReport("native", 4195, "memlane-rt", rtPhases, latency(0.013, 0.38, ls, 4), 168421, 0.9694, 3.1e-6, { "memlane-rt": "0.1.0" }),
  ];
  if (opts.pipelined ?? gpu) {
    // memlane-rt timed requests in flight back to back: a pipelined mean per batch below the sync mean.
    const native = runtimes[3]!;
    const piped: Record<string, number> = { batch1: 0.009, batch64: 0.256 };
    for (const [k, v] of Object.entries(native.latencyMs)) v.pipelinedMean = piped[k]!;
    native.pipelinedThroughputPerS = 250_000;
    native.backendNotes = NATIVE_NOTES;
  }
  const ratio = (counter: string, n: string, d: string, a: number, b: number) => ({ counter, numerator: n, denominator: d, value: b ? a / b : null });
  return {
    schemaVersion: 1, pipeline: "digits", runId: "20261121-190000-digits", createdAt: new Date(end).toISOString(),
    host: { cpuModel: "Intel(R) Xeon(R) Platinum 8481C", cores: 2, memTotalMiB: 24576, platform: "linux", kernel: "6.1.0-27-amd64", node: "v20.20.2", python: "3.11.7" },
    training: { accuracy: 0.9722, epochs: 3, phases: train, pid: 4121, process: { pid: 4121, kind: "python", command: [".venv/bin/python", "-m", "memlane_worker", "--connect", "ipc:///tmp/memlane-x/broker.sock"] }, device: dev },
    runtimes,
    checkpointLoad: [
      { method: "torch.load", pid: 4121, fileMiB: 0.41, deltaRssMiB: 1.3, deltaUssMiB: 1.2, peakRssMiB: 428.8, ms: 4.1 },
      { method: "torch.load-mmap", pid: 4121, fileMiB: 0.41, deltaRssMiB: 0.5, deltaUssMiB: 0.1, peakRssMiB: 428.0, ms: 1.9 },
      { method: "safetensors", pid: 4121, fileMiB: 0.41, deltaRssMiB: 0.5, deltaUssMiB: 0.1, peakRssMiB: 427.9, ms: 1.2 },
    ],
    comparison: {
      steady: runtimes.map((r) => ({ runtime: r.name, ...r.steady })),
      phases: ["import", "runtime-create", "model-load", "first-inference", "steady-inference"].map((phase) => ({
        phase,
        byRuntime: Object.fromEntries(runtimes.map((r) => {
          const p = r.phases.find((x) => x.name === phase);
          return [r.name, p ? { deltaRssMiB: p.deltaRssMiB, deltaUssMiB: p.deltaUssMiB, peakRssMiB: p.peakRssMiB, ms: p.ms } : null];
        })),
      })),
      ratios: ["python-torch", "python-ort"].flatMap((d) => ["node-ort", "native"].map((n) => {
        const a = runtimes.find((r) => r.name === n)!, b = runtimes.find((r) => r.name === d)!;
        return ratio("steady.ussMiB", n, d, a.steady.ussMiB, b.steady.ussMiB);
      })),
    },
    numerics: { reference: "python-torch", runtimes: runtimes.map((r) => ({ name: r.name, maxAbsDiff: r.maxAbsDiff, accuracy: r.accuracy })) },
    gpu: gpu
      ? { status: "available", reason: null, devices: [{ index: 0, name: "NVIDIA H100 80GB HBM3", totalMiB: 81559, usedMiB: 1460, driver: "580.65.06" }] }
      : { status: "unavailable", reason: "no NVIDIA driver (libnvidia-ml.so.1 not found)", devices: [] },
    stages: [
      { name: "train", kind: "train", worker: "python", pid: 4121, startMs: T0 + 280, endMs: train[train.length - 1]!.endMs + 10, status: "ok" },
      { name: "export", kind: "export", worker: "python", pid: 4121, startMs: exportStart, endMs: exportStart + 1150, status: "ok" },
      { name: "compile-plan", kind: "inline", worker: "node", pid: 4100, startMs: exportStart + 1160, endMs: exportStart + 1400, status: "ok" },
      { name: "infer-torch", kind: "infer.torch", worker: "python", pid: 4121, startMs: torchPhases[0]!.startMs, endMs: torchPhases[4]!.endMs, status: "ok" },
      { name: "infer-ort", kind: "infer.ort", worker: "python", pid: 4180, startMs: ortPhases[0]!.startMs - 150, endMs: ortPhases[4]!.endMs, status: "ok" },
      { name: "infer-node-ort", kind: "infer.ort", worker: "node", pid: 4100, startMs: nodePhases[0]!.startMs, endMs: nodePhases[4]!.endMs, status: "ok" },
      { name: "infer-native", kind: "infer.native", worker: "memlane-rt", pid: 4195, startMs: rtPhases[0]!.startMs - 60, endMs: rtPhases[4]!.endMs, status: "ok" },
      { name: "infer-trt", kind: "infer.trt", worker: "python", pid: null, startMs: end - 100, endMs: end - 99, status: "skipped", error: { code: 15, name: "BACKEND_UNAVAILABLE", message: "TensorRT needs a GPU" } },
    ],
    timeline: [
      track("orchestrator (node-ort)", 4100, node, T0, end, 96, gpu, 10),
      track("python (train, export, python-torch)", 4121, py, T0 + 250, torchPhases[4]!.endMs + 100, 14, gpu, 11),
      track("python-ort", 4180, ortP, ortPhases[0]!.startMs - 150, ortPhases[4]!.endMs + 100, 12, gpu, 12),
      track("memlane-rt (native)", 4195, rt, rtPhases[0]!.startMs - 60, rtPhases[4]!.endMs + 100, 3.1, gpu, 13),
    ],
  };
}
