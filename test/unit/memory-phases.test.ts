import { describe, expect, it } from "vitest";
import type { MemoryReading } from "../../src/transport/protocol.ts";
import { combinePhases, measurePhase, phaseFigures, PhaseRecorder, type PhaseMarkInput } from "../../src/memory/phases.ts";
import type { Sample } from "../../src/memory/sampler.ts";

const mem = (rssKiB: number, ussKiB: number, hwmKiB = rssKiB, gpuKiB?: number): MemoryReading => ({
  rssKiB, pssKiB: ussKiB + 1000, ussKiB, swapKiB: 0, hwmKiB, ...(gpuKiB === undefined ? {} : { gpuKiB }),
});
const mark = (name: string, which: "start" | "end", tMs: number, memory: MemoryReading): PhaseMarkInput => ({ name, mark: which, tMs, memory });
const sample = (tMs: number, rssKiB: number, gpuKiB: number | null = null): Sample => ({
  tMs, rssKiB, pssKiB: rssKiB, ussKiB: rssKiB, swapKiB: 0, hwmKiB: rssKiB, gpuKiB,
});

describe("phaseFigures", () => {
  const start = mark("model-load", "start", 1000, mem(100_000, 80_000));
  it("increment = end - start; ms from the marks; peak from HWM when it is highest", () => {
    const f = phaseFigures(start, mark("model-load", "end", 1500, mem(160_000, 130_000, 210_000)), [sample(1200, 190_000)]);
    expect(f).toMatchObject({
      name: "model-load", ms: 500, deltaRssKiB: 60_000, deltaUssKiB: 50_000, deltaPssKiB: 50_000,
      peakRssKiB: 210_000, peakSource: "hwm", samples: 1,
    });
  });
  it("peak from a sample above HWM (HWM reset refused), ignoring samples outside the phase", () => {
    const f = phaseFigures(start, mark("model-load", "end", 1500, mem(160_000, 130_000)), [
      sample(900, 999_000), sample(1100, 240_000), sample(1400, 170_000), sample(1600, 999_000),
    ]);
    expect(f).toMatchObject({ peakRssKiB: 240_000, peakSource: "sample", samples: 2 });
  });
  it("peak is the end reading when nothing was higher; a freeing phase has a negative increment", () => {
    const f = phaseFigures(start, mark("model-load", "end", 1500, mem(60_000, 40_000, 60_000)), []);
    expect(f).toMatchObject({ peakRssKiB: 60_000, peakSource: "end", deltaRssKiB: -40_000, samples: 0 });
  });
  it("GPU from the marks when the worker sent it, else the nearest sample; null when unknown", () => {
    const withMarks = phaseFigures(mark("arena", "start", 0, mem(1, 1, 1, 1000)), mark("arena", "end", 100, mem(1, 1, 1, 5000)), [sample(50, 1, 9000)]);
    expect(withMarks).toMatchObject({ gpuStartKiB: 1000, gpuEndKiB: 5000, gpuPeakKiB: 9000 });
    const fromSamples = phaseFigures(mark("arena", "start", 0, mem(1, 1)), mark("arena", "end", 100, mem(1, 1)), [sample(-10, 1, 700), sample(110, 1, 3000)]);
    expect(fromSamples).toMatchObject({ gpuStartKiB: 700, gpuEndKiB: 3000, gpuPeakKiB: 3000 });
    const none = phaseFigures(mark("arena", "start", 0, mem(1, 1)), mark("arena", "end", 100, mem(1, 1)), [sample(50, 1)]);
    expect(none).toMatchObject({ gpuStartKiB: null, gpuEndKiB: null, gpuPeakKiB: null });
  });
});

describe("combinePhases", () => {
  it("pairs marks by name in order, drops a start without an end, sorts by start", () => {
    const marks = [
      mark("import", "start", 0, mem(10, 10)), mark("import", "end", 10, mem(20, 15)),
      mark("epoch-1", "start", 10, mem(20, 15)), mark("epoch-1", "end", 30, mem(25, 18)),
      mark("epoch-2", "start", 30, mem(25, 18)),
    ];
    const out = combinePhases(marks, []);
    expect(out.map((p) => [p.name, p.deltaRssKiB])).toEqual([["import", 10], ["epoch-1", 5]]);
  });
});

describe("PhaseRecorder (the orchestrator's own phases)", () => {
  it("measures a 64 MiB allocation in this process", async () => {
    let keep: Buffer | null = null;
    const { marks } = await measurePhase("model-load", () => {
      keep = Buffer.allocUnsafe(64 * 2 ** 20).fill(3);
    });
    const [f] = combinePhases(marks, []);
    expect(keep).not.toBeNull();
    expect(f!.deltaRssKiB).toBeGreaterThan(60 * 1024);
    expect(f!.deltaRssKiB).toBeLessThan(80 * 1024);
    expect(f!.peakRssKiB).toBeGreaterThanOrEqual(f!.end.rssKiB);
  });
  it("refuses overlapping phases and records the end when fn throws", async () => {
    const rec = new PhaseRecorder();
    await expect(rec.measure("import", () => { throw new Error("boom"); })).rejects.toThrow("boom");
    expect(rec.marks.map((m) => m.mark)).toEqual(["start", "end"]);
    await rec.begin("runtime-create");
    await expect(rec.begin("model-load")).rejects.toThrow(/cannot overlap/);
    await rec.end("runtime-create");
  });
});
