/**
 * The per-op profile of a runtime (`memlane compare --profile`, `.benchmark(rt, { profile: true })`;
 * docs/profiling.md): its report shape, how a worker's raw profile becomes it, its validation
 * and its markdown/terminal tables. Kept apart from schema.ts so that the profile is one concern.
 *
 * Every runtime takes its profile after its timed calls, in calls of its own, so the latency
 * figures are never perturbed by it: memlane-rt times each op's kernel with steady_clock
 * (serially: no batch lanes), ONNX Runtime with its own profiler (`enable_profiling`), whose
 * op types are those after ORT's fusions (FusedConv, ...).
 */
import { mdTable, textTableFit } from "./format.ts";

/** One op (a plan op for memlane-rt, a node after graph optimisation for ORT). */
export interface ProfileOp {
  name: string;
  opType: string;
  /** Ops folded into this one's kernel (memlane-rt: "Add+Relu" after a Conv); absent when none. */
  fused?: string;
  /**
   * The kernel memlane-rt ran for it, where an op has several (a Conv: "im2col", "winograd_avx2",
   * "pointwise_blas", ...; docs/native-cpu.md); absent for ORT and for ops with one kernel.
   */
  kernel?: string;
  /** Mean time per profiled call (summed over the call's chunks/kernel calls), ms. */
  msPerRun: number;
  /**
   * The fastest kernel call times the kernel calls a profiled call makes (calls / runs), ms: a
   * floor of msPerRun that a preempted call on a busy machine does not move. null when the
   * worker sent no minimum.
   */
  minMsPerRun: number | null;
  /** Kernel calls over all profiled calls (more than runs when a batch runs in chunks). */
  calls: number;
  /** msPerRun as % of opsMsPerRun. */
  pct: number;
}

export interface ProfileOpType {
  opType: string;
  /** Nodes of this type. */
  nodes: number;
  msPerRun: number;
  /** Sum of its ops' minMsPerRun; null when one is unknown. */
  minMsPerRun: number | null;
  pct: number;
}

export interface RuntimeProfile {
  /** Who timed the ops: `memlane-rt` (its executor) or `onnxruntime` (its profiler); `pytorch` only ever says unavailable. */
  source: "memlane-rt" | "onnxruntime" | "pytorch";
  /** Batch size of the profiled calls. */
  batch: number;
  /** Profiled calls (after one untimed warm-up call); 0 when unavailable. */
  runs: number;
  /** Mean wall time of a profiled call, ms, measured around the runtime's call with profiling on; null when unavailable. */
  wallMsMean: number | null;
  /** Sum of every op's msPerRun. */
  opsMsPerRun: number;
  /** Every op, slowest first. */
  ops: ProfileOp[];
  /** Time per op type, slowest first. */
  byType: ProfileOpType[];
  /** Why there is no profile ("the cuda backend cannot time its ops"); null when there is one. */
  unavailable: string | null;
}

interface RawOp {
  name?: unknown;
  opType?: unknown;
  fused?: unknown;
  kernel?: unknown;
  totalMs?: unknown;
  minMs?: unknown;
  calls?: unknown;
}

const num = (v: unknown): number => (typeof v === "number" && Number.isFinite(v) ? v : NaN);

/** A worker's `profile` value ({batch, runs, wallMsMean, ops: [{name, opType, fused?, kernel?, totalMs, calls}]} or {batch, unavailable}). */
export function profileFromTask(raw: unknown, source: RuntimeProfile["source"], where: string): RuntimeProfile {
  if (raw === null || typeof raw !== "object") throw new Error(`${where}: profile: expected an object, received ${typeof raw}`);
  const r = raw as { batch?: unknown; runs?: unknown; wallMsMean?: unknown; ops?: unknown; unavailable?: unknown };
  const batch = num(r.batch);
  if (typeof r.unavailable === "string")
    return { source, batch: Number.isFinite(batch) ? batch : 0, runs: 0, wallMsMean: null, opsMsPerRun: 0, ops: [], byType: [], unavailable: r.unavailable };
  const runs = num(r.runs);
  if (!Array.isArray(r.ops) || !(runs > 0) || !Number.isFinite(batch))
    throw new Error(`${where}: profile: expected {batch, runs > 0, ops: [...]}, received ${JSON.stringify(raw).slice(0, 200)}`);
  const ops = (r.ops as RawOp[]).map((o, i) => {
    const totalMs = num(o.totalMs);
    if (typeof o.name !== "string" || typeof o.opType !== "string" || !(totalMs >= 0))
      throw new Error(`${where}: profile.ops[${i}]: expected {name, opType, totalMs >= 0, calls}, received ${JSON.stringify(o).slice(0, 200)}`);
    const calls = num(o.calls) || 0;
    const minMs = num(o.minMs);
    const minMsPerRun = minMs >= 0 && calls > 0 ? (minMs * calls) / runs : null;
    return {
      name: o.name, opType: o.opType,
      ...(typeof o.fused === "string" && o.fused ? { fused: o.fused } : {}),
      ...(typeof o.kernel === "string" && o.kernel ? { kernel: o.kernel } : {}),
      msPerRun: totalMs / runs, minMsPerRun, calls, pct: 0,
    };
  });
  const total = ops.reduce((a, o) => a + o.msPerRun, 0);
  const share = (ms: number): number => (total > 0 ? (100 * ms) / total : 0);
  for (const o of ops) o.pct = share(o.msPerRun);
  ops.sort((a, b) => b.msPerRun - a.msPerRun);
  const types = new Map<string, ProfileOpType>();
  for (const o of ops) {
    const t = types.get(o.opType) ?? { opType: o.opType, nodes: 0, msPerRun: 0, minMsPerRun: 0, pct: 0 };
    t.nodes += 1;
    t.msPerRun += o.msPerRun;
    t.minMsPerRun = t.minMsPerRun === null || o.minMsPerRun === null ? null : t.minMsPerRun + o.minMsPerRun;
    types.set(o.opType, t);
  }
  const byType = [...types.values()].sort((a, b) => b.msPerRun - a.msPerRun);
  for (const t of byType) t.pct = share(t.msPerRun);
  const wall = num(r.wallMsMean);
  return { source, batch, runs, wallMsMean: Number.isFinite(wall) ? wall : null, opsMsPerRun: total, ops, byType, unavailable: null };
}

/** Problems of a report's runtimes[i].profile (present only when profiled); [] when valid. */
export function validateProfile(p: unknown, path: string): string[] {
  const errors: string[] = [];
  if (p === null || typeof p !== "object" || Array.isArray(p)) return [`${path}: expected an object, received ${p === null ? "null" : typeof p}`];
  const o = p as Record<string, unknown>;
  const want: Record<string, (v: unknown) => boolean> = {
    source: (v) => v === "memlane-rt" || v === "onnxruntime" || v === "pytorch",
    batch: (v) => Number.isFinite(v), runs: (v) => Number.isFinite(v), opsMsPerRun: (v) => Number.isFinite(v),
    wallMsMean: (v) => v === null || Number.isFinite(v), ops: Array.isArray, byType: Array.isArray,
    unavailable: (v) => v === null || typeof v === "string",
  };
  for (const [k, ok] of Object.entries(want)) if (!(k in o) || !ok(o[k])) errors.push(`${path}.${k}: missing or of the wrong type (received ${JSON.stringify(o[k])})`);
  (Array.isArray(o["ops"]) ? (o["ops"] as Record<string, unknown>[]) : []).forEach((op, i) => {
    if (typeof op?.["name"] !== "string" || typeof op["opType"] !== "string" || !Number.isFinite(op["msPerRun"]) || !Number.isFinite(op["pct"]))
      errors.push(`${path}.ops[${i}]: expected {name, opType, msPerRun, calls, pct}, received ${JSON.stringify(op).slice(0, 120)}`);
  });
  return errors;
}

const ms = (x: number): string => (x >= 10 ? x.toFixed(1) : x >= 0.1 ? x.toFixed(2) : x.toFixed(3));
const minMs = (x: number | null): string => (x === null ? "—" : ms(x));
export const TOP_OPS = 10;

/** One line under a profile: what was timed and how much of the call the ops cover. */
export function profileCaption(name: string, p: RuntimeProfile): string {
  if (p.unavailable) return `${name}: profile unavailable: ${p.unavailable}`;
  const cover = p.wallMsMean ? `; the ops sum to ${ms(p.opsMsPerRun)} ms, ${((100 * p.opsMsPerRun) / p.wallMsMean).toFixed(0)} % of the call` : "";
  return `${name} (${p.source === "onnxruntime" ? "ONNX Runtime's profiler" : "memlane-rt's executor"}): batch ${p.batch}, ${p.runs} profiled calls after the timed ones, ` +
    `${p.wallMsMean === null ? "?" : ms(p.wallMsMean)} ms a call with profiling on${cover}`;
}

export const opLabel = (o: ProfileOp): string => (o.fused ? `${o.opType}+${o.fused}` : o.opType);

/** Top ops and time per op type of each profiled runtime, as markdown; "" when none was profiled. */
export function profileMarkdown(runtimes: ReadonlyArray<{ name: string; profile?: RuntimeProfile }>, top = TOP_OPS): string {
  const out: string[] = [];
  for (const r of runtimes) {
    if (!r.profile) continue;
    const p = r.profile;
    out.push(`### ${r.name}`, "", `${profileCaption(r.name, p)}. min ms: the op's fastest kernel call × its calls per call, a floor that preemption does not move.`);
    if (p.unavailable) {
      out.push("");
      continue;
    }
    const ops = p.ops.slice(0, top);
    // The kernel column only where the runtime names its kernels (memlane-rt's CPU backend).
    const kernels = ops.some((o) => o.kernel !== undefined);
    out.push("", mdTable(["op", "type", ...(kernels ? ["kernel"] : []), "ms", "% of ops", "min ms"],
      ops.map((o) => [o.name, opLabel(o), ...(kernels ? [o.kernel ?? ""] : []), ms(o.msPerRun), o.pct.toFixed(1), minMs(o.minMsPerRun)])));
    out.push("", mdTable(["op type", "nodes", "ms", "% of ops", "min ms"], p.byType.map((t) => [t.opType, String(t.nodes), ms(t.msPerRun), t.pct.toFixed(1), minMs(t.minMsPerRun)])), "");
  }
  return out.join("\n").trim();
}

/** The terminal's block: per profiled runtime, its caption, top ops and op types side by side in one table; "" when none. */
export function profileTerminal(runtimes: ReadonlyArray<{ name: string; profile?: RuntimeProfile }>, width: number, top = 5): string {
  const out: string[] = [];
  for (const r of runtimes) {
    if (!r.profile) continue;
    const p = r.profile;
    out.push(profileCaption(r.name, p));
    if (p.unavailable) continue;
    const n = Math.max(Math.min(top, p.ops.length), Math.min(top, p.byType.length));
    const cut = (s: string): string => (s.length > 36 ? `${s.slice(0, 35)}…` : s);
    const rows = Array.from({ length: n }, (_, i) => {
      const o = p.ops[i];
      const t = p.byType[i];
      return [o ? cut(o.name) : "", o ? opLabel(o) : "", o ? ms(o.msPerRun) : "", o ? o.pct.toFixed(1) : "", t?.opType ?? "", t ? ms(t.msPerRun) : "", t ? t.pct.toFixed(1) : ""];
    });
    out.push(textTableFit(["top op", "type", "ms", "%", "op type", "ms", "%"], rows, width), "");
  }
  return out.join("\n").trimEnd();
}
