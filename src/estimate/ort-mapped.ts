/**
 * Weights ONNX Runtime reads in place from a model's external data file.
 *
 * A model saved with its initializers outside the .onnx file (every model over protobuf's 2 GiB,
 * and any saved with `save_as_external_data`) is not copied at load: ORT maps the data file,
 * tensor by tensor, pre-packs what its kernels pre-pack (MatMul and Conv weights: copies, the
 * mapping then dropped) and reads the rest where it lies. Those pages are the file's, resident
 * only once a request reads them: the load probe sees none of them (a base-size BERT with its
 * data outside: 25 MiB mapped after the load, 0 resident), and the run's RSS grows by them at
 * its requests (python-ort steady RSS -7.9 %, node-ort -6.5 % without this term).
 *
 * Which initializers stay mapped is the load probe's reading (ort-load.ts FileMap: its process's
 * mappings of the files beside the model), not a rule: it depends on ORT's fusions and which
 * kernels pre-pack. A tensor whose external range lies inside one of those mappings is read in
 * place.
 *
 * How much a request makes resident: a tensor read whole (a bias, a norm's scale) all of it; an
 * embedding table Gather reads at the ids fed, the windows its ids touch (table-reads.ts, the
 * window measured on the data file): BERT's 23.4 MiB table after one request of 128 ids, 7.25
 * MiB resident (7424 KiB of its mapping), 20.9 after five more.
 */
import { join } from "node:path";
import type { ConstTensor, Graph } from "../compiler/ir.ts";
import type { FileMap } from "./ort-load.ts";
import { FAULT_AROUND_BYTES, tableBytesRead, withFaultWindows } from "./table-reads.ts";

const MIB = 2 ** 20;

/** An initializer stored in an external data file, and how a request reads it. */
export interface ExternalTensor {
  name: string;
  location: string;
  offset: number;
  bytes: number;
  /** For a table Gather reads at ids fed as a graph input: the ids a sample holds; null for a tensor read whole. */
  idsPerSample: number | null;
  /** For such a table, the bytes one read of the data file maps, measured (table-reads.ts); absent where not. */
  window?: number;
}

/**
 * The file's externally stored initializers. `idsPerSample(input)`: the elements a sample of a
 * graph input holds (as fed), or null where unknown. A table is one whose every reader is a
 * Gather on axis 0 at ids fed as a graph input (a tied embedding that a MatMul reads too is
 * read whole).
 */
export function externalTensors(g: Pick<Graph, "nodes" | "consts" | "inputs">, idsPerSample: (input: string) => number | null): ExternalTensor[] {
  const graphInputs = new Set(g.inputs.map((i) => i.name));
  const readBy = new Map<string, Graph["nodes"]>();
  for (const n of g.nodes) for (const i of new Set(n.inputs)) if (i) readBy.set(i, [...(readBy.get(i) ?? []), n]);
  const out: ExternalTensor[] = [];
  for (const [name, c] of g.consts as Map<string, ConstTensor>) {
    if (!c.external) continue;
    const readers = readBy.get(name) ?? [];
    const ids = readers.map((n) => (n.opType === "Gather" && n.inputs[0] === name && graphInputs.has(n.inputs[1] ?? "") && Number(n.attrs.get("axis") ?? 0) === 0 ? idsPerSample(n.inputs[1]!) : null));
    const perSample = ids.length > 0 && ids.every((x) => x !== null) ? ids.reduce((a, b) => a! + b!, 0) : null;
    const { location, offset, length } = c.external;
    out.push({ name, location, offset, bytes: length, idsPerSample: perSample });
  }
  return out;
}

/** Whether a mapping of the probe's holds the tensor's bytes (the file's name, its range inside). */
function mappedBy(t: ExternalTensor, maps: readonly FileMap[]): FileMap | undefined {
  const file = t.location.split("/").pop();
  return maps.find((m) => m.file === file && m.offset <= t.offset && t.offset + t.bytes <= m.offset + m.size);
}

/**
 * MiB of external data a run makes resident beyond the load: after its first request (of
 * `firstBatch` samples) and by its end (every one of `evalSamples` read), a table by its
 * measured window (FAULT_AROUND_BYTES where not measured). 0 and 0 without external data or
 * without the probe's mappings (an older probe, a failed one).
 */
export function mappedWeightsMiB(tensors: readonly ExternalTensor[], maps: readonly FileMap[] | null | undefined, run: { firstBatch: number; evalSamples: number }): { firstMiB: number; endMiB: number } {
  if (!maps || maps.length === 0 || tensors.length === 0) return { firstMiB: 0, endMiB: 0 };
  let first = 0;
  let end = 0;
  const counted = new Set<FileMap>();
  for (const t of tensors) {
    const m = mappedBy(t, maps);
    if (!m) continue;
    // The load's resident pages of that mapping are in its own figures: only the rest is new.
    const already = counted.has(m) ? 0 : Math.min(m.resident, t.bytes);
    counted.add(m);
    const bytes = Math.max(0, t.bytes - already);
    if (t.idsPerSample === null) {
      first += bytes;
      end += bytes;
    } else {
      const window = t.window ?? FAULT_AROUND_BYTES;
      first += Math.min(bytes, tableBytesRead(t.bytes, t.idsPerSample * run.firstBatch, window));
      end += Math.min(bytes, tableBytesRead(t.bytes, t.idsPerSample * Math.max(run.evalSamples, run.firstBatch), window));
    }
  }
  return { firstMiB: first / MIB, endMiB: end / MIB };
}

/**
 * The tensors with each table's window measured on its data file (beside the model, in
 * `modelDir`): only the tables a load probe found mapped, as table-reads.ts measures memlane-rt's
 * plan tables.
 */
export async function withMeasuredWindows(tensors: readonly ExternalTensor[], maps: readonly FileMap[], modelDir: string): Promise<{ tensors: ExternalTensor[]; unavailable?: string }> {
  const tables = tensors.filter((t) => t.idsPerSample !== null && mappedBy(t, maps));
  const measured = new Map<string, ExternalTensor>();
  let unavailable: string | undefined;
  for (const location of new Set(tables.map((t) => t.location))) {
    const r = await withFaultWindows(join(modelDir, location), tables.filter((t) => t.location === location));
    for (const t of r.tables) measured.set(t.name, t);
    unavailable ??= r.unavailable;
  }
  const out = tensors.map((t) => measured.get(t.name) ?? t);
  return unavailable ? { tensors: out, unavailable } : { tensors: out };
}
