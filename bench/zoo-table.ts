/**
 * bench:zoo's figures and its markdown: per model and configuration (batch, threads) the
 * native and ORT p50/p99 of each round, the ratio native/ORT taken per round (both runtimes
 * measured in the same round, back to back) and its median over the rounds; a geometric-mean
 * row and the model with the largest ratio per column; the memory overhead ratio.
 */

/** One (batch, threads) cell's measurements, one entry per round. */
export interface Cell {
  native: Array<{ p50: number; p99: number }>;
  ort: Array<{ p50: number; p99: number }>;
  /** Per round: the CPUs' cache-line round trip (ns), the larger of before and after it (bench/core-latency.ts); null: not measured. */
  roundTripNs?: Array<number | null>;
}

/** Rounds of a cell that began or ended on a split placement (round trip above `splitNs`). */
export const splitRounds = (c: Cell | undefined, splitNs: number): number =>
  (c?.roundTripNs ?? []).filter((x) => x !== null && x > splitNs).length;

export interface ModelRow {
  model: string;
  /** "unsupported: ..." / "failed: ..." when there are no figures. */
  status: "ok" | string;
  cells: Map<string, Cell>;
  /** Steady USS minus the model's weight bytes, MiB (1-thread runs, median over rounds). */
  nativeOverheadMiB: number | null;
  ortOverheadMiB: number | null;
  maxAbsDiff: number | null;
}

export const cellKey = (batch: number, threads: number): string => `b${batch}·${threads}t`;

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  if (!s.length) return NaN;
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
}

export function geomean(xs: number[]): number {
  return xs.length ? Math.exp(xs.reduce((a, x) => a + Math.log(x), 0) / xs.length) : NaN;
}

/** Median over rounds of native/ORT for one statistic (each round's pair measured together). */
export function ratio(c: Cell | undefined, stat: "p50" | "p99"): number | null {
  if (!c) return null;
  const rs: number[] = [];
  for (let i = 0; i < Math.min(c.native.length, c.ort.length); i++) rs.push(c.native[i]![stat] / c.ort[i]![stat]);
  return rs.length ? median(rs) : null;
}

const f2 = (x: number | null | undefined): string => (x === null || x === undefined || !Number.isFinite(x) ? "—" : x.toFixed(2));
const ms = (x: number): string => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));
const mdRow = (cells: string[]): string => `| ${cells.join(" | ")} |`;

/**
 * The markdown the lead pastes: ratios, geomean and max rows, absolute times, memory. With
 * `splitNs`, a ratio whose rounds include one that began or ended on a split placement carries a "†",
 * and a note counts them.
 */
export function formatMarkdown(rows: ModelRow[], keys: string[], header: string, splitNs?: number): string {
  const ok = rows.filter((r) => r.status === "ok");
  const cols = keys.flatMap((k) => [`${k} p50`, `${k} p99`]);
  const out: string[] = [header, "", "native / ORT latency (< 1: native faster; median over rounds of each round's ratio):", ""];
  out.push(mdRow(["model", ...cols, "USS−weights native/ORT"]), mdRow(["---", ...cols.map(() => "---:"), "---:"]));
  const memRatio = (r: ModelRow): number | null =>
    r.nativeOverheadMiB !== null && r.ortOverheadMiB !== null && r.ortOverheadMiB > 0 ? r.nativeOverheadMiB / r.ortOverheadMiB : null;
  for (const r of rows) {
    if (r.status !== "ok") {
      out.push(mdRow([r.model, r.status.replace(/\|/g, "\\|").replace(/\n/g, " ").slice(0, 200), ...cols.slice(1).map(() => ""), ""]));
      continue;
    }
    const mark = (k: string): string => (splitNs !== undefined && splitRounds(r.cells.get(k), splitNs) > 0 ? "†" : "");
    out.push(mdRow([r.model, ...keys.flatMap((k) => [f2(ratio(r.cells.get(k), "p50")) + mark(k), f2(ratio(r.cells.get(k), "p99")) + mark(k)]), f2(memRatio(r))]));
  }
  const colValues = (k: string, stat: "p50" | "p99"): Array<[string, number]> =>
    ok.map((r) => [r.model, ratio(r.cells.get(k), stat)] as [string, number | null]).filter((x): x is [string, number] => x[1] !== null);
  const mems = ok.map((r) => [r.model, memRatio(r)] as [string, number | null]).filter((x): x is [string, number] => x[1] !== null);
  const gm = (xs: Array<[string, number]>): string => f2(geomean(xs.map((x) => x[1])));
  const mx = (xs: Array<[string, number]>): string => {
    if (!xs.length) return "—";
    const [m, v] = xs.reduce((a, b) => (b[1] > a[1] ? b : a));
    return `${f2(v)} ${m}`;
  };
  out.push(mdRow(["**geomean**", ...keys.flatMap((k) => [gm(colValues(k, "p50")), gm(colValues(k, "p99"))]), gm(mems)]));
  out.push(mdRow(["**max**", ...keys.flatMap((k) => [mx(colValues(k, "p50")), mx(colValues(k, "p99"))]), mx(mems)]));
  if (splitNs !== undefined) {
    const all = ok.flatMap((r) => keys.flatMap((k) => r.cells.get(k)?.roundTripNs ?? [])).filter((x): x is number => x !== null);
    const split = ok.reduce((a, r) => a + keys.reduce((b, k) => b + splitRounds(r.cells.get(k), splitNs), 0), 0);
    out.push(
      "",
      all.length
        ? `† a round began or ended with the two CPUs on a split placement (cache-line round trip over ${splitNs} ns, against ${f2(median(all))} ns median): ` +
            `${split} of ${all.length} cell-rounds. A 2-thread run there is slower for both runtimes, memlane-rt more (docs/native-cpu.md, "Two threads on a split placement").`
        : "Placement not measured (native/build/runtime/memlane-core-latency not built, or one CPU).",
    );
  }
  out.push("", "p50 in ms, native / ORT (median over rounds):", "");
  out.push(mdRow(["model", ...keys]), mdRow(["---", ...keys.map(() => "---:")]));
  for (const r of ok)
    out.push(mdRow([r.model, ...keys.map((k) => {
      const c = r.cells.get(k);
      return c && c.native.length && c.ort.length ? `${ms(median(c.native.map((x) => x.p50)))} / ${ms(median(c.ort.map((x) => x.p50)))}` : "—";
    })]));
  out.push("", "steady USS minus the model's weight bytes (MiB, 1-thread runs) and max abs diff native vs ORT:", "");
  out.push(mdRow(["model", "native MiB", "ORT MiB", "ratio", "max abs diff"]), mdRow(["---", "---:", "---:", "---:", "---:"]));
  for (const r of ok)
    out.push(mdRow([r.model, f2(r.nativeOverheadMiB), f2(r.ortOverheadMiB), f2(memRatio(r)), r.maxAbsDiff === null ? "—" : r.maxAbsDiff.toExponential(1)]));
  return out.join("\n");
}
