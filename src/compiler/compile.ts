/** The compiler pipeline: load -> order -> fold/infer -> rewrite -> arena -> write. */
import { type Lifetime, aliasByteCopies, checkArena, lifetimes, planArena } from "./arena.ts";
import { type Built, buildPlan } from "./build.ts";
import { concatInputOffsets, concatInputsInPlace, placeConcatInputs } from "./concat-in-place.ts";
import { CompileError } from "./errors.ts";
import { inferGraph } from "./infer.ts";
import { DTYPE_BYTES, type Graph } from "./ir.ts";
import { loadOnnx } from "./load.ts";
import { runsOneSampleAtATime } from "./native-chunk.ts";
import { topoSort } from "./order.ts";
import { MAX_PROFILES, type PlanHeader } from "./plan-format.ts";
import { readPlan } from "./read.ts";
import { fuseAttention } from "./fuse-attention.ts";
import { fuseGelu } from "./fuse-gelu.ts";
import { fuseLayerNorm } from "./fuse-layernorm.ts";
import { fuseSilu } from "./fuse-silu.ts";
import { keepPairInputs } from "./fused-conv-pair.ts";
import { rewriteIsNaN } from "./rewrite-isnan.ts";
import { rewriteBatchFirstLstm } from "./lstm-batch-first.ts";
import { foldBatchNorm, fuseRelu, pruneDead } from "./rewrite.ts";
import { checkVocabulary } from "./supported.ts";
import { writePlanFile } from "./write.ts";
import { mergeProfiles, sharedWeightBytes } from "./merge-profiles.ts";

export const COMPILER_VERSION = "0.1.0";

/** The arena a plan with Concat inputs in place may take, as a multiple of the plan's without (compileGraph). */
export const CONCAT_IN_PLACE_MAX_GROWTH = 1.125;

/** Options of {@link compileOnnx}. */
export interface CompileOptions {
  /** Read the written plan back through the validating reader (default true). */
  verify?: boolean;
  /** Overrides the header's `producer` string. */
  producer?: string;
  /**
   * Full model shape per graph input, -1 at the batch axis (e.g. `{ input_ids: [-1, 128] }`):
   * fixes the symbolic non-batch dimensions, which the plan records (docs/plan-format.md).
   */
  inputShapes?: Record<string, number[]>;
  /**
   * Several shape profiles in one plan (TensorRT's optimization profiles, with exact shapes):
   * one `inputShapes` map each, e.g. `[{ input_ids: [-1, 16] }, { input_ids: [-1, 128] }]`.
   * The graph is compiled once per profile; the weights are stored once. Not with `inputShapes`.
   */
  profiles?: Record<string, number[]>[];
}

interface ResolvedOptions {
  verify: boolean;
  producer: string;
  inputShapes: Record<string, number[]>;
  profiles: Record<string, number[]>[];
}

const DEFAULTS: Readonly<ResolvedOptions> = Object.freeze({ verify: true, producer: `memlane-compiler ${COMPILER_VERSION}`, inputShapes: {}, profiles: [] });

function resolveOptions(opts: CompileOptions | undefined): ResolvedOptions {
  if (opts === undefined) return DEFAULTS;
  if (typeof opts !== "object" || opts === null) throw new CompileError(`options: expected an object, received ${String(opts)}`, "option");
  const known = new Set(["verify", "producer", "inputShapes", "profiles"]);
  for (const k of Object.keys(opts)) if (!known.has(k)) throw new CompileError(`options.${k}: unknown option (expected one of ${[...known].join(", ")})`, "option");
  if (opts.verify !== undefined && typeof opts.verify !== "boolean") throw new CompileError(`options.verify: expected a boolean, received ${JSON.stringify(opts.verify)}`, "option");
  if (opts.producer !== undefined && typeof opts.producer !== "string") throw new CompileError(`options.producer: expected a string, received ${JSON.stringify(opts.producer)}`, "option");
  if (opts.inputShapes !== undefined && (typeof opts.inputShapes !== "object" || opts.inputShapes === null || Array.isArray(opts.inputShapes))) {
    throw new CompileError(`options.inputShapes: expected an object { inputName: [dims, -1 at the batch axis] }, received ${JSON.stringify(opts.inputShapes)}`, "option");
  }
  if (opts.profiles !== undefined) {
    if (!Array.isArray(opts.profiles) || opts.profiles.length < 1 || opts.profiles.length > MAX_PROFILES)
      throw new CompileError(`options.profiles: expected a list of 1..${MAX_PROFILES} inputShapes maps, received ${JSON.stringify(opts.profiles)}`, "option");
    opts.profiles.forEach((p, i) => {
      if (typeof p !== "object" || p === null || Array.isArray(p))
        throw new CompileError(`options.profiles[${i}]: expected an object { inputName: [dims, -1 at the batch axis] }, received ${JSON.stringify(p)}`, "option");
    });
    if (opts.inputShapes !== undefined) throw new CompileError("options.inputShapes: not with options.profiles (give each profile's shapes there)", "option");
  }
  return { ...DEFAULTS, ...Object.fromEntries(Object.entries(opts).filter(([, v]) => v !== undefined)) };
}

/** What {@link compileOnnx} produced. Byte figures are per sample unless named otherwise. */
export interface CompileSummary {
  planPath: string;
  planBytes: number;
  ops: number;
  opCounts: Record<string, number>;
  weightsBytes: number;
  arenaBytesPerSample: number;
  lowerBoundPerSample: number;
  /** arenaBytesPerSample / lowerBoundPerSample (1 = optimal). */
  ratio: number;
  /** Graph inputs and outputs in ONNX order; shape has -1 at batchAxis. */
  inputs: { name: string; shape: number[]; dtype: string; batchAxis: number }[];
  outputs: { name: string; shape: number[]; dtype: string; batchAxis: number }[];
  warnings: string[];
  /**
   * Every shape profile of the plan (one unless `profiles` was given), in plan order; the
   * fields above are profile 0's, except `weightsBytes` (all profiles' weights, shared ones once).
   */
  profiles: ProfileSummary[];
}

/** One shape profile of a compiled plan. */
export interface ProfileSummary {
  ops: number;
  arenaBytesPerSample: number;
  lowerBoundPerSample: number;
  /** Concat inputs (activations) in all, and those written in place (concat-in-place.ts). */
  concatInputs: number;
  concatInputsInPlace: number;
  /** This profile's weights, shared ones included. */
  weightsBytes: number;
  inputs: CompileSummary["inputs"];
  outputs: CompileSummary["outputs"];
}

/** Everything but the file write: used by compileOnnx and by tests that inspect the plan. */
export function compileGraph(g: Graph, producer = DEFAULTS.producer, inputShapes: Record<string, number[]> = {}) {
  checkVocabulary(g.file, g.nodes, g.inputs.map((i) => i.name));
  // torch's batch_first LSTM pattern first: the layout-0 LSTM inside it has no batch-first form.
  const lg = rewriteBatchFirstLstm(rewriteIsNaN(g));
  const inf = inferGraph({ ...lg, nodes: topoSort(lg) }, { inputShapes });
  foldBatchNorm(inf);
  fuseRelu(inf);
  fuseSilu(inf);
  fuseLayerNorm(inf);
  fuseGelu(inf);
  fuseAttention(inf);
  const dead = pruneDead(inf);
  if (dead.length > 0) inf.warnings.push(`removed ${dead.length} node(s) whose results no output uses: ${dead.slice(0, 5).join(", ")}`);
  const elemBytes = (n: string) => DTYPE_BYTES[inf.dtypes.get(n) ?? "float32"];
  const lives: Lifetime[] = lifetimes(inf.nodes, inf.inputs, inf.outputs, inf.shapes, elemBytes);
  keepPairInputs(inf.nodes, inf.outputs, inf.shapes, lives);
  const { planned, aliasOf } = aliasByteCopies(inf.nodes, lives, inf.inputs, inf.outputs);
  const plan = (ls: Lifetime[]) => {
    const arena = planArena(ls);
    // Cheap insurance: a wrong arena silently corrupts activations at run time.
    checkArena(ls, arena.offsets, arena.bytesPerSample);
    for (const [name, at] of aliasOf) arena.offsets.set(name, arena.offsets.get(at)!);
    return arena;
  };
  let arena = plan(planned);
  let built = buildPlan(inf, arena, producer, g.file);
  // Concat inputs in place, where memlane-rt runs this plan one sample at a time anyway
  // (concat-in-place.ts), and where the arena grows by an eighth at most: a Concat's output then
  // lives from its first input's birth, slices not yet written included. densenet121: 8232 ->
  // 8624 KiB a sample (+4.8 %), and none of its 58 Concats copies (3.1 ms of 58 at batch 1, 1
  // thread); a U-Net's skip Concat would hold its decoder half from the encoder on.
  const inPlace = placeConcatInputs(inf.nodes, planned, aliasOf, inf.shapes, elemBytes, inf.inputs, inf.outputs);
  if (inPlace.inside.size > 0 && runsOneSampleAtATime(built.header)) {
    const tried = plan(inPlace.planned);
    if (tried.bytesPerSample <= arena.bytesPerSample * CONCAT_IN_PLACE_MAX_GROWTH) {
      arena = tried;
      concatInputOffsets(inPlace.inside, arena.offsets);
      built = buildPlan(inf, arena, producer, g.file, true);
    }
  }
  return { inf, lives, arena, built };
}

export function summarise(header: PlanHeader, planPath: string, planBytes: number, warnings: string[], all: PlanHeader[] = [header]): CompileSummary {
  const opCounts: Record<string, number> = {};
  for (const op of header.ops) opCounts[op.op] = (opCounts[op.op] ?? 0) + 1;
  const profiles = all.map(profileSummary);
  const { ops, arenaBytesPerSample, lowerBoundPerSample, inputs, outputs } = profileSummary(header);
  return {
    planPath, planBytes, ops, opCounts, weightsBytes: sharedWeightBytes(all),
    arenaBytesPerSample, lowerBoundPerSample,
    ratio: lowerBoundPerSample > 0 ? arenaBytesPerSample / lowerBoundPerSample : 1,
    inputs, outputs, warnings, profiles,
  };
}

function profileSummary(h: PlanHeader): ProfileSummary {
  const io = (ids: number[]) => ids.map((id) => {
    const t = h.tensors[id]!;
    return { name: t.name, shape: [...t.shape], dtype: t.dtype, batchAxis: t.shape.indexOf(-1) };
  });
  const concatInputs = h.ops.filter((op) => op.op === "Concat").reduce((a, op) => a + op.inputs.filter((id) => h.tensors[id]?.kind !== "weight").length, 0);
  return {
    ops: h.ops.length, arenaBytesPerSample: h.arena.bytesPerSample, lowerBoundPerSample: h.arena.lowerBoundPerSample,
    concatInputs, concatInputsInPlace: concatInputsInPlace(h).length,
    weightsBytes: h.tensors.filter((t) => t.kind === "weight").reduce((a, t) => a + t.bytes, 0),
    inputs: io(h.inputs), outputs: io(h.outputs),
  };
}

/** Profiles whose inputs have the same shapes would make a request's profile ambiguous. */
function checkDistinct(file: string, headers: PlanHeader[]): void {
  const seen = new Map<string, number>();
  headers.forEach((h, i) => {
    const key = JSON.stringify(h.inputs.map((id) => h.tensors[id]!.shape));
    const j = seen.get(key);
    if (j !== undefined) throw new CompileError(`${file}: options.profiles[${i}] gives the inputs the same shapes as options.profiles[${j}] (${key}); each profile needs its own`, "option", { profile: i });
    seen.set(key, i);
  });
}

/**
 * Compile an ONNX model into a memlane-rt plan (docs/plan-format.md). On any error nothing
 * is written (the plan appears atomically or not at all).
 *
 * @throws CompileError naming the file, node and op; PlanError if verification fails.
 */
export async function compileOnnx(onnxPath: string, planPath: string, opts?: CompileOptions): Promise<CompileSummary> {
  const o = resolveOptions(opts);
  const shapeSets = o.profiles.length > 0 ? o.profiles : [o.inputShapes];
  const builts: Built[] = [];
  const warnings: string[] = [];
  for (const [i, shapes] of shapeSets.entries()) {
    // A fresh graph each: compiling rewrites and folds the graph it is given.
    const { inf, built } = compileGraph(loadOnnx(onnxPath), o.producer, shapes);
    builts.push(built);
    for (const w of inf.warnings) if (!warnings.includes(w)) warnings.push(shapeSets.length > 1 && i > 0 ? `profile ${i}: ${w}` : w);
  }
  checkDistinct(onnxPath, builts.map((b) => b.header));
  const merged = mergeProfiles(builts);
  const planBytes = writePlanFile(planPath, merged);
  if (o.verify) readPlan(planPath);
  return summarise(merged.profiles[0]!, planPath, planBytes, warnings, merged.profiles);
}

