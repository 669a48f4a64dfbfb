/**
 * The report's `distributed` section: per rank and phase, the memory of every rank of a
 * distributed train stage (its own marks and the sampler's samples of its pid), beside the
 * pipeline's single-process training of the same model, with the parameter, gradient and
 * optimizer-state bytes each process held (measured from its tensors). docs/distributed.md.
 */
import type { PhaseMarkInput } from "../memory/phases.ts";
import type { TrackedProcess } from "../memory/sampler.ts";
import { phasesOf } from "./build.ts";
import { mdTable, num, pct, signed, textTable } from "./format.ts";
import type { DistributedReport, PhaseReport, Report, TensorBytes, TrainingReport } from "./schema.ts";

/** What a distributed stage collected (pipeline/distributed/exec.ts fills it): the report's stage facts, and each rank's raw marks. */
export interface DistributedRecord extends Omit<DistributedReport, "ranks" | "single"> {
  /** `local`: a child of this host's launcher: the only ranks this host's sampler can have measured (a remote rank's pid may equal a local process's). */
  ranks: Array<{ rank: number; pid: number; host: string; local: boolean; marks: PhaseMarkInput[]; accuracy: number; tensorBytes: TensorBytes | null }>;
}

const peakOf = (phases: readonly PhaseReport[]): number => Math.max(0, ...phases.map((p) => p.peakRssMiB));

export function distributedReports(
  records: readonly DistributedRecord[],
  tracks: readonly TrackedProcess[],
  gpuOn: boolean,
  single: TrainingReport | null,
): DistributedReport[] {
  return records.map((r) => ({
    stage: r.stage, arch: r.arch, strategy: r.strategy, backend: r.backend, nproc: r.nproc, nnodes: r.nnodes,
    launcher: r.launcher, restarts: r.restarts, note: r.note,
    ranks: r.ranks.map((k) => ({
      rank: k.rank, host: k.host, pid: k.pid, accuracy: k.accuracy, tensorBytes: k.tensorBytes,
      phases: phasesOf(k.marks, k.local ? tracks : [], k.pid, gpuOn),
    })),
    single: single && {
      stage: single.stage ?? null, pid: single.pid, accuracy: single.accuracy,
      peakRssMiB: peakOf(single.phases), tensorBytes: single.tensorBytes ?? null,
    },
  }));
}

const mib = (bytes: number | undefined): string => (bytes === undefined ? "—" : num(bytes / 2 ** 20, 3));
const ratio = (a: number, b: number | undefined): string => (b === undefined || b === 0 ? "—" : `${num(a / b, 2)}x`);

/** Rows: the single process, then every rank: accuracy, peak RSS, tensors, and the ratios to single. */
export function comparisonRows(d: DistributedReport): string[][] {
  const s = d.single;
  const rows: string[][] = [];
  if (s) {
    const t = s.tensorBytes ?? undefined;
    rows.push([`single (${s.stage ?? "train"})`, String(s.pid), "—", pct(s.accuracy), num(s.peakRssMiB, 1), "1.00x", mib(t?.params), mib(t?.grads), mib(t?.optimizer), "1.00x"]);
  }
  for (const k of d.ranks) {
    const t = k.tensorBytes ?? undefined;
    const peak = peakOf(k.phases);
    const held = t ? t.params + t.grads + t.optimizer : undefined;
    const singleHeld = s?.tensorBytes ? s.tensorBytes.params + s.tensorBytes.grads + s.tensorBytes.optimizer : undefined;
    rows.push([`rank ${k.rank}`, String(k.pid), k.host, pct(k.accuracy), num(peak, 1), ratio(peak, s?.peakRssMiB), mib(t?.params), mib(t?.grads), mib(t?.optimizer),
      held === undefined ? "—" : ratio(held, singleHeld)]);
  }
  return rows;
}

export const DISTRIBUTED_HEADER = ["process", "pid", "host", "accuracy", "peak RSS MiB", "peak / single", "params MiB", "grads MiB", "optimizer MiB", "tensors / single"];

/** Per-phase RSS of every rank side by side (rows: phases; columns: ranks). */
function phaseGrid(d: DistributedReport): string[][] {
  const names = [...new Set(d.ranks.flatMap((k) => k.phases.map((p) => p.name)))];
  return names.map((n) => [n, ...d.ranks.map((k) => {
    const p = k.phases.find((x) => x.name === n);
    return p ? `${num(p.rssMiB, 1)} (${signed(p.deltaRssMiB, 1)}, peak ${num(p.peakRssMiB, 1)})` : "—";
  })]);
}

export function distributedTitle(d: DistributedReport): string {
  return `${d.stage}: ${d.strategy.toUpperCase()} on ${d.ranks.length} ranks (${d.nnodes} host${d.nnodes > 1 ? "s" : ""}, ${d.backend}), ${d.arch}`;
}

export function distributedMarkdown(report: Report): string[] {
  const out: string[] = [];
  for (const d of report.distributed ?? []) {
    out.push("", `### distributed ${distributedTitle(d)}`, "",
      `Launcher: torch.distributed.run pid ${d.launcher.pid}${d.restarts ? `, ${d.restarts} restart(s) of the group` : ""}. ` +
      "Each rank is its own process: peak RSS is the highest reading over its phases; params / grads / optimizer are the bytes of the " +
      "tensors the process held after its last step (an FSDP rank counts its shard). Ratios are to the single-process training.",
      ...(d.note ? ["", `Note: ${d.note}`] : []),
      "", mdTable(DISTRIBUTED_HEADER, comparisonRows(d)),
      "", "RSS MiB at each phase end per rank (Δ over the phase, peak inside it):", "",
      mdTable(["phase", ...d.ranks.map((k) => `rank ${k.rank} (pid ${k.pid})`)], phaseGrid(d)));
  }
  return out;
}

/** Lines for the terminal after the run. */
export function distributedSummary(report: Report): string[] {
  const out: string[] = [];
  for (const d of report.distributed ?? [])
    out.push(`Distributed ${distributedTitle(d)}; memory per rank vs single process:`, textTable(DISTRIBUTED_HEADER, comparisonRows(d)), "");
  return out;
}
