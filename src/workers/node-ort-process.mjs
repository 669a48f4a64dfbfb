// Body of the node-ort child process (plain JavaScript so that it runs under any loader: tsx,
// vitest, or none). node-ort.ts forks it for each benchmark, as the Python workers are spawned:
// its figures are a Node process that imports onnxruntime-node, loads the model and runs it,
// and nothing of the orchestrator's (docs/memory.md, "node-ort in a process of its own").
// Same measurement as the Python worker's infer.ort: phases import, runtime-create,
// model-load, first-inference, steady-inference, each marked with a reading of /proc/self.
//
// The task arrives as the first IPC message; its tensors arrive as one file (`tensorFile`,
// written by node-ort.ts) read here in one piece after model-load, so that the eval set is
// held once, as the Python workers hold theirs, and its delivery leaves no garbage to be
// collected (or not) before a mark. Messages go back over IPC, the outputs through a file
// beside the inputs (`outputsFile`); the process exits when the orchestrator disconnects, or
// when it dies.
import { readFileSync, realpathSync, writeFileSync } from "node:fs";
import { basename, dirname } from "node:path";
import { createRequire } from "node:module";
import { performance } from "node:perf_hooks";
import { checkFeeds, feedsAt, gatherOutputs } from "./node-ort-io.mjs";
import { TYPED, writeTensorsSync } from "./tensor-file.mjs";
import { profileOrt } from "./ort-profile.mjs";

const send = (m) => new Promise((resolve, reject) => process.send(m, (err) => (err ? reject(err) : resolve())));
process.on("disconnect", () => process.exit(0));

function kib(text, key) {
  const m = new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(text);
  return m ? Number(m[1]) : 0;
}

// mallinfo2 through the native addon (node-ort.ts passes its path where it can read it), as the
// Python worker reads it: what ORT's load leaves in malloc's free lists is held RSS, and how
// much depends on this process's malloc history (docs/memory.md, "node-ort's held memory").
// The load probe also asks it which blocks of that held memory the arena can hand out.
let mallocInfo = () => null;
let freePieces = () => null;
function loadAddon(addonPath) {
  if (!addonPath) return;
  try {
    const addon = createRequire(import.meta.url)(addonPath);
    if (typeof addon.mallocInfo === "function") mallocInfo = addon.mallocInfo;
    if (typeof addon.freePieces === "function") freePieces = addon.freePieces;
  } catch {
    // the figures are then absent, never made up
  }
}

function readMemory() {
  const roll = readFileSync("/proc/self/smaps_rollup", "utf8");
  const status = readFileSync("/proc/self/status", "utf8");
  const m = mallocInfo();
  return {
    rssKiB: kib(roll, "Rss"),
    pssKiB: kib(roll, "Pss"),
    ussKiB: kib(roll, "Private_Clean") + kib(roll, "Private_Dirty"),
    swapKiB: kib(roll, "Swap"),
    hwmKiB: kib(status, "VmHWM"),
    ...(m ? { mallocFreeKiB: m.freeKiB, mallocInUseKiB: m.inUseKiB } : {}),
  };
}

let hwmReset = false;
function resetHwm() {
  try {
    writeFileSync("/proc/self/clear_refs", "5");
    hwmReset = true;
  } catch {
    hwmReset = false;
    // Not permitted in some containers: the peak then falls back to samples.
  }
}

// The raw /proc/self/smaps text, read here so that it is taken at the mark; the parent parses
// and classifies it (src/memory/smaps.ts, mapping-kinds.ts) like a worker's summary. Every end
// mark carries it, and the first start mark (the baseline of the first phase's growth).
let smapsSent = false;
function smapsText() {
  smapsSent = true;
  try {
    return readFileSync("/proc/self/smaps", "utf8");
  } catch {
    return undefined;
  }
}

/**
 * A full collection, and the native finalizers it queues: onnxruntime-node's output tensors give
 * their buffers back in finalizers that run on a later turn of the event loop, so a gc() alone
 * left them (gpt2's steady RSS after it: 129.3, 102.0, 106.0 MiB in three runs).
 */
async function collectGarbage() {
  if (!globalThis.gc) return;
  for (let i = 0; i < 2; i++) {
    globalThis.gc();
    await new Promise((resolve) => setImmediate(resolve));
  }
}

// The last phase's start and end readings (the load probe's figures are model-load's), and its
// anonymous RSS at each mark (RssAnon: the load probe's anonKiB, read beside the readings).
const lastPhase = { start: null, end: null, startAnonKiB: null, endAnonKiB: null };
const anonKiB = () => kib(readFileSync("/proc/self/status", "utf8"), "RssAnon");

async function phase(name, fn) {
  resetHwm();
  const tStart = Date.now();
  const startMemory = readMemory();
  lastPhase.start = startMemory;
  lastPhase.startAnonKiB = anonKiB();
  await send({ type: "phase", name, mark: "start", tMs: tStart, memory: startMemory, smapsText: smapsSent ? undefined : smapsText() });
  const value = await fn();
  const tEnd = Date.now();
  // A full collection before the end reading (the process runs with --expose-gc, node-ort.ts):
  // without it the phase's end figures held whatever dead output tensors V8 had not collected
  // yet, which moved opt's steady RSS between 118, 128 and 132 MiB from run to run; with it,
  // 109.4-109.7 in three runs of four, 113.4 in the other. The garbage still counts in the phase's
  // peak (VmHWM over the phase).
  await collectGarbage();
  lastPhase.end = readMemory();
  lastPhase.endAnonKiB = anonKiB();
  await send({ type: "phase", name, mark: "end", tMs: tEnd, memory: lastPhase.end, smapsText: smapsText() });
  return value;
}

function percentile(sorted, p) {
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}

/**
 * A batch of `n` samples from the eval set, wrapping around when it is smaller. A batch that
 * lies in one piece is a view, as the Python workers' slices of their eval set are: a copy of
 * every eval chunk left ~one eval set of garbage in the process whose collection, or not,
 * before the steady-inference mark moved node-ort's steady RSS by ±6 % from run to run of the
 * same model (docs/memory.md, "node-ort").
 */
function batchOf(inputs, sampleShape, total, n, start = 0) {
  const per = sampleShape.reduce((a, b) => a * b, 1);
  if (start + n <= total) return inputs.subarray(start * per, (start + n) * per);
  const out = new Float32Array(n * per);
  for (let i = 0; i < n; i++) {
    const s = (start + i) % total;
    out.set(inputs.subarray(s * per, (s + 1) * per), i * per);
  }
  return out;
}


/**
 * The task's tensors, as views of the tensor file read in one piece: `{ type, offset, length }`
 * (elements) each, at offsets node-ort.ts aligned to 64 bytes. A file small enough for Node's
 * buffer pool may start unaligned in it; it is copied then (a few KiB).
 */
function tensorsOf(file, refs) {
  let buf = readFileSync(file);
  if (buf.byteOffset % 64 !== 0) buf = Buffer.from(buf);
  const base = buf.byteOffset;
  const view = (r) => {
    const T = TYPED[r.type];
    if (!T) throw new Error(`tensor file ${file}: unknown element type ${JSON.stringify(r.type)}`);
    if (r.offset % T.BYTES_PER_ELEMENT || r.offset + r.length * T.BYTES_PER_ELEMENT > buf.length)
      throw new Error(`tensor file ${file}: ${r.type} of ${r.length} at byte ${r.offset} lies outside its ${buf.length} bytes`);
    return new T(buf.buffer, base + r.offset, r.length);
  };
  return refs.map(view);
}

/**
 * The load probe's answer (src/estimate/ort-load.ts checks it), in the Python probe's fields
 * (python/memlane_worker/tasks/estimate_ort.py): what this process's malloc holds and has out
 * after onnxruntime-node's session creation, its RSS growth and peak above the end, and which
 * held blocks the arena can hand out. The blocks are carved after the end mark went out (its
 * smaps text read and sent), so they are what a run's eval set and first request find next.
 * The same process as a run's: the same import, runtime-create and load on the main thread,
 * where onnxruntime-node loads and runs.
 */
/**
 * [[file name, file offset, size, resident], ...] in bytes: this process's mappings of the files
 * beside `model` (its external data, which ORT maps and reads its un-packed initializers from in
 * place), as the Python probe's memory.file_mappings reads them.
 */
function fileMappings(model) {
  const prefix = `${dirname(realpathSync(model))}/`;
  const skip = realpathSync(model);
  const out = [];
  let current = null;
  for (const line of readFileSync("/proc/self/smaps", "utf8").split("\n")) {
    const header = /^([0-9a-f]+)-([0-9a-f]+) \S+ ([0-9a-f]+) \S+ \S+\s*(.*)$/.exec(line);
    if (header) {
      const name = header[4];
      current = name.startsWith(prefix) && name !== skip ? [basename(name), parseInt(header[3], 16), parseInt(header[2], 16) - parseInt(header[1], 16), 0] : null;
      if (current) out.push(current);
    } else if (current && line.startsWith("Rss:")) current[3] = Number(line.split(/\s+/)[1]) * 1024;
  }
  return out;
}

function loadProbeResult({ start, end, startAnonKiB, endAnonKiB }, model) {
  if (start?.mallocFreeKiB === undefined || end?.mallocFreeKiB === undefined)
    return { available: false, heldKiB: null, inUseKiB: null, rssKiB: null, anonKiB: null, peakAboveEndKiB: null, freePieces: null, fileMaps: null };
  let pieces = null;
  try {
    pieces = freePieces();
  } catch {
    // The carving child failed: the held figure stands, the estimate counts the arena whole.
  }
  return {
    available: true,
    heldKiB: Math.max(0, end.mallocFreeKiB - start.mallocFreeKiB),
    inUseKiB: end.mallocInUseKiB - start.mallocInUseKiB,
    rssKiB: end.rssKiB - start.rssKiB,
    anonKiB: endAnonKiB - startAnonKiB,
    // VmHWM was reset at the phase's start; a refused reset leaves the process's peak (null).
    peakAboveEndKiB: hwmReset ? Math.max(0, end.hwmKiB - end.rssKiB) : null,
    freePieces: pieces,
    fileMaps: fileMappings(model),
  };
}

const firstMessage = () => new Promise((resolve) => process.once("message", resolve));

async function main() {
  const task = await firstMessage();
  loadAddon(task.addon);
  const { model, shape, batchSizes, iterations, warmup, threads, ort: ortOpts = {}, io, profile } = task;
  // Multi-input form: every graph input from `feeds`, every output back; else the first input/output.
  // Checked before anything loads (names, dtypes, shapes: the data is read after model-load).
  const feeds = task.feeds;
  if (io) checkFeeds(io, feeds);
  const sampleShape = io ? null : shape.slice(1);
  const batchedFeed = io ? feeds.find((f) => io.inputs.find((s) => s.name === f.name)?.batchAxis >= 0) : null;
  const total = io ? (batchedFeed ? batchedFeed.shape[0] : 1) : shape[0];
  const ort = await phase("import", async () => import("onnxruntime-node"));
  const options = await phase("runtime-create", async () => ({
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    executionMode: "sequential",
    enableCpuMemArena: ortOpts.cpuMemArena ?? true,
    enableMemPattern: ortOpts.memPattern ?? true,
    graphOptimizationLevel: ortOpts.graphOptimizationLevel === "disable" ? "disabled" : (ortOpts.graphOptimizationLevel ?? "all"),
  }));
  const session = await phase("model-load", () => ort.InferenceSession.create(model, options));
  if (task.loadProbe) return send({ type: "result", value: loadProbeResult(lastPhase, model) });
  // The eval set comes in here, between the phases: import, runtime-create and model-load are
  // onnxruntime-node's own, as the Python workers' are (theirs arrives in shared memory, its
  // pages touched by the inferences); from first-inference on the process holds it once.
  const [inputs, ...feedData] = tensorsOf(task.tensorFile, [task.inputs, ...(feeds ?? []).map((f) => f.data)]);
  const byName = io ? new Map(feeds.map((f, k) => [f.name, { ...f, data: feedData[k] }])) : null;
  const inName = session.inputNames[0];
  const outName = session.outputNames[0];
  const run = async (data, n) => {
    if (io) return session.run(data);
    const res = await session.run({ [inName]: new ort.Tensor("float32", data, [n, ...sampleShape]) });
    return res[outName];
  };
  const batchAt = (n, start = 0) => (io ? feedsAt(ort, io, byName, n, start) : batchOf(inputs, sampleShape, total, n, start));
  await phase("first-inference", () => run(batchAt(batchSizes[0]), batchSizes[0]));
  const result = await phase("steady-inference", async () => {
    const latencyMs = {};
    for (const n of batchSizes) {
      const data = batchAt(n);
      for (let i = 0; i < warmup; i++) await run(data, n);
      const times = [];
      for (let i = 0; i < iterations; i++) {
        const t0 = performance.now();
        await run(data, n);
        times.push(performance.now() - t0);
      }
      times.sort((a, b) => a - b);
      latencyMs[`batch${n}`] = {
        p50: percentile(times, 50),
        p99: percentile(times, 99),
        mean: times.reduce((a, b) => a + b, 0) / times.length,
      };
    }
    const maxBatch = Math.max(...batchSizes);
    const chunks = [];
    let outShape = [];
    for (let s = 0; s < total; s += maxBatch) {
      const n = Math.min(maxBatch, total - s);
      const out = await run(batchAt(n, s), n);
      if (io) {
        chunks.push(out);
        continue;
      }
      chunks.push(out.data);
      outShape = out.dims.slice(1);
    }
    const big = latencyMs[`batch${maxBatch}`];
    if (io) {
      const outputSet = gatherOutputs(io, chunks);
      return { latencyMs, throughputPerS: (maxBatch * 1000) / big.mean, outputs: new Float32Array(0), outputShape: [], outputSet };
    }
    const outputs = new Float32Array(chunks.reduce((a, c) => a + c.length, 0));
    let off = 0;
    for (const c of chunks) {
      outputs.set(c, off);
      off += c.length;
    }
    return { latencyMs, throughputPerS: (maxBatch * 1000) / big.mean, outputs, outputShape: [total, ...outShape] };
  });
  await session.release?.();
  if (profile) {
    // After steady-inference (its marks are taken): ORT's profiler in a session of its own.
    const data = batchAt(profile.batch);
    const runIn = async (s) => (io ? s.run(data) : s.run({ [inName]: new ort.Tensor("float32", data, [profile.batch, ...sampleShape]) }));
    result.profile = await profileOrt(ort, model, options, runIn, profile.batch, profile.iterations);
  }
  const versions = { onnxruntime: ort.env?.versions?.node ?? ort.env?.versions?.common ?? "unknown", node: process.version };
  // The outputs go back through the file node-ort.ts named (tensor-file.mjs: past 2 GiB a message fails).
  const { outputs, outputSet, ...rest } = result;
  const [outputsRef, ...setRefs] = writeTensorsSync(task.outputsFile, [outputs, ...(outputSet ?? []).map((o) => o.data)]);
  const outputRefs = { outputs: outputsRef, ...(outputSet ? { outputSet: setRefs } : {}) };
  const shapes = outputSet ? { outputSet: outputSet.map(({ data: _data, ...o }) => o) } : {};
  await send({ type: "result", value: { ...rest, ...shapes, versions, device: "cpu" }, outputRefs });
}

main().catch(async (err) => {
  await send({ type: "error", message: err?.message ?? String(err), stack: err?.stack, code: typeof err?.code === "number" ? err.code : undefined }).catch(() => {});
  process.exitCode = 1;
});
