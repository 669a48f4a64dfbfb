/**
 * `memlane estimate pipeline.ts`: loads the pipeline module the way `memlane run` does
 * (never runs it), estimates every stage (src/estimate/pipeline-estimate.ts) and prints
 * them per stage, runtime and phase, with the concurrent peak the scheduler's rules allow.
 */
import type { Calibration } from "../estimate/calibration.ts";
import { estimatePipeline } from "../estimate/pipeline-estimate.ts";
import { torchCalibration } from "../estimate/torch-calibration.ts";
import { parseSizeMiB } from "../memory/size.ts";
import { availableMiB } from "../pipeline/memory-plan.ts";
import { num, textTable } from "../report/format.ts";
import { UsageError } from "./args.ts";
import type { Io } from "./io.ts";

export const PIPELINE_FILE = /\.(ts|mts|cts|js|mjs)$/;

/**
 * A pipeline's stages on the device: not estimated (memlane-rt's device estimate is per model:
 * `memlane estimate model.onnx --device cuda`; PyTorch's caching allocator on CUDA is not modelled).
 */
export function deviceLine(device: string): string {
  if (device !== "cuda") return "device: none (cpu)";
  return "device: not estimated for a pipeline's stages (memlane-rt's device memory: memlane estimate <model.onnx> --device cuda; PyTorch's CUDA caching allocator is not modelled)";
}

export async function estimatePipelineCommand(file: string, cal: Calibration, flags: Record<string, unknown>, io: Io): Promise<number> {
  const { loadPipeline } = await import("./commands/run.ts");
  const pipe = await loadPipeline(file);
  let budget = availableMiB();
  if (typeof flags["memory-budget"] === "string") {
    try {
      budget = parseSizeMiB(flags["memory-budget"]);
    } catch (err) {
      throw new UsageError(`--memory-budget: ${(err as Error).message}`, "--memory-budget");
    }
  }
  const torch = await torchCalibration((l) => io.err(l), flags.calibrate === true);
  const e = await estimatePipeline(pipe, cal, torch, budget);
  const device = flags.device as string;
  if (flags.json) {
    io.out(JSON.stringify({ ...e, device: deviceLine(device), budgetMiB: budget, calibration: { onnx: cal.createdAt, torch: torch.createdAt } }, null, 1));
    return 0;
  }
  io.out(`memlane estimate ${file}: pipeline "${e.pipeline}", ${e.stages.length} stages (host RAM, MiB; nothing was run)`);
  io.out("");
  io.out(textTable(["stage", "runtime", "model", "predicted peak", "naive"], e.stages.map((s) => [
    s.stage, s.runtime ?? "—", s.model ?? "—", s.peakMiB === null ? "not estimated" : num(s.peakMiB), s.naiveMiB === null ? "—" : num(s.naiveMiB),
  ])));
  io.out("");
  for (const s of e.stages) io.out(`  ${s.stage}: ${s.peakMiB === null ? (s.why ?? "not estimated") : s.parts}`);
  for (const s of e.stages) {
    if (s.phases.length < 2) continue;
    io.out("");
    io.out(`${s.stage} (${s.runtime}, ${s.model}):`);
    io.out(textTable(["phase", "end RSS", "peak RSS"], s.phases.map((p) => [p.phase, num(p.rss), num(p.peak)])));
  }
  io.out("");
  const c = e.concurrent;
  io.out(`predicted concurrent peak (-j ${pipe.options.concurrency}, budget ${num(budget)} MiB; exclusive stages alone): ${c.upperBound ? "at most " : ""}${num(c.peakMiB)} MiB` +
    (c.upperBound ? ` (upper bound: too many stage sets to search; worst found: ${c.stages.join(" + ")})` : c.stages.length ? ` (${c.stages.join(" + ")})` : "") +
    (c.unestimatedBeside.length ? `; not estimated, may run beside: ${c.unestimatedBeside.join(", ")}` : ""));
  io.out(deviceLine(device));
  io.out(`calibrated ${cal.createdAt} (ONNX runtimes), ${torch.createdAt} (PyTorch) on ${cal.key.cpu}`);
  if (cal.sharing) io.out(`  while ${cal.sharing}: its USS and PSS figures are low by the pages they shared; memlane estimate --calibrate on a quiet machine redoes it`);
  return 0;
}
