import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  parseSmapsRollup, parseStatus, readProcessMemory, readSmapsRollup, readStatusMemory, resetPeak,
} from "../../src/memory/proc.ts";

const SAVED = readFileSync(join(import.meta.dirname, "../fixtures/alloc/smaps_rollup.txt"), "utf8");

describe("parseSmapsRollup", () => {
  it("reads Rss, Pss, USS = Private_Clean + Private_Dirty, Swap from a saved rollup", () => {
    expect(parseSmapsRollup(SAVED)).toEqual({ rssKiB: 412340, pssKiB: 318217, ussKiB: 19428 + 290000, swapKiB: 2048 });
  });
  it("does not confuse Pss_Dirty/SwapPss with Pss/Swap", () => {
    const r = parseSmapsRollup(SAVED)!;
    expect(r.pssKiB).not.toBe(290112);
    expect(r.swapKiB).toBe(2048);
  });
  it("is null for text that is not a rollup (missing fields)", () => {
    expect(parseSmapsRollup("")).toBeNull();
    expect(parseSmapsRollup("Rss: 10 kB\nPss: 5 kB\n")).toBeNull();
  });
});

describe("parseStatus", () => {
  it("reads VmRSS and VmHWM", () => {
    const text = "Name:\tpython3\nVmPeak:\t  900000 kB\nVmHWM:\t  523456 kB\nVmRSS:\t  412340 kB\nThreads:\t8\n";
    expect(parseStatus(text)).toEqual({ vmRssKiB: 412340, hwmKiB: 523456 });
  });
  it("is null for a zombie (no Vm lines)", () => {
    expect(parseStatus("Name:\tdefunct\nState:\tZ (zombie)\n")).toBeNull();
  });
});

describe("reading real /proc", () => {
  it("reads this process: plausible, consistent counters", async () => {
    const r = await readProcessMemory("self");
    expect(r).not.toBeNull();
    const m = r!;
    expect(m.rssKiB).toBeGreaterThan(10_000); // a Node process is well above 10 MiB
    expect(m.ussKiB).toBeLessThanOrEqual(m.pssKiB);
    expect(m.pssKiB).toBeLessThanOrEqual(m.rssKiB);
    expect(m.hwmKiB).toBeGreaterThanOrEqual(m.rssKiB);
    const [rollup, status] = await Promise.all([readSmapsRollup(process.pid), readStatusMemory(process.pid)]);
    expect(Math.abs(rollup!.rssKiB - status!.vmRssKiB)).toBeLessThan(0.1 * status!.vmRssKiB);
  });
  it("resolves null (never throws) for a pid that does not exist", async () => {
    expect(await readProcessMemory(2 ** 22 + 12345)).toBeNull();
    expect(await resetPeak(2 ** 22 + 12345)).toBe(false);
  });
  it("resetPeak sets VmHWM to the current RSS; a later allocation raises it", async () => {
    expect(await resetPeak("self")).toBe(true);
    const reset = (await readStatusMemory("self"))!;
    expect(reset.hwmKiB - reset.vmRssKiB).toBeLessThan(8 * 1024);
    const big = Buffer.allocUnsafe(64 * 2 ** 20).fill(7);
    const after = (await readStatusMemory("self"))!;
    expect(after.hwmKiB - reset.vmRssKiB).toBeGreaterThan(60 * 1024);
    expect(big[0]).toBe(7);
  });
});
