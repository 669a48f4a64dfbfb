// The load probe (src/estimate/ort-load.ts) in real Python workers and node-ort children on real ONNX files: what
// glibc's malloc keeps of what ORT frees while it loads, and that it is glibc's dynamic mmap
// threshold (a fixed threshold takes it away).
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { features, modelTerms, withoutHeldPieces } from "../../src/estimate/model-terms.ts";
import { checkedRaw, type FreePieces, probeOrtLoad } from "../../src/estimate/ort-load.ts";
import { PROBES, writeProbes } from "../../src/estimate/probe-models.ts";
import { pythonPath, REPO_ROOT } from "../fixtures/onnx/models.ts";

const dir = mkdtempSync(join(tmpdir(), "memlane-ort-load-"));
const files = writeProbes(dir, PROBES.filter((p) => p.name === "tiny" || p.name === "conv-weights"));
// The probes' TMPDIR (ORT's Python import writes `.ses` there): inside this test's folder.
const scratch = join(dir, "tmp");
mkdirSync(scratch);
const env = { TMPDIR: scratch };
afterAll(() => rmSync(dir, { recursive: true, force: true }));
/** The carved blocks' total, MiB. */
const total = (p: FreePieces[] | null) => p!.reduce((s, x) => s + x.bytes * x.count, 0) / 2 ** 20;

describe("ORT load probe", () => {
  it("measures the freed memory malloc keeps after ORT loads 36 MiB of conv kernels, and next to none for a tiny model", async () => {
    const conv = await probeOrtLoad(files.get("conv-weights")!, { env });
    const tiny = await probeOrtLoad(files.get("tiny")!, { env });
    // glibc 2.36, onnxruntime 1.32: ~90 MiB held after the conv probe's load, < 1 MiB after tiny's.
    expect(conv.heldMiB).toBeGreaterThan(30);
    expect(conv.inUseMiB).toBeGreaterThan(30); // the session's own weights
    expect(conv.rssMiB!).toBeGreaterThan(conv.heldMiB! + conv.inUseMiB! - 8);
    expect(tiny.heldMiB).toBeLessThan(3);
    // Three fresh workers each: the figure taken is the middle of the runs' range (the conv
    // probe's load held 72, 81 or 90 MiB in three processes; estimate says so where they differ).
    const [least, most] = conv.heldRangeMiB!;
    expect(least).toBeLessThanOrEqual(conv.heldMiB!);
    expect(most).toBeGreaterThanOrEqual(conv.heldMiB!);
    expect(conv.heldMiB!).toBeCloseTo((least + most) / 2, 6);
    // The load's own peak above its end (VmHWM reset before it): the conv probe's kernels are
    // held with their pre-packed copies before some go back to the kernel (8.6 MiB here), tiny
    // has nothing to hold twice.
    expect(conv.peakAboveEndMiB!).toBeGreaterThan(2);
    expect(tiny.peakAboveEndMiB!).toBeLessThan(1);
    // The held memory as blocks the next requests can take, from the run that held the median:
    // about all it held for the conv probe (a piece is at least 32 KiB, so smaller scraps are
    // left out), near none for tiny.
    expect(total(conv.freePieces)).toBeGreaterThan(least - 4);
    expect(total(conv.freePieces)).toBeLessThan(most + 1);
    expect(conv.freePieces!.some((p) => p.bytes >= 4 * 2 ** 20)).toBe(true);
    expect(total(tiny.freePieces)).toBeLessThan(3);
  }, 120_000);

  it("finds nothing held when the mmap threshold is fixed (MALLOC_MMAP_THRESHOLD_): the cause is glibc's dynamic threshold", async () => {
    const fixed = await probeOrtLoad(files.get("conv-weights")!, { env: { ...env, MALLOC_MMAP_THRESHOLD_: "131072" }, runs: 1 });
    expect(fixed.heldMiB).toBeLessThan(5);
  }, 120_000);

  it("modelTerms runs it only when asked, and the ORT runtimes' features carry it", async () => {
    const file = files.get("conv-weights")!;
    expect((await modelTerms(file)).ortLoad).toEqual({});
    const t = await modelTerms(file, {}, { ortLoad: ["python-ort"], tmpDir: scratch });
    const load = t.ortLoad["python-ort"]!;
    expect(t.ortLoad["node-ort"]).toBeUndefined();
    expect(load.heldMiB).toBeGreaterThan(30);
    expect(features("python-ort", t, { maxBatch: 8, evalSamples: 16 }).heldMiB).toBe(load.heldMiB);
    // What the load left in use: the 36 MiB of kernels as ORT keeps them (its figure, not W's),
    // and its peak above its end, both the ORT runtimes' load terms.
    expect(load.inUseMiB).toBeGreaterThan(30);
    expect(load.peakAboveEndMiB).not.toBeNull();
    // Less what of it was never written: next to nothing for a float model's load.
    expect(load.untouchedMiB).toBeLessThan(0.5);
    expect(features("python-ort", t, { maxBatch: 8, evalSamples: 16 }).loadMiB).toBe(load.inUseMiB! - load.untouchedMiB!);
    expect(features("python-ort", t, { maxBatch: 8, evalSamples: 16 }).loadTransientMiB).toBe(load.peakAboveEndMiB);
    // Its pieces take the arena's first regions and tables off the arena's new pages.
    expect(load.freePieces!.length).toBeGreaterThan(0);
    const run = { maxBatch: 8, batchSizes: [1, 8], evalSamples: 16 };
    const withPieces = features("python-ort", t, run);
    const without = features("python-ort", withoutHeldPieces(t, "python-ort"), run);
    expect(withPieces.activationMiB).toBeLessThan(without.activationMiB);
    expect(withPieces.ortFirstRequestMiB).toBeLessThanOrEqual(without.ortFirstRequestMiB);
  }, 120_000);

  it("node-ort's probe is its own child's load: the same 36 MiB of kernels, held and in use, and the blocks its arena finds", async () => {
    const file = files.get("conv-weights")!;
    // Run with TMPDIR a folder of its own: onnxruntime-node's telemetry writes a
    // mat-debug-<pid>.log there as the session is made, and the probe must take it away.
    const saved = process.env.TMPDIR;
    const ownTmp = join(dir, "node-probe-tmp");
    mkdirSync(ownTmp);
    process.env.TMPDIR = ownTmp;
    let node: Awaited<ReturnType<typeof probeOrtLoad>>;
    try {
      node = await probeOrtLoad(file, { runtime: "node-ort", runs: 1 });
    } finally {
      if (saved === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = saved;
    }
    expect(readdirSync(ownTmp)).toEqual([]);
    // onnxruntime-node's session creation on a Node main thread: the kernels it keeps, what it
    // freed on the way (the first large free raised the mmap threshold, so the copies after it
    // stayed in the heap), and pieces of that carved by the addon.
    expect(node.inUseMiB).toBeGreaterThan(30);
    expect(node.heldMiB).toBeGreaterThan(30);
    expect(node.peakAboveEndMiB).not.toBeNull();
    expect(total(node.freePieces)).toBeGreaterThan(8);
    const tiny = await probeOrtLoad(files.get("tiny")!, { runtime: "node-ort", runs: 1 });
    expect(tiny.heldMiB).toBeLessThan(5);
    const t = await modelTerms(file, {}, { ortLoad: ["node-ort"] });
    expect(features("node-ort", t, { maxBatch: 8, evalSamples: 16 }).heldMiB).toBe(t.ortLoad["node-ort"]!.heldMiB);
    expect(features("python-ort", t, { maxBatch: 8, evalSamples: 16 }).heldMiB).toBe(0);
  }, 120_000);
});

describe("what a quantized model's load leaves unwritten", () => {
  // ORT's QLinearConv takes its reordered filters from the session's arena as the session
  // loads: the arena's first region (1 MiB) is malloc'd whole and only the filters' pages are
  // written. The probe sees it as bytes malloc has out that RSS never grew by (an int8
  // ResNet-50: 16 MiB, its model-load estimated +11 % while they were counted).
  it("finds the arena's untouched room after a QDQ CNN's load, in a Python worker and a node-ort child, and the estimate leaves it out of the load", async () => {
    const qdq = join(dir, "qdq-cnn.onnx");
    await promisify(execFile)(pythonPath(), [join(REPO_ROOT, "test/fixtures/quantized_model.py"), qdq, "qdq-cnn"]);
    for (const runtime of ["python-ort", "node-ort"] as const) {
      const p = await probeOrtLoad(qdq, { runtime, runs: 1, env });
      expect(p.untouchedMiB, runtime).toBeGreaterThan(0.5);
      expect(p.untouchedMiB, runtime).toBeLessThan(1.2);
    }
    const t = await modelTerms(qdq, {}, { ortLoad: ["python-ort"], tmpDir: scratch });
    const load = t.ortLoad["python-ort"]!;
    expect(features("python-ort", t, { maxBatch: 1, evalSamples: 1 }).loadMiB).toBeCloseTo(load.inUseMiB! - load.untouchedMiB!, 9);
    const tiny = await probeOrtLoad(files.get("tiny")!, { env, runs: 1 });
    expect(tiny.untouchedMiB).toBeLessThan(0.3);
  }, 120_000);
});

describe("a model whose weights are in an external data file", () => {
  // ORT maps the data file and keeps what it does not pre-pack there, read in place: the probe's
  // process shows the table's and the bias's mappings, none resident, and none of the packed
  // weight's (src/estimate/ort-mapped.ts).
  it("the probe finds the mappings ORT reads in place, and the ORT runtimes' estimate counts them from the first request on", async () => {
    const model = join(dir, "external", "x.onnx");
    mkdirSync(join(dir, "external"));
    await promisify(execFile)(pythonPath(), [join(REPO_ROOT, "test/fixtures/external_data_model.py"), model]);
    const MIB = 2 ** 20;
    for (const runtime of ["python-ort", "node-ort"] as const) {
      const p = await probeOrtLoad(model, { runtime, runs: 1, env });
      const maps = p.fileMaps!;
      expect(maps.every((m) => m.file === "x.onnx.data"), runtime).toBe(true);
      const mapped = maps.reduce((s, m) => s + m.size, 0);
      // The 2 MiB table and a page of bias; not the 128 KiB weight ORT packed.
      expect(mapped, runtime).toBeGreaterThanOrEqual(2 * MIB + 1024);
      expect(mapped, runtime).toBeLessThan(2 * MIB + 128 * 1024);
      expect(maps.reduce((s, m) => s + m.resident, 0), runtime).toBeLessThan(64 * 1024);
    }
    const t = await modelTerms(model, {}, { ortLoad: ["python-ort", "node-ort"], tmpDir: scratch });
    expect(t.externalTensors.map((x) => [x.name, x.idsPerSample])).toEqual([["table", 16], ["w", null], ["bias", null]]);
    const run = { maxBatch: 8, batchSizes: [1, 8], evalSamples: 16 };
    for (const runtime of ["python-ort", "node-ort"]) {
      const f = features(runtime, t, run);
      expect(f.mappedWeightMiB, runtime).toBeCloseTo((2 * MIB + 1024) / MIB, 3);
      // The first request's 16 ids read their windows of the table, and the bias whole.
      expect(f.firstRequestMiB, runtime).toBeGreaterThan(0.5);
    }
    // The window a read of the data file maps, measured on the table (table-reads.ts).
    const table = t.externalTensors.find((x) => x.name === "table")!;
    expect(table.window).toBeGreaterThanOrEqual(4096);
    expect(table.window).toBeLessThanOrEqual(2 * MIB);
    expect(t.tableWindowsUnavailable).toBeUndefined();
    // memlane-rt maps its plan: the same table, read in place, is its own term there, its bytes
    // out of the weights until requests read them.
    const n = await modelTerms(model, {}, { nativeLoad: true });
    expect(n.nativeTables!.map((x) => [x.bytes, x.idsPerSample])).toEqual([[2 * MIB, 16]]);
    expect(n.nativeTables![0]!.window).toBeGreaterThanOrEqual(4096);
    const nf = features("native", n, run);
    expect(nf.nativeReleasedMiB).toBeGreaterThanOrEqual(2);
    expect(nf.mappedWeightMiB).toBeGreaterThan(0);
    expect(nf.mappedWeightMiB).toBeLessThanOrEqual(2);
    expect(nf.firstRequestMiB).toBeGreaterThan(0);
  }, 180_000);
});

describe("the load probe's answer is checked", () => {
  it("takes a sound answer, and an unavailable one as nulls", () => {
    expect(checkedRaw({ available: true, heldKiB: 1024, inUseKiB: -3, rssKiB: -10, peakAboveEndKiB: 512, freePieces: [[4096, 2], [32, 11]] }))
      .toEqual({ available: true, heldKiB: 1024, inUseKiB: -3, rssKiB: -10, anonKiB: null, peakAboveEndKiB: 512, freePieces: [[4096, 2], [32, 11]], fileMaps: null });
    expect(checkedRaw({ available: true, heldKiB: 1024, inUseKiB: -3, rssKiB: -10, freePieces: null }).freePieces).toBeNull();
    // The load's peak: null where the kernel refused the VmHWM reset (or a worker that predates it).
    expect(checkedRaw({ available: true, heldKiB: 1, inUseKiB: 1, rssKiB: 1, peakAboveEndKiB: null }).peakAboveEndKiB).toBeNull();
    expect(checkedRaw({ available: true, heldKiB: 1, inUseKiB: 1, rssKiB: 1 }).peakAboveEndKiB).toBeNull();
    // Anonymous RSS growth: may be negative (a trim), null from a worker that predates it.
    expect(checkedRaw({ available: true, heldKiB: 1, inUseKiB: 1, rssKiB: 1, anonKiB: -4 }).anonKiB).toBe(-4);
    expect(checkedRaw({ available: true, heldKiB: 1, inUseKiB: 1, rssKiB: 1 }).anonKiB).toBeNull();
    expect(checkedRaw({ available: false, heldKiB: null, inUseKiB: null, rssKiB: null })).toEqual({ available: false, heldKiB: null, inUseKiB: null, rssKiB: null, anonKiB: null, peakAboveEndKiB: null, freePieces: null, fileMaps: null });
    // The external data's mappings: [file, offset, size, resident] bytes.
    expect(checkedRaw({ available: true, heldKiB: 1, inUseKiB: 1, rssKiB: 1, fileMaps: [["m.onnx.data", 0, 4096, 0]] }).fileMaps).toEqual([["m.onnx.data", 0, 4096, 0]]);
  });
  it("refuses NaN, a negative held figure, a string, and a missing `available`, naming the field", () => {
    expect(() => checkedRaw({ available: true, heldKiB: Number.NaN, inUseKiB: 1, rssKiB: 1 })).toThrow(/`heldKiB` .*not a finite number >= 0/);
    expect(() => checkedRaw({ available: true, heldKiB: -50000, inUseKiB: 1, rssKiB: 1 })).toThrow(/`heldKiB` -50000/);
    expect(() => checkedRaw({ available: true, heldKiB: 1, inUseKiB: "12", rssKiB: 1 })).toThrow(/`inUseKiB` "12"/);
    expect(() => checkedRaw({ available: true, heldKiB: 1, inUseKiB: 1, rssKiB: 1, anonKiB: Number.NaN })).toThrow(/`anonKiB`/);
    expect(() => checkedRaw({ heldKiB: 1, inUseKiB: 1, rssKiB: 1 })).toThrow(/no boolean `available`/);
    expect(() => checkedRaw({ available: true, heldKiB: 1, inUseKiB: 1, rssKiB: 1, peakAboveEndKiB: -4 })).toThrow(/`peakAboveEndKiB` -4/);
    expect(() => checkedRaw({ available: true, heldKiB: 1, inUseKiB: 1, rssKiB: 1, peakAboveEndKiB: "big" })).toThrow(/`peakAboveEndKiB` "big"/);
    expect(() => checkedRaw(null)).toThrow(/not an object/);
    const ok = { available: true, heldKiB: 1, inUseKiB: 1, rssKiB: 1 };
    expect(() => checkedRaw({ ...ok, freePieces: [[4096, -1]] })).toThrow(/`freePieces` \[\[4096,-1\]\]/);
    expect(() => checkedRaw({ ...ok, freePieces: [[4096]] })).toThrow(/`freePieces`/);
    expect(() => checkedRaw({ ...ok, freePieces: "lots" })).toThrow(/`freePieces` "lots"/);
    expect(() => checkedRaw({ ...ok, freePieces: [[1.5, 2]] })).toThrow(/positive integers/);
    expect(() => checkedRaw({ ...ok, fileMaps: [[7, 0, 4096, 0]] })).toThrow(/`fileMaps` \[\[7,0,4096,0\]\]/);
    expect(() => checkedRaw({ ...ok, fileMaps: [["m.data", -1, 4096, 0]] })).toThrow(/`fileMaps`/);
    expect(() => checkedRaw({ ...ok, fileMaps: "all" })).toThrow(/`fileMaps` "all"/);
  });
});
