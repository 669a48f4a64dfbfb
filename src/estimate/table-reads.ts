/**
 * Tables read in place, a row at a time: an embedding table a runtime maps from a file (ONNX
 * Runtime's external data, ort-mapped.ts; memlane-rt's plan) and Gather reads at the ids fed.
 *
 * A read of a row faults in what the page cache holds about its page: the kernel's fault-around
 * window (64 KiB by default) or, for a file freshly written, a whole large folio (up to 2 MiB on
 * kernel 6.18: a DLRM's plan just compiled maps 2 MiB a row read, the same plan half an hour
 * later 62 KiB). So the table becomes resident in steps of that window, which is measured on the
 * file itself before the run (`estimate.faultWindow`, python/memlane_worker/memory.py
 * fault_window), not assumed. With ids drawn uniformly, T ids touch 1 - (1 - 1/W)^T of a table's
 * W windows. The first request reads its batch's ids; by the run's end every eval sample's have
 * been read (the timed requests feed rows of the eval set).
 *
 * Before: memlane-rt counted every table whole from its first request (a DLRM of 46 MiB of
 * tables, one id a table a sample: first-inference +250 %, steady +7 %), and ORT's external
 * data by 64 KiB windows alone.
 */
import type { readPlan } from "../compiler/read.ts";
import { Supervisor } from "../workers/index.ts";
import { workerSpecs } from "../workers/specs.ts";

/** Linux's default fault-around: what a read fault on a cached file page maps about it, without a measurement. */
export const FAULT_AROUND_BYTES = 64 * 1024;

/** A table Gather reads at ids fed as a graph input: its bytes and the ids a sample holds. */
export interface TableRead {
  bytes: number;
  idsPerSample: number;
  /** Bytes one read of it maps, measured (probeFaultWindows); absent where not measured. */
  window?: number;
}

/** The most tables whose windows are measured (the largest); the rest take the largest's. */
export const MEASURED_TABLES = 32;

/** Expected bytes of a table of `bytes` resident after `ids` uniform reads, in windows of `window` bytes. */
export function tableBytesRead(bytes: number, ids: number, window: number): number {
  if (bytes <= 0 || ids <= 0) return 0;
  const windows = Math.max(1, Math.ceil(bytes / Math.max(1, window)));
  return Math.min(bytes, windows * (1 - (1 - 1 / windows) ** ids) * Math.max(1, window));
}

/**
 * Bytes one read maps, for each [offset, length] range of `file` (a fresh Python worker reads a
 * byte at 8 points of each and counts the mapping's resident bytes); null for a range it could
 * not tell. Where the worker failed, every window is null and `unavailable` says why (the
 * caller falls back on FAULT_AROUND_BYTES and the estimate names the reason).
 */
export async function probeFaultWindows(file: string, ranges: ReadonlyArray<readonly [number, number]>): Promise<{ windows: (number | null)[]; unavailable?: string }> {
  if (ranges.length === 0) return { windows: [] };
  let sup: Supervisor | undefined;
  try {
    sup = await Supervisor.start();
    const w = await sup.spawn(workerSpecs.python({ name: "estimate-fault-window" }));
    try {
      const v = (await w.run("estimate.faultWindow", { file, ranges: ranges.map((r) => [...r]) }, { timeoutMs: 60_000 })).value as { windows?: unknown };
      const windows = Array.isArray(v?.windows) ? v.windows : [];
      return { windows: ranges.map((_, i) => (typeof windows[i] === "number" && Number.isFinite(windows[i]) && (windows[i] as number) > 0 ? (windows[i] as number) : null)) };
    } finally {
      await w.stop();
    }
  } catch (err) {
    return { windows: ranges.map(() => null), unavailable: `the fault-window probe of ${file} failed: ${err instanceof Error ? err.message : String(err)}` };
  } finally {
    await sup?.close();
  }
}

/** A table in memlane-rt's plan file: where its bytes lie in the file, and how Gather reads it. */
export interface PlanTable extends TableRead {
  offset: number;
}

/**
 * The plan's weights that only Gather reads, on axis 0, at ids that are a plan input (a
 * sample's ids: the input's dims but the batch): memlane-rt maps its plan and reads them in
 * place. A weight any other op reads (a tied embedding's head) is read whole and is not one.
 */
export function planTables(plan: Pick<ReturnType<typeof readPlan>, "header" | "blob" | "fileLength">): PlanTable[] {
  const { tensors, ops } = plan.header;
  const blobStart = plan.fileLength - plan.blob.length;
  const readers = new Map<number, typeof ops>();
  for (const op of ops) for (const i of new Set(op.inputs)) if (i >= 0) readers.set(i, [...(readers.get(i) ?? []), op]);
  const out: PlanTable[] = [];
  tensors.forEach((t, id) => {
    if (t.kind !== "weight") return;
    const r = readers.get(id) ?? [];
    const ids = r.map((op) => {
      const idx = tensors[op.inputs[1] ?? -1];
      const gathers = op.op === "Gather" && op.inputs[0] === id && Number(op.attrs?.axis ?? 0) === 0 && idx?.kind === "input";
      return gathers ? idx!.shape.filter((d) => d >= 0).reduce((a, b) => a * b, 1) : null;
    });
    if (ids.length > 0 && ids.every((x) => x !== null)) out.push({ offset: blobStart + t.offset, bytes: t.bytes, idsPerSample: ids.reduce((a, b) => a! + b!, 0)! });
  });
  return out;
}

/**
 * The tables with the window each maps a read by, measured on `file` (the largest
 * MEASURED_TABLES; the rest take the largest one's); as they are, with the reason, where the
 * measurement failed.
 */
export async function withFaultWindows<T extends { offset: number; bytes: number; window?: number }>(file: string, tables: readonly T[]): Promise<{ tables: T[]; unavailable?: string }> {
  if (tables.length === 0) return { tables: [] };
  const measured = [...tables].sort((a, b) => b.bytes - a.bytes).slice(0, MEASURED_TABLES);
  const { windows, unavailable } = await probeFaultWindows(file, measured.map((t) => [t.offset, t.bytes] as const));
  const byTable = new Map(measured.map((t, i) => [t, windows[i]]));
  const fallback = windows[0] ?? undefined;
  const out = tables.map((t) => {
    const w = byTable.has(t) ? byTable.get(t) : fallback;
    return w != null ? { ...t, window: w } : { ...t };
  });
  return unavailable ? { tables: out, unavailable } : { tables: out };
}
