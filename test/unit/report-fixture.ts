// A realistic RunRecord for the report tests: four runtimes of the digits model on CPU, a
// train stage, three checkpoint loads, no GPU. Figures are chosen in round MiB so the tests
// can assert exact cells; their proportions follow real runs (torch import ~300 MiB, ORT
// ~45 MiB, memlane-rt a few MiB).
import type { PhaseMarkInput } from "../../src/memory/phases.ts";
import type { Sample, TrackedProcess } from "../../src/memory/sampler.ts";
import type { RunRecord, RuntimeRecord } from "../../src/report/build.ts";
import type { HostInfo } from "../../src/report/schema.ts";
import type { SmapsCounts, SmapsSummary } from "../../src/transport/protocol.ts";

export const T0 = 1_763_700_000_000;
const K = 1024;

/** [phase, ms, rss start MiB, rss end MiB, uss start MiB, uss end MiB, hwm at end MiB?] */
type Row = [string, number, number, number, number, number, number?];

const reading = (rss: number, uss: number, hwm = rss) => ({
  rssKiB: rss * K, ussKiB: uss * K, pssKiB: (uss + (rss - uss) / 4) * K, swapKiB: 0, hwmKiB: hwm * K,
});

/** Marks and one mid-phase sample per phase (at the end RSS), plus any extra samples. */
function run(t: number, rows: Row[]): { marks: PhaseMarkInput[]; samples: Sample[]; end: number } {
  const marks: PhaseMarkInput[] = [];
  const samples: Sample[] = [];
  for (const [name, ms, rss0, rss1, uss0, uss1, hwm] of rows) {
    marks.push({ name, mark: "start", tMs: t, memory: reading(rss0, uss0) });
    samples.push({ tMs: t + ms / 2, ...reading(rss1, uss1), gpuKiB: null });
    t += ms;
    marks.push({ name, mark: "end", tMs: t, memory: reading(rss1, uss1, hwm ?? Math.max(rss0, rss1)) });
    t += 5;
  }
  return { marks, samples, end: t };
}

const lat = (p50: number, p99: number, mean: number) => ({ p50, p99, mean });

interface RtSpec {
  name: string;
  pid: number;
  kind: string;
  command: string[];
  versions: Record<string, string>;
  rows: Row[];
  latencyMs: RuntimeRecord["latencyMs"];
  throughputPerS: number;
  maxAbsDiff: number | null;
}

const SPECS: RtSpec[] = [
  {
    name: "python-torch", pid: 4101, kind: "python", command: [".venv/bin/python", "-m", "memlane_worker", "--connect", "ipc:///tmp/x/broker.sock"],
    versions: { python: "3.11.9", torch: "2.5.1+cpu" },
    rows: [
      ["import", 900, 13, 310, 9, 256, 312], ["runtime-create", 2, 310, 310, 256, 256], ["model-load", 12, 310, 312, 256, 258],
      ["first-inference", 40, 312, 330, 258, 270, 333], ["steady-inference", 800, 330, 331, 270, 271],
    ],
    latencyMs: { batch1: lat(0.212, 0.35, 0.22), batch64: lat(1.9, 2.6, 2.0) }, throughputPerS: 33_684, maxAbsDiff: null,
  },
  {
    name: "python-ort", pid: 4102, kind: "python", command: [".venv/bin/python", "-m", "memlane_worker"],
    versions: { python: "3.11.9", onnxruntime: "1.22.0" },
    rows: [
      ["import", 150, 13, 57, 9, 41, 58], ["runtime-create", 20, 57, 63, 41, 45], ["model-load", 8, 63, 65, 45, 47, 68.5],
      ["first-inference", 30, 65, 74, 47, 50], ["steady-inference", 600, 74, 75, 50, 50],
    ],
    latencyMs: { batch1: lat(0.041, 0.09, 0.045), batch64: lat(0.61, 0.95, 0.66) }, throughputPerS: 104_918, maxAbsDiff: 2.4e-6,
  },
  {
    name: "node-ort", pid: 4000, kind: "node", command: ["node", "--import", "tsx", "src/cli/main.ts", "run", "pipelines/digits.ts"],
    versions: { node: "v20.20.2", "onnxruntime-node": "1.22.0" },
    rows: [
      ["import", 60, 60, 82, 40, 60], ["runtime-create", 15, 82, 84, 60, 62], ["model-load", 6, 84, 86, 62, 64],
      ["first-inference", 25, 86, 90, 64, 67], ["steady-inference", 620, 90, 90, 67, 67],
    ],
    latencyMs: { batch1: lat(0.05, 0.12, 0.06), batch64: lat(0.7, 1.1, 0.75) }, throughputPerS: 91_428, maxAbsDiff: 2.4e-6,
  },
  {
    name: "native", pid: 4103, kind: "memlane-rt", command: ["native/build/memlane-rt", "--connect", "ipc:///tmp/x/broker.sock"],
    versions: { "memlane-rt": "0.1.0" },
    rows: [
      ["runtime-create", 1, 3, 3.5, 1, 1.5], ["model-load", 1, 3.5, 3.75, 1.5, 1.75], ["first-inference", 2, 3.75, 4, 1.75, 2.5],
      ["steady-inference", 500, 4, 4, 2.5, 2.5],
    ],
    latencyMs: { batch1: lat(0.018, 0.031, 0.02), batch64: lat(0.52, 0.8, 0.55) }, throughputPerS: 123_077, maxAbsDiff: 3.1e-6,
  },
];

export const HOST: HostInfo = {
  cpuModel: "AMD EPYC 7B13", cores: 2, memTotalMiB: 7940, platform: "linux", kernel: "6.8.0", node: "v20.20.2", python: "3.11.9",
};

export function realisticRun(): RunRecord {
  let t = T0;
  const tracks: TrackedProcess[] = [];
  const track = (label: string, pid: number, samples: Sample[]) => tracks.push({ label, pid, periodMs: 50, exited: true, samples });

  const train = run(t, [
    ["import", 1100, 13, 320, 9, 262], ["data-load", 40, 320, 322, 262, 264], ["epoch-1", 700, 322, 340, 264, 280, 352],
    ["epoch-2", 690, 340, 341, 280, 281, 350], ["checkpoint-save", 30, 341, 341, 281, 281],
  ]);
  track("train", 4100, train.samples);
  t = train.end + 100;

  const checkpointLoad: NonNullable<RunRecord["checkpointLoad"]> = [];
  const methods = [["torch.load", 4201, 3, 2.9], ["torch.load-mmap", 4202, 0.3, 0.1], ["safetensors", 4203, 0.2, 0.1]] as const;
  for (const [method, pid, drss, duss] of methods) {
    const r = run(t, [["import", 900, 13, 310, 9, 256], ["model-load", 20, 310, 310 + drss, 256, 256 + duss, 310 + 2 * drss]]);
    checkpointLoad.push({ method, pid, bytes: 3 * 2 ** 20 + 123_456, marks: r.marks });
    track(`checkpoint.load ${method}`, pid, r.samples);
    t = r.end + 10;
  }

  const runtimes: RuntimeRecord[] = SPECS.map((s) => {
    const r = run(t, s.rows);
    // A transient spike in python-ort's first inference that only the sampler saw (HWM reset refused there).
    if (s.name === "python-ort") {
      const fi = r.marks.find((m) => m.name === "first-inference" && m.mark === "start")!;
      r.samples.push({ tMs: fi.tMs + 10, ...reading(80, 56), gpuKiB: null });
    }
    track(s.name, s.pid, r.samples.sort((a, b) => a.tMs - b.tMs));
    t = r.end + 50;
    return {
      name: s.name, process: { pid: s.pid, kind: s.kind, command: s.command }, device: "cpu", versions: s.versions, marks: r.marks,
      latencyMs: s.latencyMs, throughputPerS: s.throughputPerS, accuracy: 0.9722, maxAbsDiff: s.maxAbsDiff,
    };
  });

  return {
    pipeline: "digits",
    runId: "20261121-193000-digits",
    createdAt: new Date(t),
    training: { accuracy: 0.9694, epochs: 2, device: "cpu", process: { pid: 4100, kind: "python", command: [".venv/bin/python", "-m", "memlane_worker"] }, marks: train.marks },
    runtimes,
    checkpointLoad,
    tracks,
    stages: [
      { name: "train", kind: "train", worker: "python", pid: 4100, startMs: T0, endMs: train.end, status: "ok" },
      { name: "export", kind: "export", worker: "python", pid: 4100, startMs: train.end, endMs: train.end + 90, status: "ok" },
      { name: "deploy python-trt", kind: "infer.trt", worker: "python", pid: 4104, startMs: train.end + 90, endMs: train.end + 95, status: "failed",
        error: { code: 15, name: "BACKEND_UNAVAILABLE", message: "tensorrt is not installed" } },
    ],
    gpu: { status: "unavailable", reason: "no NVIDIA driver (libnvidia-ml.so.1 not found)", devices: [] },
    host: HOST,
  };
}

export const NATIVE_NOTES = "cudaGraph: batch 1 captured, batch 64 captured; releaseHostWeights: 43000 KiB advised DONTNEED";

/**
 * realisticRun with memlane-rt on CUDA as infer.native reports it there: a pipelined mean per
 * batch (requests in flight back to back), pipelined samples/s and its backend notes.
 */
export function pipelinedRun(): RunRecord {
  const run = realisticRun();
  const native = run.runtimes.find((r) => r.name === "native")!;
  native.device = "cuda:0";
  native.latencyMs = {
    batch1: { ...lat(0.018, 0.031, 0.02), pipelinedMean: 0.0085 },
    batch64: { ...lat(0.52, 0.8, 0.55), pipelinedMean: 0.2133 },
  };
  native.pipelinedThroughputPerS = 300_047;
  native.backendNotes = NATIVE_NOTES;
  return run;
}

// Per-mapping summaries shaped like real python-torch, python-ort and native readings.
const SP = "/v/lib/python3.11/site-packages";
/** [rss, uss] MiB of a private mapping: RSS = PSS = USS, all dirty for anonymous kinds. */
const priv = (mib: number, anon = false): SmapsCounts => [mib * 1024, mib * 1024, anon ? 0 : mib * 1024, anon ? mib * 1024 : 0, anon ? mib * 1024 : 0, 0];
const BASE: SmapsSummary = { "/usr/bin/python3.11": priv(4), "/usr/lib/x86_64-linux-gnu/libc.so.6": priv(2), "[heap]": priv(6, true), "[anon]": priv(1, true) };

/** Summaries at each end mark (and the first start) of a runtime's phases: grows per phase by `grow`. */
function withSmaps(r: RunRecord["runtimes"][number], grow: Record<string, SmapsSummary>): void {
  let current: SmapsSummary = { ...BASE };
  let first = true;
  for (const m of r.marks) {
    if (m.mark === "start" && first) {
      m.smaps = { ...current };
      first = false;
    }
    if (m.mark === "end") {
      current = { ...current, ...grow[m.name] };
      m.smaps = { ...current };
    }
  }
}

/** realisticRun() with per-mapping summaries on python-torch, python-ort and native (node-ort has none). */
export function breakdownRun(): RunRecord {
  const rec = realisticRun();
  const rt = (n: string) => rec.runtimes.find((r) => r.name === n)!;
  withSmaps(rt("python-torch"), {
    import: { [`${SP}/torch/lib/libtorch_cpu.so`]: priv(141), [`${SP}/torch/lib/libtorch_python.so`]: priv(20), "[heap]": priv(28, true), "[anon]": priv(19, true) },
    "steady-inference": { "[anon]": priv(30, true), "[anon guarded]": priv(1, true) },
  });
  withSmaps(rt("python-ort"), {
    import: { [`${SP}/onnxruntime/capi/onnxruntime_pybind11_state.cpython-311-x86_64-linux-gnu.so`]: priv(25), [`${SP}/numpy/_core/_multiarray_umath.cpython-311-x86_64-linux-gnu.so`]: priv(5) },
    "model-load": { "/run/r1/digits-cnn.onnx": priv(0.5) },
  });
  withSmaps(rt("native"), {
    "runtime-create": { "/w/native/build/runtime/memlane-rt": priv(2), "/usr/lib/x86_64-linux-gnu/libopenblas.so.0": priv(1) },
    "model-load": { "/run/r1/digits-cnn.mlplan": priv(0.75) },
  });
  return rec;
}
