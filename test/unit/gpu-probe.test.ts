// The NVML probe without a GPU: the addon loads, a missing library reads as unavailable
// with its reason (never zeros), and a stand-in libnvidia-ml (native/addon/testing/
// fake_nvml.c) drives the process-listing code paths.
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { DEFAULT_ADDON_PATH, loadAddon } from "../../src/memory/gpu-addon.ts";
import { createGpuProbe } from "../../src/memory/gpu.ts";

const FAKE_NVML = path.join(path.dirname(DEFAULT_ADDON_PATH), "libmemlane_fake_nvml.so");
const FAKE_NVML_FOREIGN = path.join(path.dirname(DEFAULT_ADDON_PATH), "libmemlane_fake_nvml_foreign.so");

function systemHasNvml(): boolean {
  try {
    return execFileSync("ldconfig", ["-p"], { encoding: "utf8" }).includes("libnvidia-ml.so.1");
  } catch {
    return false;
  }
}

describe("memlane addon", () => {
  it("loads and registers GpuProbe", () => {
    const addon = loadAddon();
    expect(addon.classes).toContain("GpuProbe");
    expect(typeof addon.GpuProbe).toBe("function");
  });

  it("names the path and the fix when the addon is missing", () => {
    expect(() => loadAddon("/nonexistent/memlane.node")).toThrow(
      /\/nonexistent\/memlane\.node.*npm run bootstrap/,
    );
  });
});

describe("createGpuProbe without NVML", () => {
  it("reports unavailable with the reason, and null rather than 0 bytes", () => {
    const probe = createGpuProbe({ library: "/nonexistent/libnvidia-ml.so.1" });
    expect(probe.available()).toEqual({ ok: false, reason: "/nonexistent/libnvidia-ml.so.1 not found" });
    expect(probe.processUsedBytes(process.pid)).toBeNull();
    expect(probe.devices()).toEqual([]);
  });

  it("default library: unavailable with 'libnvidia-ml.so.1 not found' where no driver is installed", () => {
    const probe = createGpuProbe();
    const a = probe.available();
    if (systemHasNvml()) {
      console.log(`[gpu-probe] libnvidia-ml.so.1 present: available=${a.ok} ${a.reason ?? ""}`);
      if (!a.ok) expect(a.reason).toMatch(/^nvmlInit failed: /);
      return;
    }
    expect(a).toEqual({ ok: false, reason: "libnvidia-ml.so.1 not found" });
    expect(probe.processUsedBytes(process.pid)).toBeNull();
  });

  it("rejects a bad option with its name", () => {
    expect(() => createGpuProbe({ cacheMs: -1 })).toThrow(/options\.cacheMs/);
  });
});

describe.skipIf(!existsSync(FAKE_NVML))("createGpuProbe with a stand-in NVML", () => {
  it("lists devices and sums a C+G process once", () => {
    const probe = createGpuProbe({ library: FAKE_NVML, cacheMs: 0 });
    expect(probe.available()).toEqual({ ok: true });
    expect(probe.info().driverVersion).toBe("0.0-fake");
    const [dev] = probe.devices();
    expect(dev).toMatchObject({ index: 0, name: "Fake GPU", totalBytes: 16 * 2 ** 30, usedBytes: 2 ** 30 });
    // the stand-in lists its caller: compute (_v3) and graphics (_v2 fallback), 300 MiB each, counted once
    expect(probe.processes().filter((p) => p.pid === process.pid)).toHaveLength(2);
    expect(probe.processUsedBytes(process.pid)).toBe(300 * 2 ** 20);
    // pid 1 is listed without an amount (NVML_VALUE_NOT_AVAILABLE): unknown, not 0
    expect(probe.processUsedBytes(1)).toBeNull();
  });

  it("an unlisted pid is 0 when NVML's pids are ours", () => {
    const probe = createGpuProbe({ library: FAKE_NVML, cacheMs: 0 });
    expect(probe.processUsedBytes(2 ** 22 + 7)).toBe(0);
  });

  it("an unlisted pid is unknown when NVML lists pids from another namespace", () => {
    const probe = createGpuProbe({ library: FAKE_NVML_FOREIGN, cacheMs: 0 }); // lists a pid absent from our /proc
    expect(probe.processUsedBytes(process.pid)).toBeNull();
  });
});
