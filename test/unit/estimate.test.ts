// The estimate's pieces without workers: the fit recovers known slopes, the model terms are
// read from real ONNX files (the probes), native's arena term follows its chunking rule, and
// the calibration cache round-trips and refuses torn or foreign files.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { calibrationKey, calibrationMismatch, calibrationPath, loadCalibration, saveCalibration } from "../../src/estimate/cache.ts";
import { CALIBRATION_FORMAT, type Calibration, fitModels, measuredHeldMiB } from "../../src/estimate/calibration.ts";
import { replayOrtArena } from "../../src/estimate/ort-arena.ts";
import { heldEstimateMiB, medianOrNull, rangeOrNull } from "../../src/estimate/ort-load.ts";
import { FEATURE_NAMES, fitLinear, predict } from "../../src/estimate/fit.ts";
import { features, loadProbesFor, modelTerms, NATIVE_CHUNK_ARENA_BYTES } from "../../src/estimate/model-terms.ts";
import { NODE_DEAD_OUTPUT_LIMIT_MIB, nodeDeadOutputKept, nodeDeadOutputKeptMiB, nodeDeadOutputMiB, nodePeakBeyondEndMiB, ortLoadMmapThresholdMiB, timedRequestsMmapThresholdMiB } from "../../src/estimate/node-ort-outputs.ts";
import { compareWithMeasured, estimateRuntime, naiveMiB } from "../../src/estimate/predict.ts";
import { PROBES, writeProbes } from "../../src/estimate/probe-models.ts";
import { init, node, writeModel } from "./compiler-onnx-builder.ts";

const dir = mkdtempSync(join(tmpdir(), "memlane-estimate-unit-"));
const saved = process.env.MEMLANE_CACHE_DIR;
beforeAll(() => void (process.env.MEMLANE_CACHE_DIR = join(dir, "cache")));
afterAll(() => {
  if (saved === undefined) delete process.env.MEMLANE_CACHE_DIR;
  else process.env.MEMLANE_CACHE_DIR = saved;
  rmSync(dir, { recursive: true, force: true });
});

const f = (w: number, cw: number, a: number, e: number, o = 0, h = 0) => ({ weightMiB: w, convWeightMiB: cw, activationMiB: a, evalMiB: e, evalOutputMiB: o, heldMiB: h, largestBatchMiB: 0, loadMiB: 0, nativeReleasedMiB: 0, deadOutputMiB: 0, outputBufferMiB: 0, nativeWorkspaceMiB: 0, ortFirstRequestMiB: 0, loadTransientMiB: 0, deadOutputKeptMiB: 0, firstRequestMiB: 0, mappedWeightMiB: 0, socketEvalMiB: 0 });
/** An ORT runtime's features: the weights are what its load left in use (Features.loadMiB, W's slope 0 for it). */
const ortLoaded = <T extends ReturnType<typeof f>>(x: T): T => ({ ...x, loadMiB: x.weightMiB });
// Probe-like features that move one term at a time (so the fit has one answer).

describe("fitLinear", () => {
  it("recovers intercept and slopes from noiseless probes", () => {
    const truth = (x: ReturnType<typeof f>) => 50 + 1.0 * x.weightMiB + 2.0 * x.convWeightMiB + 1.5 * x.activationMiB + 0.8 * x.evalMiB + 1.2 * x.evalOutputMiB;
    const xs = [f(0, 0, 0, 0), f(48, 0, 0, 1), f(36, 36, 0, 1), f(0, 0, 32, 3), f(0, 0, 8, 128), f(16, 1, 8, 1, 8), f(4, 0, 0, 1, 64)];
    const fit = fitLinear(xs.map((x) => ({ features: x, value: truth(x) })));
    expect(fit.coef.map((c) => Number(c.toFixed(3)))).toEqual([50, 1, 2, 1.5, 0.8, 1.2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    expect(fit.rmsMiB).toBeLessThan(1e-6);
    expect(predict(fit, f(100, 50, 10, 10))).toBeCloseTo(truth(f(100, 50, 10, 10)), 4);
  });

  it("clamps a slope the data would make negative to 0: memory never shrinks as a model grows", () => {
    const xs = [f(0, 0, 0, 0), f(10, 0, 0, 0), f(0, 0, 10, 0), f(0, 0, 0, 10), f(5, 5, 0, 0)];
    const ys = [10, 20, 10 - 3, 15, 20];
    const fit = fitLinear(xs.map((x, i) => ({ features: x, value: ys[i]! })));
    expect(fit.coef[3]).toBe(0);
    expect(fit.coef.slice(1).every((c) => c >= 0)).toBe(true);
  });
});

describe("model terms from the probes' ONNX files", () => {
  let files: Map<string, string>;
  beforeAll(() => void (files = writeProbes(dir)));

  it("weights and conv weights are the initializers' bytes", async () => {
    const w = await modelTerms(files.get("weights")!);
    expect(w.weightMiB).toBeCloseTo((1024 * 4096 + 4096 * 2048) * 4 / 2 ** 20, 6);
    expect(w.convWeightMiB).toBe(0);
    expect(w.compileError).toBeNull();
    const c = await modelTerms(files.get("conv-weights")!);
    expect(c.convWeightMiB).toBeCloseTo((4 * 512 * 512 * 9 * 4) / 2 ** 20, 6);
    expect(c.weightMiB).toBeCloseTo(c.convWeightMiB + (4 * 512 * 4) / 2 ** 20, 6);
  });

  it("activations: ORT plans the whole batch, memlane-rt's CPU backend a chunk that fits its arena budget", async () => {
    const t = await modelTerms(files.get("activations")!);
    const perSample = t.arenaPerSampleMiB! * 2 ** 20;
    expect(perSample).toBeGreaterThan(NATIVE_CHUNK_ARENA_BYTES); // 2 x 2 MiB a sample: a chunk is one sample
    const run = { maxBatch: 8, evalSamples: 16 };
    // ORT: its arena replayed over batch 1 then 8 (ort-arena.ts): the first request's tensors and
    // the pattern's block, each in regions of their own, more than the pattern at batch 8.
    const replayed = replayOrtArena(t.ortTracePerSample!, [1, 8]).residentBytes / 2 ** 20;
    expect(features("python-ort", t, run).activationMiB).toBeCloseTo(replayed, 9);
    expect(features("node-ort", t, run).activationMiB).toBeCloseTo(replayed, 9);
    expect(replayed).toBeGreaterThan(1.5 * 8 * t.ortPatternPerSampleMiB!);
    // first-inference's term: the same replay after its first request (batch 1) alone, a
    // fraction of the run's; without a trace, the pattern at the first batch size stands in.
    const first = replayOrtArena(t.ortTracePerSample!, [1, 8]).firstRequestBytes / 2 ** 20;
    expect(features("python-ort", t, run).ortFirstRequestMiB).toBeCloseTo(first, 9);
    expect(first).toBeGreaterThan(0);
    expect(first).toBeLessThan(replayed / 4);
    const untraced = { ...t, ortTracePerSample: null };
    expect(features("node-ort", untraced, { ...run, batchSizes: [2, 8] }).ortFirstRequestMiB).toBeCloseTo(2 * t.ortPatternPerSampleMiB!, 9);
    // node-ort reads its eval set into one malloc'd Buffer after the load, which takes a held
    // block that holds it before the arena's regions do; python-ort's arrives in shared memory.
    const evalIn = 16 * ((t.ioPerSampleMiB ?? 0) - (t.outputPerSampleMiB ?? 0));
    expect(evalIn).toBeGreaterThan(0);
    // One 4 MiB held block: the 3 MiB eval set fits it, and so does the replay's first 2 MiB region.
    const pieces = [{ bytes: 4 * 2 ** 20, count: 1 }];
    const load = { heldMiB: 4, inUseMiB: 1, peakAboveEndMiB: 0, freePieces: pieces };
    const held = { ...t, ortLoad: { "python-ort": load, "node-ort": load } };
    expect(features("node-ort", held, run).evalMiB).toBe(0);
    expect(features("python-ort", held, run).evalMiB).toBeCloseTo(evalIn, 9);
    // The block it took is not the arena's any more: python-ort's first region lands in it,
    // node-ort's does not; the difference is that region at least, and no more than the block.
    const lost = features("node-ort", held, run).activationMiB - features("python-ort", held, run).activationMiB;
    expect(lost).toBeGreaterThanOrEqual(2);
    expect(lost).toBeLessThanOrEqual(4);
    // Without pieces (not measured) the eval set counts whole, as before.
    expect(features("node-ort", t, run).evalMiB).toBeCloseTo(evalIn, 9);
    // Three runs that held alike, each with its own blocks: the estimate is the median run's
    // arena, not the run freePieces names (one process's draw).
    const none = [{ bytes: 4096, count: 1 }];
    const whole = (sets: typeof pieces[]) => features("python-ort", { ...t, ortLoad: { "python-ort": { ...load, freePieces: none, freePiecesAlike: sets } } }, run).activationMiB;
    const [small, mid, big] = [none, [{ bytes: 2 * 2 ** 20, count: 1 }], pieces].map((p) => whole([p]));
    expect(small).toBeGreaterThan(mid!);
    expect(mid).toBeGreaterThan(big!);
    expect(whole([pieces, none, [{ bytes: 2 * 2 ** 20, count: 1 }]])).toBeCloseTo(mid!, 9);
    expect(whole([])).toBeCloseTo(small!, 9); // none alike: freePieces' run
    expect(features("native", t, run).ortFirstRequestMiB).toBe(0);
    expect(features("native", t, run).activationMiB).toBeCloseTo(t.arenaPerSampleMiB!, 9);
    expect(features("native", t, run).evalMiB + features("native", t, run).evalOutputMiB).toBeCloseTo(16 * t.ioPerSampleMiB!, 9);
    // seeds/003's formula: parameters x 4 B + one batch of inputs x 4 B.
    expect(naiveMiB(t, run)).toBeCloseTo((t.params * 4) / 2 ** 20 + 8 * t.ioPerSampleMiB!, 9);
  });

  // BiT's weight-standardised conv as torch exports it: the kernel stored as it is and
  // transposed, both read only by the standardisation (a training-mode BatchNormalization over
  // the filters), which the compiler folds into the one kernel the plan holds.
  it("memlane-rt's weights are its plan's: a kernel the file stores twice for its standardisation counts once", async () => {
    const file = writeModel({
      inputs: [["x", ["N", 3, 16, 16]]], outputs: ["y"], opset: 15,
      inits: [
        init("w", [1, 64, 27]), init("wt", [1, 27, 64]), init("kernel", [4], [64, 3, 3, 3], "int64"),
        init("ones", [64], new Array(64).fill(1)), init("zeros", [64], new Array(64).fill(0)), init("sixtyfour", [1], [64], "int64"),
      ],
      nodes: [
        node("ReduceMean", ["wt"], ["mean3"], { axes: [1], keepdims: 0 }), node("Reshape", ["mean3", "sixtyfour"], ["mean"]),
        node("Sub", ["wt", "mean3"], ["centred"]), node("Mul", ["centred", "centred"], ["sq"]), node("ReduceMean", ["sq"], ["var3"], { axes: [1], keepdims: 0 }),
        node("Reshape", ["var3", "sixtyfour"], ["variance"]),
        node("BatchNormalization", ["w", "ones", "zeros", "mean", "variance"], ["ws", "rm", "rv"], { epsilon: 1e-8, momentum: 0, training_mode: 1 }),
        node("Reshape", ["ws", "kernel"], ["k"]), node("Conv", ["x", "k"], ["y"], { pads: [1, 1, 1, 1] }),
      ],
    }, "standardised-conv", dir);
    const t = await modelTerms(file);
    expect(t.compileError, t.compileError ?? "").toBeNull();
    expect(t.weightMiB * 2 ** 20).toBeGreaterThan(2 * 64 * 27 * 4);  // both copies
    expect(t.nativeWeightMiB! * 2 ** 20).toBe(64 * 27 * 4);  // the standardised kernel alone
    expect(features("native", t, { maxBatch: 1, evalSamples: 1 }).weightMiB).toBe(t.nativeWeightMiB);
    expect(features("python-ort", t, { maxBatch: 1, evalSamples: 1 }).weightMiB).toBe(t.weightMiB);
  });

  it("a model the compiler refuses still has weights, and says why activations are missing", async () => {
    const bad = join(dir, "bad.onnx");
    writeFileSync(bad, "not an onnx file");
    await expect(modelTerms(bad)).rejects.toThrow(/not a valid ONNX model/);
  });
});

describe("malloc-held memory after ORT's load (heldMiB) and its in-use bytes (loadMiB)", () => {
  // Probes like the real ones: the conv-weights probe's 36 MiB of kernels keep 90 MiB in malloc
  // after the load, the others next to nothing; what a phase measures is that, the bytes the
  // load left in use (the weights and ORT's copies of the conv kernels, 1.2x) and the rest.
  const inUse = (x: ReturnType<typeof f>) => ({ ...x, loadMiB: x.weightMiB + 0.2 * x.convWeightMiB + 2 });
  const xs = [f(0, 0, 0, 0, 0, 0.3), f(48, 0, 0, 1, 0, 1), f(36, 36, 0, 1, 0, 90), f(0, 0, 32, 3, 0, 0.2), f(0, 0, 8, 128, 0, 0.2), f(16, 1, 8, 9, 0, 4)].map(inUse);
  const load = (x: ReturnType<typeof inUse>) => 58 + x.loadMiB + x.heldMiB;
  const L = FEATURE_NAMES.indexOf("loadMiB") + 1;
  const probes: Calibration["probes"] = xs.map((x, i) => ({
    name: `p${i}`, features: { "python-ort": x, native: { ...x, heldMiB: 0 } },
    phases: {
      "python-ort": { import: { rss: 50, uss: 40, pss: 45, peak: 51 }, "model-load": { rss: load(x), uss: load(x), pss: load(x), peak: load(x) } },
    },
  }));
  const cal: Calibration = { format: CALIBRATION_FORMAT, key: {}, createdAt: "", models: fitModels(probes), probes };

  it("takes both slopes as 1 from model-load on and 0 before, never fitted, and gives W and Wconv none for an ORT runtime", () => {
    const fits = cal.models["python-ort"]!.fits;
    expect(fits["model-load"]!.rss.coef[6]).toBe(1);
    expect(fits["model-load"]!.rss.coef[L]).toBe(1);
    expect(fits["model-load"]!.rss.coef[1]).toBe(0);
    expect(fits["model-load"]!.rss.coef[2]).toBe(0);
    expect(fits["model-load"]!.rss.coef[0]).toBeCloseTo(58, 3);
    expect(fits.import!.rss.coef[6]).toBe(0);
    expect(fits.import!.rss.coef[L]).toBe(0);
  });

  it("predicts a model's load from its own held and in-use memory, not the probes' ratios to W (swin_t's shape, then resnet18's)", () => {
    // swin_t: 109 MiB of MatMul weights, 125 in use after the load (no conv among them): a
    // slope on W fitted on the probes would have missed the 16.
    const swin = { ...f(108.9, 0, 0, 0, 0, 65.4), loadMiB: 124.6 };
    expect(estimateRuntime(cal, "python-ort", swin)!.phases.find((p) => p.phase === "model-load")!.rss).toBeCloseTo(58 + 124.6 + 65.4, 3);
    const resnet = { ...f(44.6, 42.7, 0, 0, 0, 76.3), loadMiB: 46.3 };
    const e = estimateRuntime(cal, "python-ort", resnet)!;
    expect(e.phases.find((p) => p.phase === "model-load")!.rss).toBeCloseTo(load(resnet), 3);
    expect(e.phases.find((p) => p.phase === "import")!.rss).toBeCloseTo(50, 3);
  });

  it("calibration takes each probe's held memory from its own run's model-load, per ORT runtime (the load's scatter is no slope)", () => {
    const report = (delta: number | null | undefined) => ({
      runtimes: [{ name: "python-ort", phases: [{ name: "import", deltaMallocFreeMiB: 9 }, { name: "model-load", deltaMallocFreeMiB: delta }] }],
    }) as never;
    expect(measuredHeldMiB(report(80.65))).toBe(80.65);
    expect(measuredHeldMiB(report(-1.5))).toBe(0);
    expect(measuredHeldMiB(report(null))).toBeNull(); // a worker that cannot read mallinfo2: the load probe stands in
    expect(measuredHeldMiB(report(undefined))).toBeNull(); // an older report
    // node-ort's own figure where it read one (the orchestrator's malloc history is its own), else python-ort's.
    const both = (node: number | null) => ({
      runtimes: [
        { name: "python-ort", phases: [{ name: "model-load", deltaMallocFreeMiB: 0.2 }] },
        { name: "node-ort", phases: [{ name: "model-load", deltaMallocFreeMiB: node }] },
      ],
    }) as never;
    expect(measuredHeldMiB(both(35), "node-ort")).toBe(35);
    expect(measuredHeldMiB(both(35), "python-ort")).toBe(0.2);
    expect(measuredHeldMiB(both(null), "node-ort")).toBe(0.2);
    expect(medianOrNull([81, 72, 90])).toBe(81);
    expect(medianOrNull([81, null, 90])).toBeNull();
    // The runs' spread, which memlane estimate prints where it is wide (glibc's coin).
    expect(rangeOrNull([81, 72, 90])).toEqual([72, 90]);
    expect(rangeOrNull([19.7, 85.0, 19.7])).toEqual([19.7, 85.0]);
    expect(rangeOrNull([81, null])).toBeNull();
    // The held figure taken: the middle of the two amounts glibc's coin gives, not the majority's.
    expect(heldEstimateMiB([19.7, 85.0, 19.7])).toBeCloseTo(52.35, 6);
    expect(heldEstimateMiB([76.4, 76.4, 76.4])).toBe(76.4);
    expect(heldEstimateMiB([81, null, 90])).toBeNull();
  });

  it("features() gives each ORT runtime its own probe's figures; where it measured none, 0 held and the weights in use", () => {
    const probed = (held: number, inUse: number, peak: number) => ({ heldMiB: held, inUseMiB: inUse, peakAboveEndMiB: peak, freePieces: null });
    const base = { weightMiB: 1, convWeightMiB: 0, ortPatternPerSampleMiB: 0, arenaPerSampleMiB: 0, ioPerSampleMiB: 0, outputPerSampleMiB: 0 };
    const t = { ...base, ortLoad: { "python-ort": probed(12.5, 7.5, 3), "node-ort": probed(20, 13.5, 4) } } as never;
    const run = { maxBatch: 8, evalSamples: 16 };
    expect([features("python-ort", t, run).heldMiB, features("python-ort", t, run).loadMiB, features("python-ort", t, run).loadTransientMiB]).toEqual([12.5, 7.5, 3]);
    expect([features("node-ort", t, run).heldMiB, features("node-ort", t, run).loadMiB, features("node-ort", t, run).loadTransientMiB]).toEqual([20, 13.5, 4]);
    expect(features("native", t, run).heldMiB).toBe(0);
    expect(features("native", t, run).loadMiB).toBe(0); // memlane-rt's comes from its own probe (nativeLoadMiB)
    expect(features("native", t, run).loadTransientMiB).toBe(0);
    // A runtime whose probe was not run, or measured nothing, borrows no other runtime's figures.
    const onlyPython = { ...base, ortLoad: { "python-ort": probed(12.5, 7.5, 3) } } as never;
    const unmeasured = { ...base, ortLoad: { "python-ort": { heldMiB: null, inUseMiB: null, peakAboveEndMiB: null, freePieces: null, unavailable: "x" } } } as never;
    for (const [rt, terms] of [["node-ort", onlyPython], ["python-ort", unmeasured]] as const) {
      expect(features(rt, terms, run).heldMiB).toBe(0);
      expect(features(rt, terms, run).loadMiB).toBe(1);
      expect(features(rt, terms, run).loadTransientMiB).toBe(0);
    }
  });

  it("loadProbesFor asks for each ORT runtime's probe once, and memlane-rt's", () => {
    expect(loadProbesFor(["python-ort", "node-ort", "python-ort", "torch"])).toEqual({ ortLoad: ["python-ort", "node-ort"], nativeLoad: false });
    expect(loadProbesFor(["native", "torch"])).toEqual({ ortLoad: [], nativeLoad: true });
  });
});

describe("memlane-rt's load (loadMiB, nativeReleasedMiB)", () => {
  // Probes that repack nothing (L ~0.4 MiB of kernel state, R = 0): the slopes are given, so a
  // model that repacks gets its measured copies from model-load on, and its given-back plan
  // pages off W's count from first-inference on.
  const native = (w: number, l: number, r: number) => ({ ...f(w, 0, 0, 0), loadMiB: l, nativeReleasedMiB: r });
  const phases = { "runtime-create": 7.4, "model-load": 7.9, "first-inference": 8.0 };
  const probes = [0, 16, 48].map((w, i) => ({
    name: `p${i}`,
    features: { native: native(w, 0.4 + i * 0.05, 0) },
    phases: { native: Object.fromEntries(Object.entries(phases).map(([ph, base]) => {
      const v = base + (ph === "model-load" ? 0.4 + i * 0.05 : 0) + (ph === "first-inference" ? 0.4 + i * 0.05 + w : 0);
      return [ph, { rss: v, uss: v, pss: v, peak: v }];
    })) },
  }));
  const cal: Calibration = { format: CALIBRATION_FORMAT, key: {}, createdAt: "", models: fitModels(probes), probes };
  it("adds the measured load from model-load on and takes the given-back pages off from first-inference on", () => {
    const resnetLike = native(44.6, 16.8, 9.0);
    const e = estimateRuntime(cal, "native", resnetLike)!;
    const at = (ph: string) => e.phases.find((p) => p.phase === ph)!.rss;
    expect(at("runtime-create")).toBeCloseTo(7.4, 3);
    expect(at("model-load")).toBeCloseTo(7.9 + 16.8, 3);
    expect(at("first-inference")).toBeCloseTo(8.0 + 44.6 + 16.8 - 9.0, 3);
  });

  // Probes whose load repacks all their weights, holding the originals with their copies for a
  // while (the peak W above the end, as the AVX-512 dense layers' panels do): a model that repacks
  // only some gets its own probe's transient on model-load's peak, not the probes' ratio to W.
  it("puts the load probe's own peak above the end on model-load's peak only (loadTransientMiB)", () => {
    const held = [0, 16, 48].map((w, i) => ({
      name: `p${i}`,
      features: { native: { ...native(w, w + 0.4, w), loadTransientMiB: w } },
      phases: { native: { "model-load": { rss: 7.9 + w + 0.4, uss: 7.9 + w + 0.4, pss: 7.9 + w + 0.4, peak: 7.9 + 2 * w + 0.4 } } },
    }));
    const fit = fitModels(held).native!.fits["model-load"]!;
    const T = FEATURE_NAMES.indexOf("loadTransientMiB") + 1;
    expect(fit.peak.coef[T]).toBe(1);
    expect(fit.rss.coef[T]).toBe(0);
    expect(fit.peak.coef[1]).toBeCloseTo(0, 6); // W: nothing left for a fitted slope to take
    const c: Calibration = { format: CALIBRATION_FORMAT, key: {}, createdAt: "", models: fitModels(held), probes: held };
    // 20 MiB of weights of which 2 repacked: the peak 2 MiB above the end, not 20.
    const e = estimateRuntime(c, "native", { ...native(20, 2.4, 2), loadTransientMiB: 2 })!.phases[0]!;
    expect(e.rss).toBeCloseTo(7.9 + 2.4, 3);
    expect(e.peak).toBeCloseTo(7.9 + 2.4 + 2, 3);
  });
});

describe("memlane-rt's unchunked arena (largestBatchMiB)", () => {
  it("takes its slope as 1 at steady-inference and 0 before: no probe is unchunkable, so it is given", () => {
    const xs = [f(0, 0, 0, 0), f(48, 0, 0, 1), f(0, 0, 4, 3), f(0, 0, 8, 128)];
    const row = (v: number) => ({ rss: v, uss: v, pss: v, peak: v });
    const probes: Calibration["probes"] = xs.map((x, i) => ({
      name: `p${i}`, features: { native: x },
      phases: { native: { "first-inference": row(8 + x.weightMiB + x.activationMiB), "steady-inference": row(8 + x.weightMiB + x.activationMiB + x.evalMiB) } },
    }));
    const fits = fitModels(probes).native!.fits;
    expect(fits["steady-inference"]!.rss.coef[7]).toBe(1);
    expect(fits["first-inference"]!.rss.coef[7]).toBe(0);
    const cal: Calibration = { format: CALIBRATION_FORMAT, key: {}, createdAt: "", models: fitModels(probes), probes };
    const distilbertLike = { ...f(0.5, 0, 0.22, 0.5), largestBatchMiB: 1.53 };
    const e = estimateRuntime(cal, "native", distilbertLike)!;
    expect(e.phases[1]!.rss - e.phases[0]!.rss).toBeCloseTo(0.5 + 1.53, 3);
  });
});

describe("node-ort's dead outputs (deadOutputMiB)", () => {
  const t = { outputPerSampleMiB: 2 / 64, ortLoad: {} } as const; // bert-tiny at seq 128: 2 MiB a batch of 64

  it("counts every request's outputs at every batch size, up to V8's limit and 1.5 requests more, for node-ort only", () => {
    const run = (calls: number) => ({ maxBatch: 64, batchSizes: [1, 64], evalSamples: 256, calls });
    expect(nodeDeadOutputMiB(t, run(2))).toBeCloseTo(2 * (1 + 64) * (2 / 64), 9);
    expect(nodeDeadOutputMiB(t, run(8))).toBeCloseTo(8 * 65 * (2 / 64), 9);
    expect(nodeDeadOutputMiB(t, run(55))).toBe(NODE_DEAD_OUTPUT_LIMIT_MIB + 3);
    expect(nodeDeadOutputMiB(t, run(1000))).toBe(NODE_DEAD_OUTPUT_LIMIT_MIB + 3);
    expect(nodeDeadOutputMiB(t, { maxBatch: 64, evalSamples: 256 })).toBe(0); // requests unknown: left out
    expect(nodeDeadOutputMiB({ outputPerSampleMiB: null }, run(55))).toBe(0);
    const terms = { ...(t as object), weightMiB: 1, convWeightMiB: 0 } as never;
    // On the peak: the middle of their count beyond the eval set's outputs (8 MiB: collected
    // before the eval pass makes them) and their whole count (not collected yet).
    expect(features("node-ort", terms, run(55)).deadOutputMiB).toBe(NODE_DEAD_OUTPUT_LIMIT_MIB + 3 - 8 / 2);
    expect(features("python-ort", terms, run(55)).deadOutputMiB).toBe(0);
    expect(features("native", terms, run(55)).deadOutputMiB).toBe(0);
  });

  it("gives way on the peak to the eval chunks' outputs where those are more: they are gathered into one copy while all alive", () => {
    // a decoder LM's logits, 2.44 MiB a sample, 256 eval samples: 625 MiB of chunks against 55 of dead requests
    const lm = { outputPerSampleMiB: 2.44, weightMiB: 6, convWeightMiB: 0, ortLoad: {} } as never;
    const run = { maxBatch: 8, batchSizes: [1, 8], evalSamples: 256, calls: 55 };
    expect(nodeDeadOutputMiB(lm, run)).toBeCloseTo(NODE_DEAD_OUTPUT_LIMIT_MIB + 1.5 * 8 * 2.44, 9);
    expect(features("node-ort", lm, run).deadOutputMiB).toBeCloseTo(2.44 * 256, 9);
    expect(features("python-ort", lm, run).deadOutputMiB).toBe(0);
    // with the probes' own peaks made of the same rule, the fit gives the copy slope 1 on the peak
    const xs = [f(0, 0, 0, 0), f(48, 0, 0, 1), { ...f(0, 0, 1, 1, 64), deadOutputMiB: 64 }, { ...f(16, 0, 1, 1, 8), deadOutputMiB: 22.5 }].map(ortLoaded);
    const row = (v: number, peak = v) => ({ rss: v, uss: v, pss: v, peak });
    const probes: Calibration["probes"] = xs.map((x, i) => {
      const end = 50 + x.loadMiB + x.activationMiB + x.evalOutputMiB;
      return { name: `p${i}`, features: { "node-ort": x }, phases: { "node-ort": { "steady-inference": row(end, end + x.deadOutputMiB) } } };
    });
    const fits = fitModels(probes)["node-ort"]!.fits["steady-inference"]!;
    expect(fits.peak.coef[FEATURE_NAMES.indexOf("evalOutputMiB") + 1]).toBe(1);
    expect(fits.peak.coef[FEATURE_NAMES.indexOf("deadOutputMiB") + 1]).toBe(1);
  });

  it("takes its slopes as 1 at steady-inference and 0 before (the uncollected on the peak, the kept on the end figures), so a probe's dead outputs do not go into the intercept", () => {
    // The last probe's outputs stay in malloc's heap once collected, the one before it's go back.
    const xs = [f(0, 0, 0, 0), f(48, 0, 0, 1), f(0, 0, 4, 3), { ...f(0, 0, 0, 1, 64), deadOutputMiB: 22.5 }, { ...f(16, 0, 1, 1, 8), deadOutputMiB: 22.5, deadOutputKeptMiB: 22.5 }].map(ortLoaded);
    const row = (v: number, peak = v) => ({ rss: v, uss: v, pss: v, peak });
    const probes: Calibration["probes"] = xs.map((x, i) => {
      const end = 50 + x.loadMiB + x.activationMiB + x.evalOutputMiB;
      return { name: `p${i}`, features: { "node-ort": x }, phases: { "node-ort": { "first-inference": row(50 + x.loadMiB), "steady-inference": row(end + x.deadOutputKeptMiB, end + x.deadOutputMiB) } } };
    });
    const fits = fitModels(probes)["node-ort"]!.fits;
    const D = FEATURE_NAMES.indexOf("deadOutputMiB") + 1, K = FEATURE_NAMES.indexOf("deadOutputKeptMiB") + 1;
    expect([fits["steady-inference"]!.peak.coef[D], fits["steady-inference"]!.peak.coef[K]]).toEqual([1, 0]);
    expect([fits["steady-inference"]!.rss.coef[D], fits["steady-inference"]!.rss.coef[K]]).toEqual([0, 1]);
    expect([fits["first-inference"]!.rss.coef[D], fits["first-inference"]!.rss.coef[K], fits["first-inference"]!.peak.coef[D]]).toEqual([0, 0, 0]);
    expect(fits["steady-inference"]!.rss.coef[0]).toBeCloseTo(50, 3);
    expect(fits["steady-inference"]!.peak.coef[0]).toBeCloseTo(50, 3);
  });

  it("keeps the outputs below glibc's mmap threshold, which ORT's load set (its largest initializer or file read buffer, at most 32 MiB)", () => {
    const run = { maxBatch: 8, batchSizes: [1, 8], evalSamples: 16, calls: 12 };
    // 256 KiB a sample: 0.25 MiB a request of 1, 2 MiB a request of 8.
    const t = (largestInitializerMiB: number, outputs = [0.25], fileMiB = largestInitializerMiB) =>
      ({ outputPerSampleMiB: outputs.reduce((a, b) => a + b, 0), outputTensorsPerSampleMiB: outputs, largestInitializerMiB, fileMiB, weightMiB: 1, convWeightMiB: 0, ortLoad: {} }) as never;
    // The freed block's chunk: a page beyond its request.
    const page = 4096 / 2 ** 20;
    expect(ortLoadMmapThresholdMiB(t(16))).toBe(16 + page);
    expect(ortLoadMmapThresholdMiB(t(0.25, [0.25], 0.86))).toBe(0.86 + page); // opt: its file's read buffer
    expect(ortLoadMmapThresholdMiB(t(9, [0.25], 45))).toBe(9 + page); // resnet18: the buffer stops at 4 MiB
    expect(ortLoadMmapThresholdMiB(t(0.01))).toBe(0.125); // glibc's default
    expect(ortLoadMmapThresholdMiB(t(500))).toBe(32); // its cap
    const dead = nodeDeadOutputMiB(t(16), run);
    expect(dead).toBeGreaterThan(0);
    // A 16 MiB weight: the 2 MiB requests of 8 stay in the heap, all 12 (24 MiB, below V8's limit).
    expect(nodeDeadOutputKeptMiB(t(16), run)).toBeCloseTo(12 * 2, 9);
    expect(nodeDeadOutputKeptMiB(t(16), { ...run, calls: 50 })).toBeCloseTo(NODE_DEAD_OUTPUT_LIMIT_MIB + 1.5 * 2, 9);
    // A 1 MiB weight and file: those are mmapped, the 0.25 MiB requests of 1 kept, all 12, or none:
    // the 2 MiB requests' 24 MiB and the others' pass V8's limit, so a collection frees a mapped
    // one, glibc's threshold follows it to 2 MiB and a page, and the eval pass's 2 MiB chunks may
    // leave the heap's top free (this MatMul kept 30, 4 or 14 MiB with 2, 5 or 10 warmup requests).
    expect(nodeDeadOutputKept(t(1), run)).toEqual({ mib: (12 * 0.25) / 2, rangeMiB: [0, 12 * 0.25] });
    // 40 MiB a request of 8, 5 of 1: above the 32 MiB cap, and 5 MiB above a 4 MiB threshold.
    expect(nodeDeadOutputKeptMiB(t(4, [5]), run)).toBe(0);
    // Output by output: logits mmapped, a small pooled output kept (or none: the logits of 8 raise
    // the threshold to their 8 MiB and the eval pass's chunks may free the heap's top).
    expect(nodeDeadOutputKept(t(0.5, [1, 0.05]), run)).toEqual({ mib: (12 * 8 * 0.05) / 2, rangeMiB: [0, 12 * 8 * 0.05] });
    expect(nodeDeadOutputKeptMiB(t(0.5, [1, 0.05]), { ...run, calls: 2 })).toBeCloseTo(2 * 8 * 0.05, 9);
    // The eval pass trims the heap: its chunks' outputs (2 MiB a chunk of 8) come from the heap
    // and die; the copy of all 256 samples' (64 MiB) is mmapped, so the heap's top is free at the
    // end mark and glibc gives it back, the dead requests' chunks with it (the eval-outputs probe).
    expect(nodeDeadOutputKeptMiB(t(4), { ...run, evalSamples: 256 })).toBe(0);
    // The same copy below the threshold (16 samples, 4 MiB of a 16 MiB one) pins them.
    expect(nodeDeadOutputKeptMiB(t(16), { ...run, evalSamples: 16 })).toBeCloseTo(12 * 2, 9);
    // A copy the size of the block that set the threshold comes from the heap too, and pins the
    // chunks: RemBERT's 4 MiB copy (32 samples of 0.125 MiB) after ORT's 4 MiB read buffer.
    expect(nodeDeadOutputKeptMiB(t(1, [0.125], 16), { ...run, evalSamples: 32 })).toBeCloseTo(12 * 1, 9);
    // 64 samples: a mapped copy, so the eval pass may trim the heap, but its 8 MiB of chunks fit in
    // the 12 MiB the dead requests left free and need not reach the top: a coin, the middle taken.
    expect(nodeDeadOutputKept(t(1, [0.125], 16), { ...run, evalSamples: 64 })).toEqual({ mib: 12 / 2, rangeMiB: [0, 12] });
    // 128 samples: 16 MiB of chunks overflow that room, the last of them are the top, the end trims.
    expect(nodeDeadOutputKeptMiB(t(1, [0.125], 16), { ...run, evalSamples: 128 })).toBe(0);
    // Chunk outputs mmapped at first (1 MiB logits, 8 MiB a chunk over a 4 MiB threshold), until V8
    // frees one of the timed requests' (their 113 MiB pass its limit): glibc's threshold follows
    // it to 8 MiB and a page, the chunks come from the heap, and the final collection may trim
    // the heap's top or not. A coin: the middle of the requests of 1 kept (1.05 MiB each) and none.
    expect(timedRequestsMmapThresholdMiB(t(4, [1, 0.05]), run)).toBe(8 + page);
    expect(nodeDeadOutputKept(t(4, [1, 0.05]), { ...run, evalSamples: 256 })).toEqual({ mib: (12 * 1.05) / 2, rangeMiB: [0, 12 * 1.05] });
    // A decoder LM's logits at seq 128 (3.9 MiB a sample, 31.25 a request of 8, under glibc's
    // 32 MiB cap) after a 7.8 MiB embedding: Qwen2, Phi-3 and TrOCR's decoder trimmed, GPT-NeoX
    // did not, Gemma 2 and Pegasus kept 7 and 17 of the 32 MiB.
    const lm = t(7.81, [3.906], 30);
    const lmRun = { maxBatch: 8, batchSizes: [1, 8], evalSamples: 32, calls: 6 };
    expect(timedRequestsMmapThresholdMiB(lm, lmRun)).toBeCloseTo(8 * 3.906 + page, 9);
    const pinned = NODE_DEAD_OUTPUT_LIMIT_MIB + 1.5 * 3.906;
    expect(nodeDeadOutputKept(lm, { ...lmRun, calls: 12 })).toEqual({ mib: pinned / 2, rangeMiB: [0, pinned] });
    // Too few requests for V8 to collect before the eval pass (two of each size, 18.9 MiB): the
    // threshold stays the load's, the chunks stay mapped, and the requests of 1 stay pinned.
    const few = { ...run, evalSamples: 256, calls: 2 };
    expect(timedRequestsMmapThresholdMiB(t(4, [1, 0.05]), few)).toBe(4 + page);
    expect(nodeDeadOutputKept(t(4, [1, 0.05]), few)).toEqual({ mib: 2 * 1.05, rangeMiB: null });
    expect(features("node-ort", t(16), run).deadOutputKeptMiB).toBeCloseTo(nodeDeadOutputKeptMiB(t(16), run), 9);
    expect(features("python-ort", t(16), run).deadOutputKeptMiB).toBe(0);
  });

  it("counts no new pages for the dead outputs the blocks the load left held (after ORT's arena) take", () => {
    // DistilBERT of base size at --batch 1,8 --eval-samples 32: 0.375 MiB of output a sample, a
    // 32 MiB threshold (its 89 MiB embedding), 13 requests a batch size: 3 MiB requests of 8.
    const run = { maxBatch: 8, batchSizes: [1, 8], evalSamples: 32, calls: 13 };
    const t = { outputPerSampleMiB: 0.375, outputTensorsPerSampleMiB: [0.375], largestInitializerMiB: 89, fileMiB: 253 } as never;
    const kept = nodeDeadOutputKeptMiB(t, run);
    expect(kept).toBeCloseTo(NODE_DEAD_OUTPUT_LIMIT_MIB + 1.5 * 3, 9); // 30.5 MiB: 11 requests' worth
    // Four 8 MiB blocks left hold two 3 MiB outputs each (8 requests, 24 MiB); 2 MiB ones hold none.
    const MIB = 2 ** 20;
    const held = [{ bytes: 8 * MIB, count: 4 }, { bytes: 2 * MIB, count: 27 }];
    expect(nodeDeadOutputKeptMiB(t, run, held)).toBeCloseTo(kept - 24, 9);
    expect(nodeDeadOutputKeptMiB(t, run, [{ bytes: 64 * MIB, count: 1 }])).toBe(0);
    expect(nodeDeadOutputKeptMiB(t, run, [])).toBeCloseTo(kept, 9);
    // The peak's dead outputs alike: the middle of their count beyond the eval set's gathered
    // outputs (12 MiB here: collected before the eval pass makes them) and their whole count
    // (not collected yet), never below the eval chunks' (12).
    expect(nodePeakBeyondEndMiB(t, run)).toBeCloseTo(kept - 6, 9);
    expect(nodePeakBeyondEndMiB(t, run, held)).toBe(12);
    expect(nodePeakBeyondEndMiB(t, run, [{ bytes: 8 * MIB, count: 1 }])).toBeCloseTo(kept - 6 - 6, 9);
    // features() hands node-ort's load probe's blocks, less what the arena replay took, to both.
    const trace = [{ kind: "alloc", id: 0, size: 0.5 * MIB }, { kind: "free", id: 0 }];
    const load = (freePieces: { bytes: number; count: number }[] | null) => ({ heldMiB: 100, inUseMiB: 260, untouchedMiB: 0, peakAboveEndMiB: 0, freePieces });
    const terms = (pieces: { bytes: number; count: number }[] | null) =>
      ({ ...(t as object), weightMiB: 253, convWeightMiB: 0, ioPerSampleMiB: 0.376, ortTracePerSample: trace, ortLoad: { "node-ort": load(pieces) } }) as never;
    expect(features("node-ort", terms(null), run).deadOutputKeptMiB).toBeCloseTo(kept, 9);
    expect(features("node-ort", terms([{ bytes: 64 * MIB, count: 1 }]), run).deadOutputKeptMiB).toBe(0);
    expect(features("node-ort", terms(held), run).deadOutputMiB).toBe(12);
  });
});

describe("memlane-rt's output buffers (outputBufferMiB)", () => {
  it("is one request of the largest batch's outputs the eval frames cannot take, native only, slope 1 at steady-inference and 0 before", () => {
    // A small GPT-2's logits at seq 128 (batch first), beside a seq-first output of 0.25 MiB a sample.
    const terms = { outputPerSampleMiB: 0.74, outputNotBatchFirstPerSampleMiB: 0.25, weightMiB: 1, convWeightMiB: 0, ortLoad: {} } as never;
    const run = { maxBatch: 64, batchSizes: [1, 64], evalSamples: 256, calls: 55 };
    // The timed requests write the batch-first logits into the eval frames (rt/tasks_infer.cc).
    expect(features("native", terms, run).outputBufferMiB).toBeCloseTo(64 * 0.25, 9);
    // An eval set smaller than the largest batch: no frame holds a request, every output has a buffer.
    expect(features("native", terms, { ...run, evalSamples: 16 }).outputBufferMiB).toBeCloseTo(64 * 0.74, 9);
    expect(features("python-ort", terms, run).outputBufferMiB).toBe(0);
    expect(features("node-ort", terms, run).outputBufferMiB).toBe(0);
    const xs = [f(0, 0, 0, 0), f(48, 0, 0, 1), { ...f(0, 0, 1, 1, 64), outputBufferMiB: 2 }, f(0, 0, 4, 3)];
    const row = (v: number) => ({ rss: v, uss: v, pss: v, peak: v });
    const probes: Calibration["probes"] = xs.map((x, i) => ({
      name: `p${i}`, features: { native: x },
      phases: { native: { "first-inference": row(8 + x.weightMiB), "steady-inference": row(8 + x.weightMiB + x.activationMiB + x.evalOutputMiB + x.outputBufferMiB) } },
    }));
    const fits = fitModels(probes).native!.fits;
    expect(fits["steady-inference"]!.rss.coef[11]).toBe(1);
    expect(fits["first-inference"]!.rss.coef[11]).toBe(0);
  });
});

describe("phases before model-load", () => {
  it("have no slopes, only an intercept: the probes' scatter there is no term of the model", () => {
    // import 6.7 MiB give or take 0.1, which happens to grow with the eval-outputs probe's 64 MiB
    const xs = [f(0, 0, 0, 0), f(48, 0, 0, 1), { ...f(0, 0, 1, 1, 64) }, f(0, 0, 4, 3)];
    const imports = [6.7, 6.6, 7.0, 6.7];
    const row = (v: number) => ({ rss: v, uss: v, pss: v, peak: v });
    const probes: Calibration["probes"] = xs.map((x, i) => ({
      name: `p${i}`, features: { native: x },
      phases: { native: { import: row(imports[i]!), "runtime-create": row(imports[i]! + 1), "steady-inference": row(8 + x.weightMiB + x.evalOutputMiB) } },
    }));
    const fits = fitModels(probes).native!.fits;
    // (but for memlane-rt's eval set in the task's message, which arrives before runtime-create)
    const socket = FEATURE_NAMES.indexOf("socketEvalMiB") + 1;
    for (const phase of ["import", "runtime-create"]) {
      expect(fits[phase]!.rss.coef.slice(1).every((c, j) => c === (phase === "runtime-create" && j + 1 === socket ? 1 : 0)), phase).toBe(true);
      expect(fits[phase]!.rss.coef[0]).toBeCloseTo(imports.reduce((a, b) => a + b, 0) / 4 + (phase === "import" ? 0 : 1), 6);
    }
    // a decoder LM's 625 MiB of logits change nothing there
    const cal: Calibration = { format: CALIBRATION_FORMAT, key: {}, createdAt: "", models: fitModels(probes), probes };
    expect(estimateRuntime(cal, "native", { ...f(6, 0, 20, 0.5, 625) })!.phases[0]!.rss).toBeCloseTo(6.75, 6);
  });
});

describe("the first request (firstRequestMiB)", () => {
  it("is the first batch's outputs (memlane-rt, node-ort), and for an unchunked memlane-rt plan its arena and workspace beyond one sample; slope 1 at first-inference alone", () => {
    // falcon's shape: 2.44 MiB of logits a sample, 2.5 MiB of arena, a Range (unchunkable)
    const terms = { outputPerSampleMiB: 2.44, arenaPerSampleMiB: 2.5, nativeUnwrittenPerSampleMiB: 0.1, nativeChunkable: false, nativeWorkspaceByBatchMiB: [0.5, 1, 1.5], weightMiB: 6, convWeightMiB: 0, ortLoad: {} } as never;
    const run = (batchSizes: number[]) => ({ maxBatch: Math.max(...batchSizes), batchSizes, evalSamples: 16, calls: 15 });
    expect(features("native", terms, run([1, 8])).firstRequestMiB).toBeCloseTo(2.44, 9);
    // batch 4 first: 4 samples of logits, 3 more of the arena it writes, the workspace at 4 beyond 1
    expect(features("native", terms, run([4, 8])).firstRequestMiB).toBeCloseTo(4 * 2.44 + 3 * 2.4 + 1.5 - 0.5, 9);
    // chunked: the chunk's arena is in activationMiB already
    expect(features("native", { ...(terms as object), nativeChunkable: true } as never, run([4, 8])).firstRequestMiB).toBeCloseTo(4 * 2.44, 9);
    // the first batch larger than the last: the worker runs them in order, the first is the first
    expect(features("native", terms, run([2, 1])).firstRequestMiB).toBeCloseTo(2 * 2.44 + 2.4 + 0.5, 9);
    expect(features("python-ort", terms, run([4, 8])).firstRequestMiB).toBe(0);
    expect(features("node-ort", terms, run([4, 8])).firstRequestMiB).toBeCloseTo(4 * 2.44, 9); // its outputs alone
    const K = FEATURE_NAMES.indexOf("firstRequestMiB") + 1;
    const xs = [f(0, 0, 0, 0), f(48, 0, 0, 1), { ...f(0, 0, 1, 1, 64), firstRequestMiB: 0.25 }, f(0, 0, 4, 3)];
    const row = (v: number) => ({ rss: v, uss: v, pss: v, peak: v });
    const probes: Calibration["probes"] = xs.map((x, i) => ({
      name: `p${i}`, features: { native: x },
      phases: { native: { "first-inference": row(8 + x.weightMiB + x.firstRequestMiB), "steady-inference": row(8 + x.weightMiB + x.activationMiB + x.evalOutputMiB) } },
    }));
    const fits = fitModels(probes).native!.fits;
    expect(fits["first-inference"]!.rss.coef[K]).toBe(1);
    expect(fits["steady-inference"]!.rss.coef[K]).toBe(0);
  });
});

describe("memlane-rt's eval set in the task's message (socketEvalMiB)", () => {
  it("is the eval tensors under the shared-memory threshold, each judged alone, native only, slope 1 at runtime-create and model-load", () => {
    // A BERT's ids and mask (int64, seq 128: 1 KiB a sample each) beside a 4 KiB-a-sample float input.
    const inputs = [{ mib: 1 / 1024, batched: true }, { mib: 1 / 1024, batched: true }, { mib: 4 / 1024, batched: true }];
    const terms = { inputTensorsPerSampleMiB: inputs, weightMiB: 1, convWeightMiB: 0, ortLoad: {} } as never;
    const run = (evalSamples: number) => ({ maxBatch: 8, batchSizes: [1, 8], evalSamples, calls: 15 });
    // 32 samples: every tensor under 1 MiB travels in the message.
    expect(features("native", terms, run(32)).socketEvalMiB).toBeCloseTo((32 * 6) / 1024, 9);
    // 256 samples: the float input is exactly 1 MiB, mapped from shared memory; the ids and mask stay.
    expect(features("native", terms, run(256)).socketEvalMiB).toBeCloseTo((256 * 2) / 1024, 9);
    // An input without a batch axis is sent once, whatever the eval set's size.
    const fixed = { ...(terms as object), inputTensorsPerSampleMiB: [{ mib: 0.5, batched: false }] } as never;
    expect(features("native", fixed, run(1000)).socketEvalMiB).toBeCloseTo(0.5, 9);
    expect(features("python-ort", terms, run(32)).socketEvalMiB).toBe(0);
    expect(features("node-ort", terms, run(32)).socketEvalMiB).toBe(0);
    // No plan (the compiler refused the model): nothing is known of memlane-rt's inputs.
    expect(features("native", { weightMiB: 1, convWeightMiB: 0, ortLoad: {} } as never, run(32)).socketEvalMiB).toBe(0);

    const K = FEATURE_NAMES.indexOf("socketEvalMiB") + 1;
    const xs = [f(0, 0, 0, 0), { ...f(48, 0, 0, 0.25), socketEvalMiB: 0.25 }, f(0, 0, 1, 1, 64), f(0, 0, 4, 3)];
    const row = (v: number) => ({ rss: v, uss: v, pss: v, peak: v });
    const probes: Calibration["probes"] = xs.map((x, i) => ({
      name: `p${i}`, features: { native: x },
      phases: { native: {
        import: row(6.9), "runtime-create": row(7.7 + x.socketEvalMiB), "model-load": row(8.2 + x.socketEvalMiB),
        "first-inference": row(8.3 + x.weightMiB + x.evalMiB), "steady-inference": row(8.3 + x.weightMiB + x.evalMiB + x.activationMiB),
      } },
    }));
    const cal: Calibration = { format: CALIBRATION_FORMAT, key: {}, createdAt: "", models: fitModels(probes), probes };
    const fits = cal.models.native!.fits;
    expect(fits.import!.rss.coef[K]).toBe(0);
    expect(fits["runtime-create"]!.rss.coef[K]).toBe(1);
    expect(fits["model-load"]!.rss.coef[K]).toBe(1);
    // from first-inference on the eval set's slope counts it, mapped or not
    expect(fits["first-inference"]!.rss.coef[K]).toBe(0);
    expect(fits["steady-inference"]!.rss.coef[K]).toBe(0);
    // a GRU's 0.98 MiB set in the message: runtime-create holds it beside the fixed cost
    const gru = { ...f(6.6, 0, 0.4, 0.98), socketEvalMiB: 0.98 };
    const e = estimateRuntime(cal, "native", gru)!;
    expect(e.phases.find((p) => p.phase === "runtime-create")!.rss).toBeCloseTo(7.7 + 0.98, 6);
    expect(e.phases.find((p) => p.phase === "model-load")!.rss).toBeCloseTo(8.2 + 0.98, 6);
  });
});

describe("calibration cache", () => {
  const probeRows = (scale: number): Calibration["probes"] =>
    [f(0, 0, 0, 0), f(48, 0, 0, 1), f(36, 36, 0, 1), f(0, 0, 32, 3), f(0, 0, 8, 128), f(16, 1, 8, 9)].map((x, i) => {
      const name = `p${i}`;
      // model-load: no ORT arena yet (its activation slope is given 0 there, calibration.ts);
      // an ORT runtime's weights are its load's in-use bytes (loadMiB, slope 1)
      const v = 60 + scale * x.weightMiB + 0.5 * x.evalMiB;
      return { name, features: { "python-ort": ortLoaded(x) }, phases: { "python-ort": { "model-load": { rss: v, uss: v - 20, pss: v - 10, peak: v + 1 } } } };
    });

  it("round-trips under the machine's key, and ignores a torn or foreign file", () => {
    const key = calibrationKey();
    expect(loadCalibration(key)).toBeNull();
    const probes = probeRows(1);
    const cal: Calibration = { format: CALIBRATION_FORMAT, key, createdAt: new Date().toISOString(), models: fitModels(probes), probes };
    const path = saveCalibration(cal);
    expect(path).toBe(calibrationPath(key));
    expect(path.startsWith(join(dir, "cache"))).toBe(true);
    const back = loadCalibration(key)!;
    const e = estimateRuntime(back, "python-ort", ortLoaded(f(100, 0, 0, 0)))!;
    expect(e.phases.map((p) => p.phase)).toEqual(["model-load"]);
    expect(e.phases[0]!.rss).toBeCloseTo(160, 3);
    expect(estimateRuntime(back, "native", f(1, 0, 0, 0))).toBeNull();
    writeFileSync(path, "{ torn");
    expect(loadCalibration(key)).toBeNull();
    saveCalibration({ ...cal, key: { ...key, kernel: "other" } });
    expect(loadCalibration({ ...key, kernel: "yet another" })).toBeNull();
  });

  it("says which key fields differ from the newest cached calibration when none fits", () => {
    const key = calibrationKey();
    const probes = probeRows(1);
    const saved = process.env.MEMLANE_CACHE_DIR;
    process.env.MEMLANE_CACHE_DIR = mkdtempSync(join(dir, "mismatch-"));
    try {
      expect(calibrationMismatch(key)).toBeNull(); // none cached: no reason beyond that
      // a memlane-rt rebuilt since (the key holds its size and mtime)
      saveCalibration({ format: CALIBRATION_FORMAT, key: { ...key, memlaneRt: "123-456" }, createdAt: "", models: fitModels(probes), probes });
      const why = calibrationMismatch({ ...key, memlaneRt: "789-000" })!;
      expect(why).toMatch(/^the newest cached calibration, of \d{4}-\d\d-\d\d \d\d:\d\d UTC, was made with another memlane-rt build \(bytes-mtime\) \(123-456, now 789-000\)$/);
      expect(calibrationMismatch({ ...key, memlaneRt: "123-456" })).toBeNull(); // it fits: nothing to explain
    } finally {
      process.env.MEMLANE_CACHE_DIR = saved;
    }
  });

  it("compares an estimate with a measured phase, error in % of the measurement", () => {
    const probes = probeRows(1);
    const cal: Calibration = { format: CALIBRATION_FORMAT, key: {}, createdAt: "", models: fitModels(probes), probes };
    const e = estimateRuntime(cal, "python-ort", ortLoaded(f(40, 0, 0, 0)))!;
    const measured = { phases: [{ name: "model-load", rssMiB: 110, ussMiB: 80, pssMiB: 90, peakRssMiB: 111 }] } as never;
    const [c] = compareWithMeasured(e, measured);
    expect(c!.rss.estimateMiB).toBeCloseTo(100, 3);
    expect(c!.rss.errorPct).toBeCloseTo(((100 - 110) / 110) * 100, 3);
  });
});

it("probes are distinct and each moves a term", () => {
  expect(new Set(PROBES.map((p) => p.name)).size).toBe(PROBES.length);
});
