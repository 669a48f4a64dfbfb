/**
 * Turns a report.json into chart specifications: plain data (labels, named series, axis
 * titles, phase bands) that the page's inline script hands to Chart.js. Kept free of any
 * DOM or Chart.js type so that it can be unit tested and so that the browser test can check
 * the same names the page exposes on `window.__memlane`.
 */
import type { PhaseReport, Report, RuntimeReport } from "../schema.ts";
import { estimateCharts } from "./estimates.ts";
import { kindCharts } from "./kinds.ts";
import { latencyCharts } from "./latency.ts";

export type Point = { x: number; y: number | null };
export type SeriesDatum = number | null | [number, number] | Point;

export interface ChartSeries {
  name: string;
  data: SeriesDatum[];
  /** `y1`: drawn against a second (right) axis, for absolute figures beside increments. */
  axis?: "y1";
  /** Draw as unconnected markers (the workers' own readings at phase ends). */
  points?: boolean;
  /** Fixed colour (kinds of mapping: one colour per kind on every chart). */
  color?: string;
}

/** A labelled time span drawn behind a timeline (x in seconds since the run's t0). */
export interface PhaseBand {
  label: string;
  start: number;
  end: number;
}

export interface ChartSpec {
  id: string;
  /** Page section the chart belongs to. */
  section: "timeline" | "phases" | "kinds" | "estimate" | "latency" | "stages";
  type: "line" | "bar";
  title: string;
  /** Category labels (bar charts); for timelines, the labels of the phase bands. */
  labels: string[];
  series: ChartSeries[];
  xTitle: string;
  yTitle: string;
  /** Title of the right axis when a series uses `axis: "y1"`. */
  y1Title?: string;
  /** Linear x axis with {x, y} points (timelines). */
  xLinear?: boolean;
  /** x range of a timeline: its samples and its phase bands, whichever reach further. */
  xMin?: number;
  xMax?: number;
  /** Horizontal floating bars (stage timeline): data are [start, end] pairs. */
  horizontal?: boolean;
  bands?: PhaseBand[];
  /** Bars of different series drawn over each other at full width (histograms). */
  overlay?: boolean;
  /** Series stacked into one bar per label (kinds of mapping). */
  stacked?: boolean;
}

const MiB = (kib: number | null): number | null => (kib === null ? null : round(kib / 1024, 2));
export const round = (v: number, digits = 3): number => Number(v.toFixed(digits));

/** Canonical order of phase names; unknown names follow in first-seen order. */
const PHASE_ORDER = [
  "import", "runtime-create", "cuda-context", "model-load", "weights-upload", "arena",
  "first-inference", "steady-inference", "data-load", "checkpoint-save",
];
function phaseRank(name: string): number {
  const i = PHASE_ORDER.indexOf(name);
  if (i >= 0) return i;
  const m = /^epoch-(\d+)$/.exec(name);
  return m ? 100 + Number(m[1]) : 1000;
}

/** Earliest wall-clock instant in the report: x = 0 on every time axis. */
export function reportT0(report: Report): number {
  const starts: number[] = [];
  for (const s of report.stages) starts.push(s.startMs);
  for (const t of report.timeline) if (t.samples[0]) starts.push(t.samples[0][0]);
  for (const r of report.runtimes) for (const p of r.phases) starts.push(p.startMs);
  if (report.training) for (const p of report.training.phases) starts.push(p.startMs);
  for (const d of report.distributed ?? []) for (const k of d.ranks) for (const p of k.phases) starts.push(p.startMs);
  return starts.length ? Math.min(...starts) : 0;
}

/** All phase reports of one pid, tagged with their owner (runtime name or `train`). */
function phasesOfPid(report: Report, pid: number): Array<{ owner: string; phase: PhaseReport }> {
  const out: Array<{ owner: string; phase: PhaseReport }> = [];
  if (report.training?.pid === pid) for (const p of report.training.phases) out.push({ owner: "train", phase: p });
  for (const r of report.runtimes) if (r.pid === pid) for (const p of r.phases) out.push({ owner: r.name, phase: p });
  for (const d of report.distributed ?? [])
    for (const k of d.ranks) if (k.pid === pid) for (const p of k.phases) out.push({ owner: `${d.stage}@rank${k.rank}`, phase: p });
  return out.sort((a, b) => a.phase.startMs - b.phase.startMs);
}

function xRange(sampleSecs: number[], bands: PhaseBand[]): { xMin?: number; xMax?: number } {
  const xs = [...sampleSecs, ...bands.flatMap((b) => [b.start, b.end])];
  if (!xs.length) return {};
  const lo = Math.min(...xs), hi = Math.max(...xs);
  // A short-lived process (one sample, or marks within a few ms): keep a readable span.
  const pad = hi - lo > 0.1 ? (hi - lo) * 0.01 : 0.05;
  return { xMin: round(Math.max(0, lo - pad)), xMax: round(hi + pad) };
}

/** Tracks with nothing to draw: no sample (it ended within one period) and no phase mark. */
export function emptyTracks(report: Report): Report["timeline"] {
  return report.timeline.filter((t) => t.samples.length === 0 && phasesOfPid(report, t.pid).length === 0);
}

/** ", USS about every N ms" where the rollups came less often than the RSS ticks. */
function ussEvery(track: Report["timeline"][number]): string {
  const t = track.samples.filter((s) => s[2] !== null).map((s) => s[0]);
  if (t.length < 2 || t.length >= track.samples.length) return "";
  return `, USS about every ${Math.round((t[t.length - 1]! - t[0]!) / (t.length - 1))} ms`;
}

export function timelineCharts(report: Report, t0: number): ChartSpec[] {
  const empty = new Set(emptyTracks(report));
  return report.timeline.flatMap((track, i) => {
    if (empty.has(track)) return [];
    const secs = (t: number) => round((t - t0) / 1000);
    const owned = phasesOfPid(report, track.pid);
    const owners = new Set(owned.map((o) => o.owner));
    const bands: PhaseBand[] = owned.map(({ owner, phase }) => ({
      label: owners.size > 1 ? `${owner}: ${phase.name}` : phase.name,
      start: secs(phase.startMs),
      end: secs(phase.endMs),
    }));
    const series: ChartSeries[] = [
      { name: "RSS", data: track.samples.map(([t, rss]) => ({ x: secs(t), y: MiB(rss) })) },
      // USS only where the sampler read smaps_rollup (paced by its cost): a line through those.
      { name: "USS", data: track.samples.flatMap(([t, , uss]) => (uss === null ? [] : [{ x: secs(t), y: MiB(uss) }])) },
    ];
    if (track.samples.some((s) => s[3] !== null))
      series.push({ name: "GPU", data: track.samples.map(([t, , , gpu]) => ({ x: secs(t), y: MiB(gpu) })) });
    // The worker's own reading at each phase end: exact where the 50 ms samples are sparse.
    if (owned.length)
      series.push({ name: "RSS at phase end (worker)", points: true, data: owned.map(({ phase }) => ({ x: secs(phase.endMs), y: phase.rssMiB })) });
    return [{
      id: `timeline-${i}`,
      section: "timeline",
      type: "line",
      title: `${track.label} (pid ${track.pid}): memory over time, RSS sampled every ${track.periodMs} ms${ussEvery(track)}`,
      labels: bands.map((b) => b.label),
      series,
      xTitle: "seconds since run start",
      yTitle: "MiB",
      xLinear: true,
      ...xRange(track.samples.map((x) => secs(x[0])), bands),
      bands,
    } satisfies ChartSpec];
  });
}

function phaseNames(phaseLists: PhaseReport[][]): string[] {
  const names: string[] = [];
  for (const list of phaseLists) for (const p of list) if (!names.includes(p.name)) names.push(p.name);
  return names.sort((a, b) => phaseRank(a) - phaseRank(b));
}

function phaseDeltaChart(runtimes: RuntimeReport[], key: "deltaRssMiB" | "deltaUssMiB" | "deltaGpuMiB", counter: string): ChartSpec {
  const labels = phaseNames(runtimes.map((r) => r.phases));
  return {
    id: `phase-${key}`,
    section: "phases",
    type: "bar",
    title: `${counter} increment per phase (end minus start), by runtime`,
    labels,
    series: runtimes.map((r) => ({
      name: r.name,
      data: labels.map((l) => {
        const p = r.phases.find((ph) => ph.name === l);
        return p ? p[key] : null;
      }),
    })),
    xTitle: "phase",
    yTitle: `Δ ${counter} (MiB)`,
  };
}

export function phaseCharts(report: Report): ChartSpec[] {
  const rts = report.runtimes;
  const charts: ChartSpec[] = [];
  if (rts.length) {
    charts.push(phaseDeltaChart(rts, "deltaRssMiB", "RSS"), phaseDeltaChart(rts, "deltaUssMiB", "USS"));
    if (rts.some((r) => r.phases.some((p) => p.deltaGpuMiB !== null)))
      charts.push(phaseDeltaChart(rts, "deltaGpuMiB", "GPU"));
    const gpu = rts.some((r) => r.steady.gpuMiB !== null);
    charts.push({
      id: "steady",
      section: "phases",
      type: "bar",
      title: "Steady state: reading at the end of steady-inference, by runtime",
      labels: rts.map((r) => r.name),
      series: [
        { name: "RSS", data: rts.map((r) => r.steady.rssMiB) },
        { name: "USS", data: rts.map((r) => r.steady.ussMiB) },
        { name: "PSS", data: rts.map((r) => r.steady.pssMiB) },
        ...(gpu ? [{ name: "GPU", data: rts.map((r) => r.steady.gpuMiB) }] : []),
      ],
      xTitle: "runtime",
      yTitle: "MiB",
    });
  }
  const tr = report.training;
  if (tr && tr.phases.length) {
    charts.push({
      id: "training-phases",
      section: "phases",
      type: "bar",
      title: `Training (pid ${tr.pid}, ${tr.device}): increment and peak per phase`,
      labels: tr.phases.map((p) => p.name),
      series: [
        { name: "Δ RSS", data: tr.phases.map((p) => p.deltaRssMiB) },
        { name: "Δ USS", data: tr.phases.map((p) => p.deltaUssMiB) },
        { name: "peak RSS (right axis)", data: tr.phases.map((p) => p.peakRssMiB), axis: "y1" },
      ],
      xTitle: "phase",
      yTitle: "Δ MiB",
      y1Title: "peak RSS MiB",
    });
  }
  const cl = report.checkpointLoad;
  if (cl.length) {
    charts.push({
      id: "checkpoint-load",
      section: "phases",
      type: "bar",
      title: "Checkpoint load (model-load phase) by method",
      labels: cl.map((c) => `${c.method} (${round(c.fileMiB, 1)} MiB file)`),
      series: [
        { name: "Δ RSS", data: cl.map((c) => c.deltaRssMiB) },
        { name: "Δ USS", data: cl.map((c) => c.deltaUssMiB) },
        { name: "peak RSS (right axis)", data: cl.map((c) => c.peakRssMiB), axis: "y1" },
      ],
      xTitle: "method",
      yTitle: "Δ MiB",
      y1Title: "peak RSS MiB",
    });
  }
  return charts;
}

export function stageChart(report: Report, t0: number): ChartSpec[] {
  const stages = report.stages;
  if (!stages.length) return [];
  const workers = [...new Set(stages.map((s) => s.worker))];
  const secs = (t: number) => round((t - t0) / 1000);
  return [
    {
      id: "stages",
      section: "stages",
      type: "bar",
      title: "Pipeline stages: when each ran, coloured by worker",
      labels: stages.map((s) => `${s.name}${s.status === "ok" ? "" : ` (${s.status})`}`),
      series: workers.map((w) => ({
        name: w,
        data: stages.map((s) => (s.worker === w ? ([secs(s.startMs), secs(s.endMs)] as [number, number]) : null)),
      })),
      xTitle: "seconds since run start",
      yTitle: "stage",
      horizontal: true,
    },
  ];
}

/** Every chart of the page, in page order. */
export function buildCharts(report: Report): ChartSpec[] {
  const t0 = reportT0(report);
  return [...timelineCharts(report, t0), ...phaseCharts(report), ...kindCharts(report), ...estimateCharts(report), ...latencyCharts(report), ...stageChart(report, t0)];
}
