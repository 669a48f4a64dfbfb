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
 * embedding table read by Gather at the ids fed, the kernel's fault-around window (64 KiB,
 * Linux's default `fault_around_bytes`) about each row read. The first request's ids touch a
 * share of the table's windows (ids drawn uniformly: 1 - (1 - 1/W)^T of W windows for T ids),
 * and by the end of the run every window has been read (ids of every eval sample and request):
 * BERT's 23.4 MiB table after one request of 128 ids, 7.3 MiB resident, 21.4 after five more.
 */
import type { ConstTensor, Graph } from "../compiler/ir.ts";
import type { FileMap } from "./ort-load.ts";

const MIB = 2 ** 20;
/** Linux's default fault-around: a read fault on a cached file page maps the 64 KiB about it. */
export const FAULT_AROUND_BYTES = 64 * 1024;

/** An initializer stored in an external data file, and how a request reads it. */
export interface ExternalTensor {
  name: string;
  location: string;
  offset: number;
  length: number;
  /** For a table Gather reads at ids fed as a graph input: the ids a sample holds; null for a tensor read whole. */
  idsPerSample: number | null;
}

/**
 * The file's externally stored initializers. `idsPerSample(input)`: the elements a sample of a
 * graph input holds (as fed), or null where unknown (its table then counts whole).
 */
export function externalTensors(g: Pick<Graph, "nodes" | "consts" | "inputs">, idsPerSample: (input: string) => number | null): ExternalTensor[] {
  const graphInputs = new Set(g.inputs.map((i) => i.name));
  const gatheredBy = new Map<string, string>();
  for (const n of g.nodes) {
    const [table, ids] = n.inputs;
    if (n.opType === "Gather" && table && ids && graphInputs.has(ids) && Number(n.attrs.get("axis") ?? 0) === 0) gatheredBy.set(table, ids);
  }
  const out: ExternalTensor[] = [];
  for (const [name, c] of g.consts as Map<string, ConstTensor>) {
    if (!c.external) continue;
    const ids = gatheredBy.get(name);
    out.push({ name, ...c.external, idsPerSample: ids === undefined ? null : idsPerSample(ids) });
  }
  return out;
}

/** Whether a mapping of the probe's holds the tensor's bytes (the file's name, its range inside). */
function mappedBy(t: ExternalTensor, maps: readonly FileMap[]): FileMap | undefined {
  const file = t.location.split("/").pop();
  return maps.find((m) => m.file === file && m.offset <= t.offset && t.offset + t.length <= m.offset + m.size);
}

/** Of W windows, how many T uniform draws touch, expected. */
const windowsTouched = (windows: number, draws: number): number => windows * (1 - (1 - 1 / windows) ** draws);

/**
 * MiB of external data a run makes resident beyond the load: after its first request (of
 * `firstBatch` samples) and by its end. 0 and 0 without external data or without the probe's
 * mappings (an older probe, a failed one).
 */
export function mappedWeightsMiB(tensors: readonly ExternalTensor[], maps: readonly FileMap[] | null | undefined, firstBatch: number): { firstMiB: number; endMiB: number } {
  if (!maps || maps.length === 0 || tensors.length === 0) return { firstMiB: 0, endMiB: 0 };
  let first = 0;
  let end = 0;
  const counted = new Set<FileMap>();
  for (const t of tensors) {
    const m = mappedBy(t, maps);
    if (!m) continue;
    // The load's resident pages of that mapping are in its own figures: only the rest is new.
    const already = counted.has(m) ? 0 : Math.min(m.resident, t.length);
    counted.add(m);
    const bytes = Math.max(0, t.length - already);
    end += bytes;
    if (t.idsPerSample === null) first += bytes;
    else {
      const windows = Math.max(1, Math.ceil(t.length / FAULT_AROUND_BYTES));
      first += Math.min(bytes, windowsTouched(windows, t.idsPerSample * firstBatch) * FAULT_AROUND_BYTES);
    }
  }
  return { firstMiB: first / MIB, endMiB: end / MIB };
}
