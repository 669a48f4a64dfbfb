/**
 * The cache-line round trip between the first two CPUs this process may use, measured by
 * native/runtime/tools/core_latency.cc (memlane-core-latency), for bench:zoo to say which of
 * its measurements ran on a split placement: on a cloud VM the hypervisor moves the vCPUs,
 * and on the 2-vCPU development machine the round trip is about 55 ns most of the time and about
 * 320 ns for stretches of seconds, where a 2-thread run takes 1.3-2.2x as long (ONNX Runtime's
 * 1.03-1.5x; docs/native-cpu.md, "Two threads on a split placement": stores to lines the other
 * core has read cost 4-6x more there, which the tool's second line measures).
 */
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "../src/workers/specs.ts";

/**
 * Above this round trip the two CPUs share no cache (the AMD EPYC's clusters: 50-70 and 300-370
 * ns). An Intel Xeon's two vCPUs on two cores of its mesh read mostly 125-145 here, and two threads gain
 * there as on a shared placement, so they are not marked (memlane-rt's ThreadChoice draws the
 * same line, native/runtime/src/cpu/thread_choice.h).
 */
export const SPLIT_PLACEMENT_NS = 200;

const TOOL = join(REPO_ROOT, "native/build/runtime/memlane-core-latency");

/** The round trip in ns; null where the tool is not built, the process has one CPU, or it failed. */
export function coreRoundTripNs(): number | null {
  if (!existsSync(TOOL)) return null;
  try {
    const out = execFileSync(TOOL, ["50000"], { encoding: "utf8", timeout: 10_000, stdio: ["ignore", "pipe", "ignore"] });
    const m = /round trip ([\d.]+) ns/.exec(out);
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}
