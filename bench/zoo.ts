/**
 * memlane-rt against ONNX Runtime (python-ort, CPU) on every real-zoo model at benchmark size
 * (224 px images, seq 128 for text): native/ORT p50 and p99 at each batch size and thread
 * count, a geometric-mean row and the model with the largest ratio, and steady USS minus the
 * model's weight bytes (native against ORT). Prints markdown to paste into a note.
 *
 *   npm run bench:zoo [-- --models resnet18,bert --batch 1,8 --threads 1,2 --iterations 30
 *                        --rounds 3 --exporter legacy|dynamo|both]
 *   npm run bench:zoo -- --onnx my_model.onnx,other.onnx [--seq 128 ...]
 *
 * --onnx measures your own exports the same way, a row each (named by the file), in place of
 * the zoo's (add --models to measure both).
 *
 * Each measurement is one `memlane compare` pipeline (the same export and benchmark stages,
 * each runtime in a fresh process, one stage at a time); a round runs native and ORT back to
 * back and the next round swaps their order, so drift on a shared machine falls on both.
 * Before and after each 2-thread round it measures where the two CPUs sit (bench/core-latency.ts): a
 * ratio with a round that began or ended on a split placement carries a "†", and a note counts them.
 * Models test/zoo/native-gaps.ts lists get a row with the reason memlane-rt gives, no figures.
 * Exports are cached outside the repository (bench/zoo-exports.ts); run directories go to a
 * temp dir that is removed at the end.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { basename, join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { modelTerms } from "../src/estimate/model-terms.ts";
import { pipeline } from "../src/pipeline/builder.ts";
import { runPipeline } from "../src/pipeline/run.ts";
import type { Report } from "../src/report/schema.ts";
import { NATIVE_GAPS } from "../test/zoo/native-gaps.ts";
import type { ZooExport, ZooReport } from "../test/zoo/rows.ts";
import { coreRoundTripNs, SPLIT_PLACEMENT_NS } from "./core-latency.ts";
import { zooExports, zooModels } from "./zoo-exports.ts";
import { type Cell, cellKey, formatMarkdown, median, type ModelRow } from "./zoo-table.ts";

const { values: a } = parseArgs({
  options: {
    models: { type: "string" },
    onnx: { type: "string" },
    exporter: { type: "string", default: "legacy" },
    batch: { type: "string", default: "1,8" },
    threads: { type: "string", default: "1,2" },
    iterations: { type: "string", default: "30" },
    warmup: { type: "string", default: "5" },
    // Three: a whole round may land on a bad placement (both of a runtime's pool threads on one
    // core for the process's life), and the median of two is their mean.
    rounds: { type: "string", default: "3" },
    seq: { type: "string", default: "128" },
    seed: { type: "string", default: "0" },
  },
});
const ints = (flag: string, v: string): number[] => {
  const xs = v.split(",").map(Number);
  if (!xs.length || xs.some((x) => !Number.isInteger(x) || x < 1)) throw new Error(`--${flag}: expected positive integers separated by commas, received "${v}"`);
  return xs;
};
const BATCHES = ints("batch", a.batch!);
const THREADS = ints("threads", a.threads!);
const [ITERS] = ints("iterations", a.iterations!);
const [ROUNDS] = ints("rounds", a.rounds!);
const [SEQ] = ints("seq", a.seq!);
const WARMUP = Number(a.warmup);
const SEED = Number(a.seed);
if (!["legacy", "dynamo", "both"].includes(a.exporter!)) throw new Error(`--exporter: expected legacy, dynamo or both, received "${a.exporter}"`);
const EXPORTERS = a.exporter === "both" ? ["legacy", "dynamo"] : [a.exporter!];
const log = (l: string): void => void process.stderr.write(`${l}\n`);

const onnxFiles = (a.onnx ?? "").split(",").filter(Boolean);
const missing = onnxFiles.filter((f) => !existsSync(f));
if (missing.length) throw new Error(`--onnx: no such file ${missing.join(", ")}`);
const all = await zooModels();
const asked = a.models ? a.models.split(",").filter(Boolean) : onnxFiles.length ? [] : all;
const unknown = asked.filter((m) => !all.includes(m));
if (unknown.length) throw new Error(`--models: unknown ${unknown.join(", ")} (known: ${all.join(", ")})`);

/** One compare pipeline: these runtimes in this order, one at a time; the report. */
async function compare(onnx: string, runtimes: Array<"native" | "python-ort">, threads: number, outDir: string, seq = SEQ!): Promise<ZooReport> {
  let p = pipeline("bench-zoo", { batchSizes: BATCHES, threads, iterations: ITERS!, warmup: WARMUP, concurrency: 1, device: "cpu" })
    .export({ name: "model", onnx, seq, evalSamples: Math.max(...BATCHES) });
  for (const r of runtimes) p = p.benchmark(r, { optional: true });
  const out = await runPipeline(p, { outDir, quiet: true });
  rmSync(out.runDir, { recursive: true, force: true });
  return out.report as ZooReport;
}

const whyNot = (r: ZooReport, name: string): string | null => {
  const nr = r.runtimesNotRun?.find((x) => x.name === name);
  if (nr) return `${nr.error.name}: ${nr.error.message.split("\n")[0]}`;
  return r.runtimes.some((x) => x.name === name) ? null : "did not run (no reason given)";
};
const steadyOverhead = (r: Report, name: string, weightMiB: number): number | null => {
  const rt = r.runtimes.find((x) => x.name === name);
  return rt ? rt.steady.ussMiB - weightMiB : null;
};

const load0 = loadavg()[0]!;
const started = Date.now();
const exports = await zooExports(asked, EXPORTERS, SEED, log);
// Rows to measure: each zoo model under each exporter, then each --onnx file as it is.
const entries: Array<{ id: string; key: string; exp: Pick<ZooExport, "onnx" | "error" | "seq"> | undefined }> = [
  ...asked.flatMap((name) => EXPORTERS.map((exporter) => ({ id: EXPORTERS.length > 1 ? `${name}.${exporter}` : name, key: `${name}.${exporter}`, exp: exports.get(`${name}.${exporter}`) }))),
  ...onnxFiles.map((f) => ({ id: basename(f), key: "", exp: { onnx: resolve(f) } })),
];
const runs = mkdtempSync(join(tmpdir(), "memlane-bench-zoo-"));
const rows: ModelRow[] = [];
const keys = THREADS.flatMap((t) => BATCHES.map((b) => cellKey(b, t)));
try {
  for (const { id, key, exp } of entries) {
    const row: ModelRow = { model: id, status: "ok", cells: new Map(), nativeOverheadMiB: null, ortOverheadMiB: null, maxAbsDiff: null };
    rows.push(row);
    if (!exp?.onnx) {
      row.status = `export failed: ${(exp?.error ?? "not exported").split("\n")[0]}`;
      continue;
    }
    const t0 = Date.now();
    // A known gap: ask memlane-rt alone (its compile fails in seconds) for the reason it gives.
    if (NATIVE_GAPS[key]) {
      const why = whyNot(await compare(exp.onnx, ["native"], 1, runs), "native");
      if (why) {
        row.status = `unsupported: ${why}`;
        log(`bench:zoo: ${id}: ${row.status}`);
        continue;
      }
      log(`bench:zoo: ${id} is listed in test/zoo/native-gaps.ts but runs natively now`);
    }
    const weightMiB = (await modelTerms(exp.onnx)).weightMiB;
    // An export that bakes its sequence length into Reshapes (torch's legacy exporter on
    // nn.TransformerEncoder) runs only at that length, on every runtime: bench it there.
    let seq = SEQ!;
    if (exp.seq && exp.seq !== SEQ) {
      const probe = await compare(exp.onnx, ["python-ort"], 1, runs);
      const why = whyNot(probe, "python-ort");
      if (why) {
        seq = exp.seq;
        row.model = `${id} (seq ${seq}: at ${SEQ} even ORT fails)`;
        log(`bench:zoo: ${id}: ORT fails at seq ${SEQ} (${why}); measuring at the export's seq ${seq}`);
      }
    }
    const nat: number[] = [];
    const ort: number[] = [];
    rounds: for (let round = 0; round < ROUNDS!; round++)
      for (const threads of THREADS) {
        const order: Array<"native" | "python-ort"> = round % 2 === 0 ? ["native", "python-ort"] : ["python-ort", "native"];
        // Where the CPUs sit before and after this round (a split placement slows 2-thread runs;
        // it lasts seconds to a minute, a round about ten seconds): the larger round trip.
        const before = threads > 1 ? coreRoundTripNs() : null;
        const rep = await compare(exp.onnx, order, threads, runs, seq);
        const after = threads > 1 ? coreRoundTripNs() : null;
        const roundTrip = before === null || after === null ? (before ?? after) : Math.max(before, after);
        for (const rt of order) {
          const why = whyNot(rep, rt);
          if (why) {
            row.status = `${rt === "native" && rep.runtimesNotRun?.some((x) => x.name === rt && x.status === "unavailable") ? "unsupported" : `${rt} failed`}: ${why}`;
            break rounds;
          }
        }
        const byName = new Map(rep.runtimes.map((r) => [r.name, r]));
        for (const b of BATCHES) {
          const k = cellKey(b, threads);
          const c: Cell = row.cells.get(k) ?? { native: [], ort: [], roundTripNs: [] };
          const n = byName.get("native")!.latencyMs[`batch${b}`];
          const o = byName.get("python-ort")!.latencyMs[`batch${b}`];
          if (n && o) {
            c.native.push({ p50: n.p50, p99: n.p99 });
            c.ort.push({ p50: o.p50, p99: o.p99 });
            c.roundTripNs!.push(roundTrip);
          }
          row.cells.set(k, c);
        }
        if (threads === THREADS[0]) {
          nat.push(steadyOverhead(rep, "native", weightMiB)!);
          ort.push(steadyOverhead(rep, "python-ort", weightMiB)!);
          row.maxAbsDiff = Math.max(row.maxAbsDiff ?? 0, byName.get("native")!.maxAbsDiff ?? 0);
        }
      }
    if (row.status === "ok") {
      row.nativeOverheadMiB = median(nat);
      row.ortOverheadMiB = median(ort);
    }
    log(`bench:zoo: ${id}: ${row.status} (${((Date.now() - t0) / 1000).toFixed(0)} s)`);
  }
} finally {
  rmSync(runs, { recursive: true, force: true });
}
const header = [
  `# bench:zoo: memlane-rt vs ONNX Runtime (python-ort), CPU`,
  "",
  `${cpus().length} cores (${cpus()[0]?.model.trim() ?? "?"}), load average ${load0.toFixed(1)} at the start and ${loadavg()[0]!.toFixed(1)} at the end;` +
    ` ${asked.length ? `exporter ${EXPORTERS.join("+")}` : "given exports"}${asked.length && onnxFiles.length ? ` and ${onnxFiles.length} given export(s)` : ""}, 224 px images, seq ${SEQ} for text; ${ITERS} timed calls (${WARMUP} warm-up) per batch, ${ROUNDS} round(s)` +
    ` alternating which runtime goes first; ${((Date.now() - started) / 60000).toFixed(1)} min.`,
].join("\n");
console.log(formatMarkdown(rows, keys, header, SPLIT_PLACEMENT_NS));
