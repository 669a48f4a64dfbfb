// Accuracy of the memory sampler and phase accounting against a real process that allocates
// known amounts (test/fixtures/alloc/alloc.c, compiled here with cc).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AllocProcess, outsideMark as mark } from "../fixtures/alloc/alloc-process.ts";
import { readProcessMemory } from "../../src/memory/proc.ts";
import { MemorySampler, type Sample } from "../../src/memory/sampler.ts";
import { phaseFigures } from "../../src/memory/phases.ts";

const MiB = 1024; // KiB per MiB
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const within = (actualKiB: number, expectedMiB: number, tol = 0.02) =>
  expect(Math.abs(actualKiB - expectedMiB * MiB)).toBeLessThanOrEqual(expectedMiB * MiB * tol);

/** The latest sample that read smaps_rollup (USS). */
const latest = (samples: Sample[]): Sample => samples.filter((s) => s.ussKiB !== null).at(-1)!;

describe("memory sampler on a process allocating known amounts", () => {
  let proc: AllocProcess;
  // Every tick reads smaps_rollup here (budget 1): these tests compare sampled USS with marks.
  const sampler = new MemorySampler({ periodMs: 20, rollupBudget: 1 });

  beforeAll(async () => {
    proc = await AllocProcess.start();
    sampler.track(proc.pid, "alloc");
    sampler.start();
    // Wait for samples rather than a fixed time: on a loaded machine the first ticks come late.
    for (let waited = 0; sampler.samples(proc.pid).length < 8 && waited < 10_000; waited += 25) await sleep(25);
  });

  afterAll(async () => {
    await sampler.stop();
    proc?.dispose();
  });

  it("samples at >= 20 Hz with the GPU marked unknown (no probe)", () => {
    const s = sampler.samples(proc.pid);
    expect(s.length).toBeGreaterThanOrEqual(8);
    // The median gap, not the mean: one tick delayed by a busy machine is not the sampler's rate.
    const gaps = s.slice(1).map((x, i) => x.tMs - s[i]!.tMs).sort((a, b) => a - b);
    expect(gaps[Math.floor(gaps.length / 2)]!).toBeLessThanOrEqual(50);
    expect(s.every((x) => x.gpuKiB === null)).toBe(true);
    expect(sampler.gpuStatus()).toEqual({ ok: false, reason: "no GPU probe configured" });
  });

  it("measures 64 MiB then 192 MiB within 2 % (RSS and USS, sampled and marked)", async () => {
    for (const mib of [64, 192]) {
      const before = latest(sampler.samples(proc.pid));
      const start = await mark(proc.pid, `alloc-${mib}`, "start");
      await proc.send(`alloc ${mib}`);
      await sleep(120);
      const end = await mark(proc.pid, `alloc-${mib}`, "end");
      const after = latest(sampler.samples(proc.pid));
      within(after.rssKiB - before.rssKiB, mib);
      within(after.ussKiB! - before.ussKiB!, mib);
      const f = phaseFigures(start, end, sampler.samples(proc.pid));
      within(f.deltaRssKiB, mib);
      within(f.deltaUssKiB, mib);
      within(f.peakRssKiB - start.memory.rssKiB, mib);
      expect(f.samples).toBeGreaterThanOrEqual(3);
    }
  });

  it("catches a transient 128 MiB spike freed before the phase ends (samples and HWM)", async () => {
    const start = await mark(proc.pid, "spike", "start");
    await proc.send("spike 128 300");
    await sleep(60);
    const end = await mark(proc.pid, "spike", "end");
    const samples = sampler.samples(proc.pid, start.tMs, end.tMs);
    const f = phaseFigures(start, end, samples);
    expect(Math.abs(f.deltaRssKiB)).toBeLessThan(2 * MiB);
    within(f.peakRssKiB - start.memory.rssKiB, 128);
    // The 300 ms spike is long enough for the 20 ms sampler alone to see it.
    const sampledPeak = Math.max(...samples.map((s) => s.rssKiB));
    within(sampledPeak - start.memory.rssKiB, 128);
    // And VmHWM (reset at the start) holds it independently of sampling.
    within(end.memory.hwmKiB - start.memory.rssKiB, 128);
  });

  it("catches a 2 ms spike the sampler misses through VmHWM", async () => {
    const start = await mark(proc.pid, "blip", "start");
    await proc.send("spike 128 2");
    const end = await mark(proc.pid, "blip", "end");
    const f = phaseFigures(start, end, sampler.samples(proc.pid));
    within(f.peakRssKiB - start.memory.rssKiB, 128);
    expect(["hwm", "sample"]).toContain(f.peakSource);
  });

  it("frees to baseline, then records the exit without throwing", async () => {
    await sleep(60); // let a sample taken during the previous spike be superseded
    const before = latest(sampler.samples(proc.pid));
    await proc.send("free");
    await sleep(100);
    within(before.rssKiB - latest(sampler.samples(proc.pid)).rssKiB, 256);
    const exited = new Promise((r) => proc.child.once("exit", r));
    await proc.send("quit");
    await exited;
    await sleep(100);
    expect(sampler.snapshot().find((t) => t.pid === proc.pid)?.exited).toBe(true);
    expect(await readProcessMemory(proc.pid)).toBeNull();
  });
});
