/**
 * A finished run's device memory on CUDA, estimated beside measured: for each memlane-rt
 * benchmark that ran on CUDA, cuda-device.ts's formula for the plan the run compiled, at the
 * run's largest batch with the default switches (what `infer.native` loads), against the
 * process's GPU memory at the end of `model-load` (the load), at the end of the run (graphs
 * captured, the eval set run) and its highest sample. The estimate needs the CUDA build's
 * `memlane_cuda_bench --budget` (no GPU) and this GPU's cached calibration (`memlane estimate
 * model.onnx --device cuda`); without either the check says why, never a number. Only
 * memlane-rt is estimated on the device: docs/memory.md, "Device memory (CUDA)".
 */
import { Phase } from "../transport/protocol.ts";
import type { RuntimeReport } from "../report/schema.ts";
import {
  cudaBenchBinary, type CudaDeviceCalibration, deviceBudget, type DeviceEstimate, loadCudaDeviceCalibration, predictDevice,
} from "./cuda-device.ts";

export interface DeviceEstimateCheck {
  /** The report row (`native`) and the benchmark stage it came from. */
  runtime: string;
  stage: string;
  /** The batch the plan was loaded for (the run's largest). */
  maxBatch: number;
  /** null with `reason`: no CUDA build, no calibration of this GPU, a budget the backend refused. */
  estimate: DeviceEstimate | null;
  reason: string | null;
  /** Where the calibration was taken: "2026-12-04T... on NVIDIA H200, driver 13000"; null without one. */
  calibration: string | null;
  /** This process's GPU MiB at the end of model-load and of its last phase, and its highest sample; null where not measured. */
  measured: { loadMiB: number | null; endMiB: number | null; peakMiB: number | null };
  /** (estimate − measured) / measured, %: the load estimate against the first two, the peak estimate against the peak. */
  loadErrorPct: number | null;
  endErrorPct: number | null;
  peakErrorPct: number | null;
}

const errPct = (estimate: number, measured: number | null): number | null =>
  measured === null || !(measured > 0) ? null : ((estimate - measured) / measured) * 100;

/** The row's GPU readings: end of model-load, end of its last phase with one, highest sample. */
export function measuredDevice(row: Pick<RuntimeReport, "phases">): DeviceEstimateCheck["measured"] {
  const withGpu = row.phases.filter((p) => p.gpuMiB !== null && Number.isFinite(p.gpuMiB));
  const peaks = row.phases.map((p) => p.peakGpuMiB).filter((x): x is number => x !== null && Number.isFinite(x));
  return {
    loadMiB: withGpu.find((p) => p.name === Phase.MODEL_LOAD)?.gpuMiB ?? null,
    endMiB: withGpu.at(-1)?.gpuMiB ?? null,
    peakMiB: peaks.length > 0 ? Math.max(...peaks) : null,
  };
}

/** The estimate against a row's readings (the arithmetic of the check, apart from where the estimate came from). */
export function deviceCheckOf(base: Pick<DeviceEstimateCheck, "runtime" | "stage" | "maxBatch">, row: Pick<RuntimeReport, "phases">,
  estimate: DeviceEstimate | null, reason: string | null, calibration: CudaDeviceCalibration | null): DeviceEstimateCheck {
  const measured = measuredDevice(row);
  return {
    ...base,
    estimate,
    reason,
    calibration: calibration ? `${calibration.createdAt} on ${calibration.key.gpu}, driver ${calibration.key.driver}` : null,
    measured,
    loadErrorPct: estimate ? errPct(estimate.loadMiB, measured.loadMiB) : null,
    endErrorPct: estimate ? errPct(estimate.loadMiB, measured.endMiB) : null,
    peakErrorPct: estimate ? errPct(estimate.peakMiB, measured.peakMiB) : null,
  };
}

/** Whether a report row ran on a CUDA device ("cuda", "cuda:0"). */
export const ranOnCuda = (row: Pick<RuntimeReport, "device">): boolean => /^cuda(:\d+)?$/.test(row.device);

/**
 * The check for one memlane-rt row that ran on CUDA: `plan` as the run compiled it, loaded at
 * `maxBatch`. `binary` and `calibration` are the CUDA bench and this GPU's cached calibration
 * (parameters for the tests: the defaults are what a run finds on this machine).
 */
export function deviceEstimateCheck(stage: string, row: RuntimeReport, plan: string, maxBatch: number,
  binary: string | null = cudaBenchBinary(), calibration: CudaDeviceCalibration | null = binary ? loadCudaDeviceCalibration(binary) : null): DeviceEstimateCheck {
  const base = { runtime: row.name, stage, maxBatch };
  if (!binary) return deviceCheckOf(base, row, null, "memlane-rt was built without nvcc (no memlane_cuda_bench to read the plan's device budget)", null);
  if (!calibration)
    return deviceCheckOf(base, row, null, "no device calibration of this GPU is cached: run `memlane estimate <model.onnx> --device cuda` once on this machine", null);
  try {
    return deviceCheckOf(base, row, predictDevice(deviceBudget(plan, maxBatch, {}, binary), calibration), null, calibration);
  } catch (err) {
    return deviceCheckOf(base, row, null, (err as Error).message.split("\n")[0]!, calibration);
  }
}
