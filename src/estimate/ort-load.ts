/**
 * What glibc's malloc keeps of what ONNX Runtime frees while it loads a model (docs/memory.md,
 * "Held by malloc"), measured by a probe: a fresh Python worker creates the CPU session the
 * way `infer.ort` does and reads mallinfo2 around it (python/memlane_worker/tasks/estimate_ort.py).
 *
 * Why measured, not derived from the graph: ORT frees its load-time copies of the weights, the
 * first large free raises glibc's dynamic mmap threshold (up to 32 MiB), and later blocks
 * below it come from the heap and stay there once freed. How much stays depends on the sizes
 * and order of every allocation, the small ones between the big ones too: replaying
 * resnet18's blocks of 64 KiB and more through glibc gives 82 MiB held, replaying all of them
 * 76.5, the worker measures 76.4. The same probe in an `infer.ort` worker and a bare thread
 * agree (76.3), and onnxruntime-node (then in a worker_thread) held about as much (73.5 MiB), so
 * the figure stands for both ORT runtimes.
 *
 * The same load does not always hold the same: the conv probe's 36 MiB of kernels (four 9 MiB
 * blocks) left 72, 81 and 90 MiB in three fresh processes, resnet18 76.4 in each of four. The
 * process's address layout decides it, and the size of its environment moves the layout
 * (layout-draws.ts). So the probe runs `runs` times (Python: 5, each in an environment of
 * another size; Node: 3), each in a fresh worker, and gives the middle of what they held
 * (heldEstimateMiB) and the median of its other figures. Each run costs a process start, the
 * runtime's import and one session creation (about half a second unloaded; 2 s for a 130 MB
 * model).
 */
import { statSync } from "node:fs";
import { Supervisor } from "../workers/index.ts";
import { runNodeOrtLoadProbe } from "../workers/node-ort.ts";
import { workerSpecs } from "../workers/specs.ts";
import { LAYOUT_DRAWS, layoutDrawEnv } from "./layout-draws.ts";

const MIB = 2 ** 20;
/** Runs whose held amounts differ by at most this are one heap state (glibc's coin gives two far apart). */
const HELD_ALIKE_MIB = 1;

interface Raw {
  available: boolean;
  heldKiB: number | null;
  inUseKiB: number | null;
  rssKiB: number | null;
  /** Anonymous RSS growth over the load (RssAnon); null where not read (a worker that predates it). */
  anonKiB: number | null;
  peakAboveEndKiB: number | null;
  /** [[sizeKiB, count], ...]: the held blocks the arena gave out (python/memlane_worker/free_pieces.py); null where it could not tell. */
  freePieces: Array<[number, number]> | null;
  /** [[file name, offset, size, resident], ...] bytes: the model's other files the session mapped; null where not read. */
  fileMaps: Array<[string, number, number, number]> | null;
}

/** A mapping of a file beside the model (its external data) after the load, bytes. */
export interface FileMap {
  file: string;
  offset: number;
  size: number;
  resident: number;
}

/** Free blocks malloc holds after the load, as the probe carved them: `count` blocks of `bytes`. */
export interface FreePieces {
  bytes: number;
  count: number;
}

export interface OrtLoadProbe {
  /** Freed memory malloc still holds after the session is created, MiB; null where mallinfo2 cannot be read. */
  heldMiB: number | null;
  /** What the load left allocated (the session's weights and its graph), MiB; null likewise. */
  inUseMiB: number | null;
  /** The probe's RSS growth over the session creation, MiB; null likewise. */
  rssMiB: number | null;
  /**
   * Of inUseMiB and heldMiB, the bytes never written, MiB (what malloc has out or keeps, less
   * the load's anonymous RSS growth; 0 at least): the tails of the arena regions a quantized
   * model's pre-packed weights were taken from (ORT's PrePack allocates from the session's
   * arena, whose regions double: 2, 2, 4, 8, 16 MiB for an int8 ResNet-50, about 16 of them free).
   * Not resident after the load, and the first requests' tensors land there before the arena
   * grows (ort-arena.ts loadFreeBytes). About 0.1 MiB for a float model; null where unknown,
   * absent where not probed for (taken as 0).
   */
  untouchedMiB?: number | null;
  /**
   * How far RSS rose during the session creation above where it ended, MiB: blocks ORT held side
   * by side before freeing some, which malloc gave back to the kernel (mmapped ones). null where
   * the kernel refuses the VmHWM reset (the peak would be the process's, not the load's).
   */
  peakAboveEndMiB: number | null;
  /**
   * The held memory as blocks the session's arena could take without growing RSS (ORT's first
   * regions and the regions' handle tables, ort-heap-reuse.ts), from the run whose heldMiB is
   * the median; null where it could not be carved.
   */
  freePieces: FreePieces[] | null;
  /**
   * The mappings of the model's external data the session kept (the initializers ORT reads in
   * place, ort-mapped.ts), from the first run (the same in every run); null where not read,
   * absent where not probed for.
   */
  fileMaps?: FileMap[] | null;
  /**
   * The blocks of every run that held the median amount (within HELD_ALIKE_MIB), freePieces'
   * run among them: which blocks a load leaves differs from process to process even where the
   * amount does not (regnet_y_800mf's python-ort arena found 6.0, 9.4 or 13.3 MiB of its 102 in
   * them, with 39.0 MiB held each time), so an estimate takes the median over these
   * (model-terms.ts ortArenaMiB) rather than one run's draw. Absent where not probed so.
   */
  freePiecesAlike?: FreePieces[][];
  /**
   * The least and most held over the probe's runs, MiB (null where any run could not measure):
   * the same load holds one of two amounts from process to process (convnext_tiny in a node-ort
   * child: 19.7 or 80.5-87.2 MiB), which an estimate of one run cannot know in advance.
   */
  heldRangeMiB?: [number, number] | null;
}

/** The ORT runtimes, each probed in a process of its own kind (a Python worker, a node-ort child). */
export type OrtRuntime = "python-ort" | "node-ort";

interface ProbeOptions {
  threads?: number;
  /** Passed to the Python workers (MALLOC_* settings: the run's own). */
  env?: Record<string, string>;
  runs?: number;
  /**
   * Whose load (default python-ort). node-ort's is its own child's (node-ort.ts), where
   * onnxruntime-node loads on the main thread of a Node process: resnet18's load holds 93.9 MiB
   * there against 76.3 in a Python worker, and the held blocks its arena then finds differ too
   * (docs/memory.md, "node-ort's own load probe").
   */
  runtime?: OrtRuntime;
}

/** The middle value (the upper one of an even count); null when any run could not measure. */
export function medianOrNull(xs: ReadonlyArray<number | null>): number | null {
  if (xs.length === 0 || xs.some((x) => x === null)) return null;
  const s = (xs as number[]).slice().sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

/**
 * The held figure an estimate takes from the probe's runs, MiB: the middle of the least and the
 * most they held (null when any run could not measure). A load holds one of two amounts from
 * process to process (glibc's coin, docs/memory.md), and which one a later run lands on is not
 * known in advance: the middle is off by half the gap either way, where the runs' median was
 * right or off by the whole gap. deeplabv3_mobilenet_v3_large held 63.8-80.7 MiB in the probe's
 * node-ort children and 65.0-79.4 in its Python workers; one compare run measured model-load at
 * 190.2 and 190.3 MiB in the two, where the medians put them 8.5 % under and 8.4 % over.
 */
export function heldEstimateMiB(held: ReadonlyArray<number | null>): number | null {
  const range = rangeOrNull(held);
  return range && (range[0] + range[1]) / 2;
}

/**
 * Runs the probe on `onnxPath`, each run in a fresh worker (memory an earlier load freed would
 * be reused and hide what this one keeps), `runs` times (default: 5 for Python, 3 for Node).
 * `env` is passed to the workers (MALLOC_* settings: the run's own).
 */
export function probeOrtLoad(onnxPath: string, opts: ProbeOptions = {}): Promise<OrtLoadProbe> {
  // One probe per file version and settings in a process: a run's memory budget (before a
  // benchmark starts) and its report's estimate (at the end) ask for the same model.
  const st = statSync(onnxPath);
  const key = JSON.stringify([onnxPath, st.size, st.mtimeMs, opts]);
  let p = memo.get(key);
  if (!p) {
    p = runProbes(onnxPath, opts);
    memo.set(key, p);
    p.catch(() => memo.delete(key));
  }
  return p;
}

const memo = new Map<string, Promise<OrtLoadProbe>>();

/** The least and the most of the runs' figures; null when any run could not measure. */
export function rangeOrNull(xs: ReadonlyArray<number | null>): [number, number] | null {
  if (xs.length === 0 || xs.some((x) => x === null)) return null;
  return [Math.min(...(xs as number[])), Math.max(...(xs as number[]))];
}

/**
 * The worker's answer, checked: a worker is trusted no more than its messages (a NaN or a
 * negative held figure would be subtracted from every ORT estimate, its slope being 1).
 */
export function checkedRaw(value: unknown): Raw {
  const bad = (why: string): never => {
    throw new Error(`estimate.ortLoad: the worker's result ${why}: ${JSON.stringify(value)?.slice(0, 200)}`);
  };
  if (typeof value !== "object" || value === null) bad("is not an object");
  const v = value as Record<string, unknown>;
  if (typeof v.available !== "boolean") bad("has no boolean `available`");
  const field = (name: "heldKiB" | "inUseKiB" | "rssKiB" | "anonKiB" | "peakAboveEndKiB", min: number, nullable = false): number | null => {
    const x = v[name];
    if (!v.available || (nullable && (x === null || x === undefined))) return null;
    if (typeof x !== "number" || !Number.isFinite(x) || x < min) bad(`has \`${name}\` ${JSON.stringify(x)}, not a finite number >= ${min}`);
    return x as number;
  };
  // Held memory cannot be negative; what the load left allocated and RSS growth may (a trim).
  // The load's peak above its end: null where the VmHWM reset was refused.
  return { available: v.available as boolean, heldKiB: field("heldKiB", 0), inUseKiB: field("inUseKiB", -Infinity), rssKiB: field("rssKiB", -Infinity), anonKiB: field("anonKiB", -Infinity, true), peakAboveEndKiB: field("peakAboveEndKiB", 0, true), freePieces: checkedPieces(v), fileMaps: checkedFileMaps(v) };
}

/** The file mappings: null, or [file name, offset, size, resident] with a name and non-negative integers. */
function checkedFileMaps(v: Record<string, unknown>): Array<[string, number, number, number]> | null {
  const m = v.fileMaps;
  if (m === null || m === undefined || !v.available) return null;
  const entry = (x: unknown) => Array.isArray(x) && x.length === 4 && typeof x[0] === "string" && x.slice(1).every((n) => Number.isInteger(n) && (n as number) >= 0);
  if (!Array.isArray(m) || !m.every(entry))
    throw new Error(`estimate.ortLoad: the worker's result has \`fileMaps\` ${JSON.stringify(m)?.slice(0, 200)}, not null or [[file, offset, size, resident], ...]`);
  return m as Array<[string, number, number, number]>;
}

/** The carved blocks: null, or pairs of positive integers (a block size in KiB, a count). */
function checkedPieces(v: Record<string, unknown>): Array<[number, number]> | null {
  const p = v.freePieces;
  if (p === null || p === undefined || !v.available) return null;
  const pair = (x: unknown) => Array.isArray(x) && x.length === 2 && x.every((n) => Number.isInteger(n) && (n as number) > 0);
  if (!Array.isArray(p) || !p.every(pair))
    throw new Error(`estimate.ortLoad: the worker's result has \`freePieces\` ${JSON.stringify(p)?.slice(0, 200)}, not null or [[sizeKiB, count], ...] of positive integers`);
  return p as Array<[number, number]>;
}

/** One probe run's checked answer in MiB. */
function inMiB(r: Raw): OrtLoadProbe {
  const mib = (kib: number | null) => (r.available && kib !== null ? (kib * 1024) / MIB : null);
  const freePieces = r.freePieces?.map(([kib, count]) => ({ bytes: kib * 1024, count })) ?? null;
  const [held, inUse, anon] = [mib(r.heldKiB), mib(r.inUseKiB), mib(r.anonKiB)];
  const untouchedMiB = held !== null && inUse !== null && anon !== null ? Math.max(0, inUse + held - anon) : null;
  const fileMaps = r.fileMaps?.map(([file, offset, size, resident]) => ({ file, offset, size, resident })) ?? null;
  return { heldMiB: held, inUseMiB: inUse, rssMiB: mib(r.rssKiB), untouchedMiB, peakAboveEndMiB: mib(r.peakAboveEndKiB), freePieces, fileMaps };
}

/** `count` runs of the Python probe, each in a fresh worker. */
async function pythonRuns(onnxPath: string, opts: ProbeOptions, count: number): Promise<OrtLoadProbe[]> {
  const runs: OrtLoadProbe[] = [];
  const sup = await Supervisor.start();
  try {
    for (let i = 0; i < count; i++) {
      // The benchmark worker's thread settings (exec-model.ts pythonWorker), and an environment
      // of another size each run: another address layout, another level of held memory
      // (layout-draws.ts).
      const threads = String(opts.threads ?? 1);
      const env = { OMP_NUM_THREADS: threads, MKL_NUM_THREADS: threads, ...opts.env, ...layoutDrawEnv(i) };
      const w = await sup.spawn(workerSpecs.python({ name: "estimate-ort-load", env }));
      try {
        runs.push(inMiB(checkedRaw((await w.run("estimate.ortLoad", { model: onnxPath, threads: opts.threads ?? 1 }, { timeoutMs: 300_000 })).value)));
      } finally {
        await w.stop();
      }
    }
  } finally {
    await sup.close();
  }
  return runs;
}

/** `count` runs of node-ort's probe, each in a fresh child. */
async function nodeRuns(onnxPath: string, opts: ProbeOptions, count: number): Promise<OrtLoadProbe[]> {
  const runs: OrtLoadProbe[] = [];
  for (let i = 0; i < count; i++) runs.push(inMiB(checkedRaw(await runNodeOrtLoadProbe(onnxPath, opts.threads ?? 1))));
  return runs;
}

async function runProbes(onnxPath: string, opts: ProbeOptions): Promise<OrtLoadProbe> {
  // Python's draws spread over LAYOUT_DRAWS environments (layout-draws.ts); Node's held bytes did
  // not move with the environment's size (Qwen2: 19.8-21.0 MiB over five sizes), three suffice.
  const count = opts.runs ?? (opts.runtime === "node-ort" ? 3 : LAYOUT_DRAWS);
  const runs = opts.runtime === "node-ort" ? await nodeRuns(onnxPath, opts, count) : await pythonRuns(onnxPath, opts, count);
  const held = runs.map((r) => r.heldMiB);
  const medianHeld = medianOrNull(held);
  return {
    heldMiB: heldEstimateMiB(held),
    inUseMiB: medianOrNull(runs.map((r) => r.inUseMiB)),
    rssMiB: medianOrNull(runs.map((r) => r.rssMiB)),
    untouchedMiB: medianOrNull(runs.map((r) => r.untouchedMiB ?? null)),
    peakAboveEndMiB: medianOrNull(runs.map((r) => r.peakAboveEndMiB)),
    // The blocks of the run that held the median: held memory and its pieces from one heap.
    freePieces: runs.find((r) => r.heldMiB === medianHeld)?.freePieces ?? null,
    freePiecesAlike: medianHeld === null ? [] : runs.filter((r) => r.freePieces && r.heldMiB !== null && Math.abs(r.heldMiB - medianHeld) <= HELD_ALIKE_MIB).map((r) => r.freePieces!),
    heldRangeMiB: rangeOrNull(runs.map((r) => r.heldMiB)),
    fileMaps: runs[0]?.fileMaps ?? null,
  };
}
