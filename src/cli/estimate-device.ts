/**
 * `memlane estimate model.onnx --device cuda`: memlane-rt's device memory (src/estimate/
 * cuda-device.ts). What the backend will allocate needs no GPU and is always printed; the
 * total needs this GPU's calibration (cached; made here when a GPU answers), else it says why
 * there is none. The ONNX Runtime builds here have no CUDA provider, and a pipeline's
 * PyTorch stages are not estimated on the device: both are said, never given a number.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { compileOnnx } from "../compiler/index.ts";
import {
  calibrateCudaDeviceOnProbe, cudaBenchBinary, type CudaDeviceCalibration, deviceBudget, type DeviceBudget, type DeviceEstimate,
  loadCudaDeviceCalibration, predictDevice, saveCudaDeviceCalibration,
} from "../estimate/cuda-device.ts";
import { num } from "../report/format.ts";
import { shown } from "./outcome.ts";

const MIB = 1024 * 1024;

export interface DeviceSection {
  /** What memlane-rt would allocate (no GPU needed), or null with `why`. */
  budget: DeviceBudget | null;
  calibration: CudaDeviceCalibration | null;
  native: DeviceEstimate | null;
  /** Why there is no total (no budget, no GPU to calibrate on); null with native not asked for. */
  why: string | null;
  others: Record<string, string>;
}

/** The device section for an ONNX model; `calibrate` redoes the GPU's calibration. */
export async function deviceSection(onnx: string, inputShapes: Record<string, number[]> | undefined, maxBatch: number, runtimes: readonly string[], calibrate: boolean, log: (l: string) => void): Promise<DeviceSection> {
  const cpuOnly: Record<string, string> = {
    "python-ort": "not on the device: the onnxruntime in the venv is the CPU build (no CUDA execution provider)",
    "node-ort": "not on the device: onnxruntime-node is installed without its CUDA provider",
  };
  const others = Object.fromEntries(Object.entries(cpuOnly).filter(([r]) => runtimes.includes(r)));
  const binary = cudaBenchBinary();
  if (!runtimes.includes("native")) return { budget: null, calibration: null, native: null, why: null, others };
  if (!binary) return { budget: null, calibration: null, native: null, why: "memlane-rt was built without nvcc (no CUDA backend)", others };
  const dir = mkdtempSync(join(tmpdir(), "memlane-estimate-device-"));
  try {
    const plan = join(dir, "m.mlplan");
    try {
      await compileOnnx(onnx, plan, { verify: false, ...(inputShapes ? { inputShapes } : {}) });
    } catch (err) {
      return { budget: null, calibration: null, native: null, why: `memlane's compiler refused the model: ${(err as Error).message.split("\n")[0]}`, others };
    }
    let budget: DeviceBudget;
    try {
      budget = deviceBudget(plan, maxBatch, {}, binary);
    } catch (err) {  // the CUDA backend refuses the plan (an op it lacks), or the binary failed
      return { budget: null, calibration: null, native: null, why: (err as Error).message, others };
    }
    let calibration = calibrate ? null : loadCudaDeviceCalibration(binary);
    let why: string | null = null;
    if (!calibration) {
      if (!existsSync("/dev/nvidiactl") && !existsSync("/dev/nvidia0")) why = "no CUDA device here (no /dev/nvidia*), so no calibration of one";
      else {
        try {
          log("memlane estimate: calibrating this GPU's device memory (two short memlane-rt loads of a tiny plan)");
          calibration = await calibrateCudaDeviceOnProbe(binary);
          log(`memlane estimate: device calibration cached in ${shown(saveCudaDeviceCalibration(calibration))}`);
        } catch (err) {
          why = (err as Error).message;
        }
      }
    }
    return { budget, calibration, native: calibration ? predictDevice(budget, calibration) : null, why, others };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export function printDeviceSection(s: DeviceSection, out: (l: string) => void): void {
  out("");
  if (!s.budget) {
    if (s.why) out(`device (CUDA), native: unavailable (${s.why})`);
  } else {
    const b = s.budget;
    const per = b.perContext.map((a) => `${a.name} ${num(a.bytes / MIB)}`).join(", ");
    out(`device (CUDA), native allocations at batch ${b.maxBatch} (MiB, from the plan): weights ${num(b.weightBytes / MIB)}; ` +
      `per execution context (${b.contexts}): ${per}` +
      (b.uploadStagingBytes > 0 ? `; upload staging ${num(b.uploadStagingBytes / MIB)} during the load` : ""));
    if (s.native && s.calibration) {
      const p = s.native.parts;
      out(`device (CUDA), native: ${num(s.native.loadMiB)} MiB after the load, peak ${num(s.native.peakMiB)} MiB ` +
        `(context ${num(p.contextMiB)} + weights ${num(p.weightsMiB)} + ${p.contexts} x (${num(p.perContextFixedMiB)} fixed + ${num(p.perContextAllocationsMiB)} allocated), ` +
        `each allocation rounded to ${s.calibration.granuleMiB} MiB; calibrated ${s.calibration.createdAt} on ${s.calibration.key.gpu}, driver ${s.calibration.key.driver})`);
    } else {
      out(`device (CUDA), native: unavailable (${s.why}); the total adds the context and each context's fixed cost, measured on the GPU`);
    }
  }
  for (const [r, why] of Object.entries(s.others)) out(`device (CUDA), ${r}: ${why}`);
}
