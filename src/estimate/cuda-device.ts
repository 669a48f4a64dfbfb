/**
 * memlane-rt's device memory on CUDA, predicted without running the model:
 *
 *   device = context + weights + contexts x (per-context fixed + the context's allocations)
 *
 * each allocation rounded up to the driver's granule (2 MiB: NVML's per-process figure moves
 * in those steps). The allocations are what the backend allocates by (`memlane_cuda_bench PLAN
 * --budget`, native/runtime/src/cuda/device_budget.h: weights in their device dtype, the arena
 * and im2col scratch per context, cuBLAS's workspace, device input/output slots), computed on
 * the host with no GPU. The two fixed costs are measured on the GPU itself by a calibration
 * (`calibrateCudaDevice`): the context is the process's device memory once the CUDA context
 * exists (the driver's state, cudart's and the backend's modules); the per-context cost is what
 * a second execution context adds beyond its allocations (its cuBLAS handle, streams, events).
 * Without a calibration of this GPU there is no number: docs/memory.md, "Device memory (CUDA)".
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { compileOnnx } from "../compiler/index.ts";
import { REPO_ROOT } from "../workers/specs.ts";
import { cacheDir } from "./cache.ts";
import { PROBES, writeProbes } from "./probe-models.ts";

const MIB = 1024 * 1024;
/** Bump when the calibration's content or meaning changes. */
export const CUDA_DEVICE_CALIBRATION_FORMAT = 1;
/** A load that has not answered in this long is a hung driver, not a slow one. */
const BENCH_TIMEOUT_MS = 120_000;

export interface Allocation {
  name: string;
  bytes: number;
}

/** `memlane_cuda_bench --budget`'s answer (device_budget.h). */
export interface DeviceBudget {
  maxBatch: number;
  weightBytes: number;
  /** fp16: the largest float32 weight, on the device during the upload only. */
  uploadStagingBytes: number;
  contexts: number;
  perContext: Allocation[];
  /** arena=per-request: allocated around each run, so in the peak, not the steady figure. */
  perRequest: Allocation[];
}

export interface CudaDeviceCalibration {
  format: number;
  key: CudaDeviceKey;
  createdAt: string;
  /** The process's device memory before any allocation of the model: the CUDA context and what the first execution context loads once (modules, cuBLAS's shared state). */
  contextMiB: number;
  /** What one execution context adds beyond its own allocations (cuBLAS handle, streams, events). */
  perContextMiB: number;
  /** Allocation granule. */
  granuleMiB: number;
  /** The probe readings the two figures came from. */
  probes: { contexts: number; /** read before prepare */ contextMiB: number; preparedMiB: number; allocationsMiB: number }[];
}

export interface CudaDeviceKey {
  gpu: string;
  driver: number;
  runtime: number;
  /** memlane_cuda_bench's size and mtime: a rebuilt backend may allocate differently. */
  binary: string;
  /** The kernel driver's version line and the GPUs' models from /proc/driver/nvidia, readable without a CUDA context: a new driver or another GPU means a new calibration. */
  host: string;
}

export interface DeviceEstimate {
  /** After the model load: context, weights, every context's fixed cost and allocations. */
  loadMiB: number;
  /** The peak: the load, plus fp16's upload staging or per-request arenas while they live. */
  peakMiB: number;
  parts: { contextMiB: number; weightsMiB: number; perContextFixedMiB: number; perContextAllocationsMiB: number; contexts: number; transientMiB: number };
}

export function cudaBenchBinary(): string | null {
  const p = join(REPO_ROOT, "native/build/runtime/src/cuda/memlane_cuda_bench");
  return existsSync(p) ? p : null;
}

function runBench(binary: string, args: string[]): { status: number | null; stdout: string; why: string } {
  const r = spawnSync(binary, args, { encoding: "utf8", timeout: BENCH_TIMEOUT_MS });
  const why = r.error ? r.error.message : r.signal ? `killed by ${r.signal}` : (r.stderr || r.stdout || `exit ${r.status}`).trim().slice(0, 400);
  return { status: r.error || r.signal ? null : r.status, stdout: r.stdout ?? "", why };
}

/** What identifies this machine's GPUs and driver without creating a CUDA context ("" without a driver). */
export function gpuHostKey(root = "/proc/driver/nvidia"): string {
  try {
    const version = readFileSync(join(root, "version"), "utf8").split("\n")[0]!.trim();
    const gpus = existsSync(join(root, "gpus")) ? readdirSync(join(root, "gpus")).sort().map((bus) => {
      const info = readFileSync(join(root, "gpus", bus, "information"), "utf8");
      return `${bus} ${/^Model:\s*(.*)$/m.exec(info)?.[1]?.trim() ?? "?"}`;
    }) : [];
    return [version, ...gpus].join("; ");
  } catch {
    return "";
  }
}

function roundUp(bytes: number, granuleMiB: number): number {
  const g = granuleMiB * MIB;
  return Math.ceil(bytes / g) * g;
}

/** What the backend will allocate for `plan` at `maxBatch` under `switches` (no GPU needed). */
export function deviceBudget(plan: string, maxBatch: number, switches: Record<string, string | number | boolean> = {}, binary = cudaBenchBinary()): DeviceBudget {
  if (!binary) throw new Error("memlane_cuda_bench is not built (memlane-rt was built without nvcc): no CUDA device budget");
  const args = [plan, "--budget", "--batches", String(maxBatch), ...Object.entries(switches).map(([k, v]) => `${k}=${v}`)];
  const r = runBench(binary, args);
  if (r.status !== 0) throw new Error(`memlane_cuda_bench --budget ${plan}: ${r.why}`);
  return JSON.parse(r.stdout.trim()) as DeviceBudget;
}

/** The formula at the top of this file. */
export function predictDevice(b: DeviceBudget, cal: Pick<CudaDeviceCalibration, "contextMiB" | "perContextMiB" | "granuleMiB">): DeviceEstimate {
  const round = (x: number) => roundUp(x, cal.granuleMiB) / MIB;
  const weightsMiB = b.weightBytes > 0 ? round(b.weightBytes) : 0;
  const perContextAllocationsMiB = b.perContext.reduce((a, x) => a + round(x.bytes), 0);
  const loadMiB = cal.contextMiB + weightsMiB + b.contexts * (cal.perContextMiB + perContextAllocationsMiB);
  // Per-request arenas live during a run, in every context that runs one at once. fp16's upload
  // staging lives during the upload only, before any execution context exists.
  const perRequestMiB = b.contexts * b.perRequest.filter((x) => x.bytes > 0).reduce((a, x) => a + round(x.bytes), 0);
  const stagingMiB = b.uploadStagingBytes > 0 ? round(b.uploadStagingBytes) : 0;
  const peakMiB = Math.max(loadMiB + perRequestMiB, cal.contextMiB + weightsMiB + stagingMiB);
  const transientMiB = peakMiB - loadMiB;
  return {
    loadMiB,
    peakMiB,
    parts: { contextMiB: cal.contextMiB, weightsMiB, perContextFixedMiB: cal.perContextMiB, perContextAllocationsMiB, contexts: b.contexts, transientMiB },
  };
}

/** One memlane_cuda_bench run's "stage" lines (device, context, prepared), or why there are none. */
export interface Stages {
  device?: { name: string; driver: number; runtime: number };
  contextBytes?: number;
  preparedBytes?: number;
  /** Device memory after the last batch run (graphs captured, kernels loaded). */
  lastBatchBytes?: number;
  perProcess?: boolean;
  unavailable?: string;
}

export function readStages(stdout: string): Stages {
  const out: Stages = {};
  for (const line of stdout.split("\n")) {
    if (!line.startsWith("{")) continue;
    // A timed line holds non-JSON figures (inf, -nan) after a run of no requests: only its
    // device reading is taken, by pattern.
    if (line.includes('"available":true')) {
      const used = /"deviceUsedBytes":(\d+)/.exec(line);
      if (used) out.lastBatchBytes = Number(used[1]);
      continue;
    }
    if (!(line.includes('"stage"') || line.includes('"available":false'))) continue;
    const j = JSON.parse(line) as Record<string, unknown>;
    if (j.available === false) out.unavailable = String(j.reason);
    if (j.stage === "device") out.device = { name: String(j.name), driver: Number(j.driver), runtime: Number(j.runtime) };
    if (j.stage === "context") out.contextBytes = Number(j.deviceUsedBytes);
    if (j.stage === "prepared") out.preparedBytes = Number(j.deviceUsedBytes);
    if (j.stage === "context" || j.stage === "prepared") out.perProcess = (out.perProcess ?? true) && j.perProcess === true;
  }
  return out;
}

/** Loads `plan` and runs it at `batches` (5 requests each), reading its device memory by stage. */
export function measureDevice(plan: string, batches: readonly number[], switches: Record<string, string | number | boolean> = {}, binary = cudaBenchBinary()): { stages: Stages; why: string | null } {
  if (!binary) throw new Error("memlane_cuda_bench is not built (memlane-rt was built without nvcc)");
  const r = runBench(binary, [plan, "--batches", batches.join(","), "--iters", "5", "--warmup", "1", ...Object.entries(switches).map(([k, v]) => `${k}=${v}`)]);
  const stages = readStages(r.stdout);
  return { stages, why: r.status === 0 ? null : r.why };
}

/** The estimate after the load against a run's readings after prepare and after its last batch, in MiB and % (null: readings missing). */
export function compareDevice(estimate: DeviceEstimate, s: Stages): { estimateMiB: number; loadMiB: number; endMiB: number; loadErrPct: number; endErrPct: number } | null {
  if (s.preparedBytes === undefined || s.lastBatchBytes === undefined) return null;
  const loadMiB = s.preparedBytes / MIB, endMiB = s.lastBatchBytes / MIB, e = estimate.loadMiB;
  return { estimateMiB: e, loadMiB, endMiB, loadErrPct: ((e - loadMiB) / loadMiB) * 100, endErrPct: ((e - endMiB) / endMiB) * 100 };
}

function binaryStamp(binary: string): string {
  const st = statSync(binary);
  return `${st.size}-${Math.round(st.mtimeMs)}`;
}

/**
 * Measures the two fixed costs on this GPU: `probePlan` prepared with one and with two
 * execution contexts (batch 1, no request run). The per-context cost is what the second
 * context adds beyond its rounded allocations; the context is what the first reading leaves.
 * Refuses readings that are the whole device's (NVML could not name this process: other
 * processes would be in the figures) or that make no sense.
 */
export function calibrateCudaDevice(probePlan: string, binary = cudaBenchBinary()): CudaDeviceCalibration {
  if (!binary) throw new Error("memlane_cuda_bench is not built (memlane-rt was built without nvcc)");
  const readings: ProbeReading[] = [];
  for (const contexts of [1, 2]) {
    const r = runBench(binary, [probePlan, "--batches", "1", "--iters", "0", "--warmup", "0", `contexts=${contexts}`]);
    const stages = readStages(r.stdout);
    if (stages.unavailable) throw new Error(`no CUDA device to calibrate on: ${stages.unavailable}`);
    if (r.status !== 0) throw new Error(`memlane_cuda_bench ${probePlan} contexts=${contexts}: ${r.why}`);
    readings.push({ contexts, stages, budget: deviceBudget(probePlan, 1, { contexts }, binary) });
  }
  return calibrationFromProbes(readings, binaryStamp(binary), gpuHostKey());
}

/** One probe load: its contexts, what it would allocate (--budget) and what was read (its stage lines). */
export interface ProbeReading {
  contexts: number;
  budget: DeviceBudget;
  stages: Stages;
}

/**
 * The calibration's arithmetic over a probe loaded with one and with two contexts (live, from
 * calibrateCudaDevice, or from a GPU session's log, scripts/gpu-session-report.ts).
 */
export function calibrationFromProbes(readings: readonly ProbeReading[], binary: string, host: string): CudaDeviceCalibration {
  const granuleMiB = 2;
  const probes: CudaDeviceCalibration["probes"] = [];
  let device: Stages["device"];
  for (const contexts of [1, 2]) {
    const r = readings.find((x) => x.contexts === contexts);
    const s = r?.stages;
    if (!r || !s || s.contextBytes === undefined || s.preparedBytes === undefined || !s.device) {
      throw new Error(`no device reading of the probe with ${contexts} context(s)${s?.unavailable ? `: ${s.unavailable}` : ""}`);
    }
    if (!s.perProcess) throw new Error("device memory was read device-wide (NVML could not name this process, e.g. in another pid namespace): other processes' memory would enter the calibration");
    device = s.device;
    const b = r.budget;
    const allocationsMiB = (b.weightBytes > 0 ? roundUp(b.weightBytes, granuleMiB) : 0) / MIB +
      contexts * b.perContext.reduce((a, x) => a + roundUp(x.bytes, granuleMiB), 0) / MIB;
    probes.push({ contexts, contextMiB: s.contextBytes / MIB, preparedMiB: s.preparedBytes / MIB, allocationsMiB });
  }
  const [one, two] = probes as [CudaDeviceCalibration["probes"][0], CudaDeviceCalibration["probes"][0]];
  // prepared = context + allocations + contexts x fixed: the two readings give the fixed cost,
  // then the context. That context is a few MiB above the reading taken before prepare (the
  // first cuBLAS handle loads what later ones share), which is why it is not that reading.
  const perContextMiB = (two.preparedMiB - two.allocationsMiB) - (one.preparedMiB - one.allocationsMiB);
  const contextMiB = one.preparedMiB - one.allocationsMiB - perContextMiB;
  if (perContextMiB < 0 || contextMiB < one.contextMiB - granuleMiB) {
    throw new Error(`device readings do not add up (context ${contextMiB.toFixed(1)} MiB against ${one.contextMiB.toFixed(1)} read, per context ${perContextMiB.toFixed(1)}): ${JSON.stringify(probes)}`);
  }
  return {
    format: CUDA_DEVICE_CALIBRATION_FORMAT,
    key: { gpu: device!.name, driver: device!.driver, runtime: device!.runtime, binary, host },
    createdAt: new Date().toISOString(),
    contextMiB, perContextMiB, granuleMiB, probes,
  };
}

/** The calibration on a fixed small plan (the estimate's "tiny" probe, compiled in a temp dir), whatever model is being estimated. */
export async function calibrateCudaDeviceOnProbe(binary = cudaBenchBinary()): Promise<CudaDeviceCalibration> {
  const dir = mkdtempSync(join(tmpdir(), "memlane-cuda-calibration-"));
  try {
    const onnx = writeProbes(dir, PROBES.filter((p) => p.name === "tiny")).get("tiny")!;
    const plan = join(dir, "tiny.mlplan");
    await compileOnnx(onnx, plan, { verify: false });
    return calibrateCudaDevice(plan, binary);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export function cudaCalibrationPath(): string {
  return join(cacheDir(), "cuda-device-calibration.json");
}

/** The cached calibration when it was made with this binary, driver and GPUs (/proc/driver/nvidia), else null. */
export function loadCudaDeviceCalibration(binary = cudaBenchBinary(), path = cudaCalibrationPath(), host = gpuHostKey()): CudaDeviceCalibration | null {
  if (!binary || !existsSync(path)) return null;
  try {
    const c = JSON.parse(readFileSync(path, "utf8")) as CudaDeviceCalibration;
    return c.format === CUDA_DEVICE_CALIBRATION_FORMAT && c.key.binary === binaryStamp(binary) && c.key.host === host ? c : null;
  } catch {
    return null;
  }
}

export function saveCudaDeviceCalibration(c: CudaDeviceCalibration, path = cudaCalibrationPath()): string {
  mkdirSync(join(path, ".."), { recursive: true });
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify(c, null, 1));
  renameSync(tmp, path);
  return path;
}
