/**
 * report.md: the report as markdown. Each table names its process in the heading, its
 * phase per row and its counter per column; `unavailable` where a figure was not measured.
 */
import {
  anyPipelined, backendNotes, batchKeys, latency, mdTable, num, pct, pipelinedBatchKeys, pipelinedThroughput, sci, signed, UNAVAILABLE,
} from "./format.ts";
import { estimatesMarkdown } from "./estimates.ts";
import { profileMarkdown } from "./profile.ts";
import { distributedMarkdown } from "./distributed.ts";
import { growthLines, steadyBreakdownBlock, steadyKindsSideBySide } from "./markdown-kinds.ts";
import type { PhaseReport, Report, RuntimeReport } from "./schema.ts";

const PHASE_HEADER = [
  "phase", "RSS MiB", "Δ RSS MiB", "peak RSS MiB", "peak from", "USS MiB", "Δ USS MiB", "PSS MiB", "swap MiB", "ms",
  "GPU MiB", "Δ GPU MiB", "peak GPU MiB", "malloc free MiB",
] as const;

function phaseRows(phases: readonly PhaseReport[]): string[][] {
  return phases.map((p) => [
    p.name, num(p.rssMiB), signed(p.deltaRssMiB), num(p.peakRssMiB), p.peakSource, num(p.ussMiB), signed(p.deltaUssMiB),
    num(p.pssMiB), num(p.swapMiB), num(p.ms, 0), num(p.gpuMiB), signed(p.deltaGpuMiB), num(p.peakGpuMiB),
    num(p.mallocFreeMiB),
  ]);
}

const who = (name: string, pid: number, kind: string) => `\`${name}\` (pid ${pid}, ${kind})`;

function runtimeSection(r: RuntimeReport): string {
  const growth = growthLines(r.pid, r.phases);
  const steady = steadyBreakdownBlock(r);
  return [
    `### ${r.name}: process pid ${r.pid} (${r.process.kind}), device ${r.device}`,
    "",
    `Memory of process ${who(r.name, r.pid, r.process.kind)} per phase; Δ = end − start, peak = highest RSS inside the phase.`,
    `Command: \`${r.process.command.join(" ")}\`. Versions: ${Object.entries(r.versions).map(([k, v]) => `${k} ${v}`).join(", ") || UNAVAILABLE}.`,
    "",
    mdTable(PHASE_HEADER, phaseRows(r.phases)),
    ...(growth ? ["", growth] : []),
    ...(steady ? ["", steady] : []),
  ].join("\n");
}

/** "—" for a runtime that does not time requests pipelined (ORT, node-ort, anything on the CPU). */
const NOT_PIPELINED = "—";

/** The pipelined-timing note and the backend notes, under the runtimes table; "" when neither applies. */
function pipelinedAndNotes(report: Report): string {
  const out: string[] = [];
  if (anyPipelined(report))
    out.push("Pipelined: requests submitted back to back and drained (on CUDA; for memlane-rt where overlap, async outputs and " +
      `several contexts act); ${NOT_PIPELINED} where a runtime does not time that way.`);
  const notes = backendNotes(report);
  if (notes.length > 0) out.push(["Backend notes:", "", ...notes.map(([name, n]) => `- \`${name}\`: ${n.replace(/\r?\n/g, " ")}`)].join("\n"));
  return out.join("\n\n");
}

function summary(report: Report): string {
  const batches = batchKeys(report);
  const pipelined = anyPipelined(report);
  const header = [
    "runtime", "process", "device", "steady RSS MiB", "steady USS MiB", "steady PSS MiB", "steady GPU MiB",
    ...batches.flatMap((b) => [`${b} p50 ms`, `${b} p99 ms`]), "throughput /s", ...(pipelined ? ["pipelined /s"] : []), "accuracy", "max abs diff",
  ];
  const rows = report.runtimes.map((r) => [
    r.name, `pid ${r.pid} (${r.process.kind})`, r.device, num(r.steady.rssMiB), num(r.steady.ussMiB), num(r.steady.pssMiB),
    num(r.steady.gpuMiB), ...batches.flatMap((b) => [latency(r.latencyMs, b, "p50"), latency(r.latencyMs, b, "p99")]),
    num(r.throughputPerS, 0), ...(pipelined ? [num(pipelinedThroughput(r), 0, NOT_PIPELINED)] : []),
    pct(r.accuracy), r.name === report.numerics.reference ? "reference" : sci(r.maxAbsDiff),
  ]);
  for (const u of report.runtimesNotRun ?? []) rows.push([u.name, u.status, ...header.slice(2).map(() => "—")]);
  const notRun = (report.runtimesNotRun ?? []).map((u) => `- \`${u.name}\` ${u.status}: ${u.error.name} (${u.error.code}): ${u.error.message.replace(/\r?\n/g, " ")}`);
  const after = [pipelinedAndNotes(report), notRun.join("\n")].filter(Boolean).join("\n\n");
  return after ? `${mdTable(header, rows)}\n\n${after}` : mdTable(header, rows);
}

function latencySection(report: Report): string {
  const batches = batchKeys(report);
  const piped = new Set(pipelinedBatchKeys(report));
  const pipelined = anyPipelined(report);
  const header = [
    "runtime",
    ...batches.flatMap((b) => [`${b} p50 ms`, `${b} p99 ms`, `${b} mean ms`, ...(piped.has(b) ? [`${b} pipelined ms`] : [])]),
    "throughput /s (largest batch)", ...(pipelined ? ["pipelined /s (largest batch)"] : []),
  ];
  const rows = report.runtimes.map((r) => [
    r.name,
    ...batches.flatMap((b) => [
      latency(r.latencyMs, b, "p50"), latency(r.latencyMs, b, "p99"), latency(r.latencyMs, b, "mean"),
      ...(piped.has(b) ? [latency(r.latencyMs, b, "pipelinedMean", NOT_PIPELINED)] : []),
    ]),
    num(r.throughputPerS, 0), ...(pipelined ? [num(pipelinedThroughput(r), 0, NOT_PIPELINED)] : []),
  ]);
  const table = mdTable(header, rows);
  return piped.size > 0 || pipelined
    ? `${table}\n\npipelined ms: wall time per request with \`iterations\` requests in flight back to back, then drained.`
    : table;
}

function numericsSection(report: Report): string {
  const ref = report.numerics.reference;
  const rows = report.numerics.runtimes.map((n) => [n.name, pct(n.accuracy), n.name === ref ? "reference" : sci(n.maxAbsDiff)]);
  const out = [`Reference outputs: ${ref ?? UNAVAILABLE}.`, "", mdTable(["runtime", "held-out accuracy", `max abs diff vs ${ref ?? "reference"} (worst output)`], rows)];
  const withOutputs = report.runtimes.filter((r) => r.outputs && r.outputs.length > 0);
  if (withOutputs.length > 0) {
    const names = [...new Set(withOutputs.flatMap((r) => r.outputs!.map((o) => o.name)))];
    const shapeOf = (n: string) => withOutputs.flatMap((r) => r.outputs!).find((o) => o.name === n)!;
    out.push("", "Max abs diff per output (shape over the eval set, batch first):", "", mdTable(
      ["output", "dtype", "shape", ...withOutputs.map((r) => r.name)],
      names.map((n) => [n, shapeOf(n).dtype, `[${shapeOf(n).shape.join(", ")}]`, ...withOutputs.map((r) => {
        const o = r.outputs!.find((x) => x.name === n);
        return r.name === ref ? "reference" : o ? sci(o.maxAbsDiff) : "—";
      })]),
    ));
  }
  if (report.inputs && report.inputs.length > 0)
    out.push("", "Inputs fed to every runtime (N: the batch):", "", mdTable(["input", "dtype", "shape", "values"],
      report.inputs.map((i) => [i.name, i.dtype, `[${i.shape.map((d) => (d < 0 ? "N" : String(d))).join(", ")}]`, i.values])));
  return out.join("\n");
}

function comparisonSection(report: Report): string {
  const names = report.runtimes.map((r) => r.name);
  const c = report.comparison;
  const steadyRows = (["rssMiB", "ussMiB", "pssMiB", "gpuMiB"] as const).map((k) => [
    `steady ${k.replace("MiB", "").toUpperCase()} MiB`,
    ...names.map((n) => num(c.steady.find((s) => s.runtime === n)?.[k])),
  ]);
  const perPhase = (label: string, pick: "deltaRssMiB" | "deltaUssMiB" | "peakRssMiB", fmt: (x: number) => string) =>
    [
      `#### ${label} per phase, by runtime`,
      "",
      mdTable(["phase", ...names], c.phases.map((p) => [p.phase, ...names.map((n) => {
        const f = p.byRuntime[n];
        return f ? fmt(f[pick]) : "—";
      })])),
    ].join("\n");
  const counters = [...new Set(c.ratios.map((r) => r.counter))];
  const pairs = [...new Map(c.ratios.map((r) => [`${r.numerator} / ${r.denominator}`, r] as const)).entries()];
  const ratioRows = pairs.map(([label, p]) => [
    label,
    ...counters.map((k) => num(c.ratios.find((r) => r.numerator === p.numerator && r.denominator === p.denominator && r.counter === k)?.value, 3)),
  ]);
  const kinds = steadyKindsSideBySide(report);
  return [
    "#### Steady state (end of steady-inference), by runtime",
    "",
    mdTable(["counter", ...names], steadyRows),
    "",
    ...(kinds ? [kinds, ""] : []),
    perPhase("Δ RSS MiB", "deltaRssMiB", (x) => signed(x)),
    "",
    perPhase("Δ USS MiB", "deltaUssMiB", (x) => signed(x)),
    "",
    perPhase("peak RSS MiB", "peakRssMiB", (x) => num(x)),
    "",
    "#### Native over Python (numerator / denominator: for memory and latency < 1 means the numerator uses less; for throughput > 1 means it is faster)",
    "",
    ratioRows.length > 0 ? mdTable(["numerator / denominator", ...counters], ratioRows) : "No native and Python runtime pair ran.",
  ].join("\n");
}

export function renderMarkdown(report: Report): string {
  const h = report.host;
  const out: string[] = [
    `# memlane report: ${report.pipeline}`,
    "",
    `Run \`${report.runId}\`, ${report.createdAt}. Host: ${h.cpuModel}, ${h.cores} cores, ${num(h.memTotalMiB, 0)} MiB RAM, ` +
      `${h.platform} ${h.kernel}, Node ${h.node}, Python ${h.python ?? UNAVAILABLE}.`,
    `GPU: ${report.gpu.status}${report.gpu.reason ? `: ${report.gpu.reason}` : ""}.`,
    ...(report.outcome === "failed" ? ["", "**This run failed: a partial report of the stages that completed (see Stages).**"] : []),
    "",
    "Counters (docs/memory.md): RSS resident; USS private to the process (Private_Clean + Private_Dirty); PSS shared pages split between their users; all from /proc/<pid>/smaps_rollup, GPU from NVML.",
    "",
    "## Runtimes at a glance",
    "",
    report.runtimes.length > 0 ? summary(report) : "No runtime completed.",
    "",
    "## Host memory per process and phase",
  ];
  if (report.training) {
    const t = report.training;
    out.push(
      "",
      `### training: process pid ${t.pid} (${t.process.kind}), device ${t.device}`,
      "",
      `Memory of process ${who("train", t.pid, t.process.kind)} per phase. Held-out accuracy ${pct(t.accuracy)} after ${t.epochs} epochs.`,
      "",
      mdTable(PHASE_HEADER, phaseRows(t.phases)),
    );
    const growth = growthLines(t.pid, t.phases);
    if (growth) out.push("", growth);
  }
  out.push(...distributedMarkdown(report));
  for (const r of report.runtimes) out.push("", runtimeSection(r));
  if (report.checkpointLoad.length > 0) {
    const arch = report.checkpointLoad[0]!.arch;
    out.push("", `## Checkpoint load${arch ? ` (${arch})` : ""}`, "",
      "Each method in a fresh process. Phase model-load (build the module, load the weights): Δ RSS/USS end − start, " +
      "peak RSS and peak Δ (peak − start: the transient copy). Then first-inference (one forward pass at batch 1): " +
      "Δ RSS, where a mapped checkpoint's pages are read in.", "", mdTable(
      ["method", "process", "file MiB", "Δ RSS MiB", "Δ USS MiB", "peak RSS MiB", "peak Δ RSS MiB", "ms", "1st inference Δ RSS MiB"],
      report.checkpointLoad.map((c) => [
        c.method, `pid ${c.pid}`, num(c.fileMiB), signed(c.deltaRssMiB), signed(c.deltaUssMiB), num(c.peakRssMiB),
        c.peakDeltaRssMiB === undefined ? "—" : signed(c.peakDeltaRssMiB), num(c.ms, 0),
        c.firstInferenceDeltaRssMiB == null ? "—" : signed(c.firstInferenceDeltaRssMiB),
      ]),
    ));
  }
  if (report.runtimes.length > 0) {
    out.push("", "## Latency and throughput (measured inside each worker)", "", latencySection(report));
    const prof = profileMarkdown(report.runtimes);
    if (prof) out.push("", "## Per-op profile", "", "Taken after the timed calls, in calls of their own (docs/profiling.md): the latency above is not perturbed by it.", "", prof);
    out.push("", "## Accuracy and numerics", "", numericsSection(report));
    out.push("", "## Comparison", "", comparisonSection(report));
  }
  const est = estimatesMarkdown(report);
  if (est) out.push("", "## Estimate vs measured", "", est);
  if (report.budgets?.length)
    out.push("", "## Budgets", "", mdTable(["process", "figure", "limit MiB", "worst MiB", "phase", "status", "declared by"],
      report.budgets.map((b) => [b.runtime, b.figure, num(b.limitMiB), num(b.worstMiB), b.phase ?? "—", b.status, b.source])));
  out.push("", "## GPU", "", `Status: ${report.gpu.status}${report.gpu.reason ? `, ${report.gpu.reason}` : ""}.`);
  if (report.gpu.devices.length > 0)
    out.push("", mdTable(["index", "name", "total MiB", "used MiB", "driver"],
      report.gpu.devices.map((d) => [String(d.index), d.name, num(d.totalMiB, 0), num(d.usedMiB, 0), d.driver ?? UNAVAILABLE])));
  out.push("", "## Stages", "", mdTable(["stage", "kind", "worker", "pid", "status", "ms", "error"],
    report.stages.map((s) => [s.name, s.kind, s.worker, s.pid === null ? "—" : String(s.pid), s.status, num(s.endMs - s.startMs, 0),
      s.error ? `${s.error.name} (${s.error.code}): ${s.error.message}` : ""])));
  const retried = report.stages.filter((s) => (s.attempts?.length ?? 0) > 1);
  if (retried.length > 0)
    out.push("", "Attempts of retried stages (a stage whose worker died runs again in a fresh one; its figures are the last attempt's):", "",
      mdTable(["stage", "attempt", "pid", "status", "ms", "ended by"],
        retried.flatMap((s) => s.attempts!.map((a) => [s.name, String(a.attempt), a.pid === null ? "—" : String(a.pid), a.status, num(a.endMs - a.startMs, 0), a.exit ?? ""]))));
  out.push("", "## Sampling", "", mdTable(["process", "pid", "samples", "period ms"],
    report.timeline.map((t) => [t.label, String(t.pid), String(t.samples.length), num(t.periodMs, 0)])));
  if (report.notes?.length) out.push("", "## Notes", "", ...report.notes.map((n) => `- ${n.replace(/\r?\n/g, " ")}`));
  return `${out.join("\n")}\n`;
}
