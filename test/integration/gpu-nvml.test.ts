// NVML on a real GPU. Runs in full where a driver and a device are present; elsewhere it
// prints why it skipped.
import { describe, expect, it } from "vitest";
import { createGpuProbe } from "../../src/memory/gpu.ts";

const probe = createGpuProbe();
const state = probe.available();
if (!state.ok) console.log(`[gpu-nvml] SKIPPED: no GPU available (${state.reason})`);

describe.skipIf(!state.ok)("NVML on a GPU", () => {
  it("lists devices with consistent totals", () => {
    const devices = probe.devices();
    expect(devices.length).toBeGreaterThan(0);
    for (const d of devices) {
      expect(d.name.length).toBeGreaterThan(0);
      expect(d.totalBytes).toBeGreaterThan(0);
      expect(d.usedBytes + d.freeBytes).toBeLessThanOrEqual(d.totalBytes * 1.01);
    }
  });

  it("this Node process holds no CUDA context: 0 bytes (or unknown inside a pid namespace)", () => {
    const bytes = probe.processUsedBytes(process.pid);
    expect(bytes === 0 || bytes === null).toBe(true);
    for (const p of probe.processes()) {
      expect(p.usedBytes === null || p.usedBytes >= 0).toBe(true);
    }
  });
});
