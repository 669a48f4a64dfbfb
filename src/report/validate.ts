/**
 * Checks a parsed report.json against the required fields and types of schema.ts (and the
 * rule that unknown figures are null, not absent). Returns the problems, each naming the
 * path, what was expected and what was received; [] when valid.
 *
 * Fields added to schema v1 after reports were already written (ADDED shapes below) are
 * type-checked where present and accepted where absent: an older report.json stays valid
 * (docs/report.md: fields are only added; only an incompatible change bumps schemaVersion).
 * buildReport always writes them, null when not measured.
 */
import { validateProfile } from "./profile.ts";
import { REPORT_SCHEMA_VERSION } from "./schema.ts";

type Kind = "string" | "number" | "number|null" | "string|null" | "object" | "array" | "object|null" | "boolean";
type Shape = Record<string, Kind>;

const PHASE: Shape = {
  name: "string", rssMiB: "number", pssMiB: "number", ussMiB: "number", deltaRssMiB: "number", deltaUssMiB: "number",
  peakRssMiB: "number", peakSource: "string", swapMiB: "number", ms: "number", startMs: "number", endMs: "number",
  samples: "number", gpu: "string", gpuMiB: "number|null", deltaGpuMiB: "number|null", peakGpuMiB: "number|null",
};
/** Added since v1 reports were first written (docs/memory.md, "Where the RAM goes"). */
const PHASE_ADDED: Shape = {
  breakdown: "object|null", breakdownProblem: "string",
  mallocFreeMiB: "number|null", deltaMallocFreeMiB: "number|null", mallocInUseMiB: "number|null",
};
const BREAKDOWN: Shape = { kinds: "array", totalRssMiB: "number", totalPssMiB: "number", totalUssMiB: "number", growthFrom: "string|null" };
const KIND: Shape = {
  kind: "string", label: "string", rssMiB: "number", pssMiB: "number", ussMiB: "number", privateDirtyMiB: "number", swapMiB: "number",
  deltaRssMiB: "number|null", deltaUssMiB: "number|null", deltaPssMiB: "number|null", files: "array",
};
const KIND_FILE: Shape = { path: "string", rssMiB: "number", ussMiB: "number", deltaRssMiB: "number|null" };
const PROCESS: Shape = { pid: "number", kind: "string", command: "array" };
const RUNTIME: Shape = {
  name: "string", pid: "number", process: "object", device: "string", versions: "object", phases: "array",
  steady: "object", accuracy: "number|null", maxAbsDiff: "number|null", latencyMs: "object", throughputPerS: "number",
};
/** Added since v1 reports were first written: checked when present, absent in older reports. */
const RUNTIME_ADDED: Shape = { pipelinedThroughputPerS: "number|null", backendNotes: "string|null" };
const STEADY: Shape = { rssMiB: "number", ussMiB: "number", pssMiB: "number", gpuMiB: "number|null" };
const TRAINING: Shape = { accuracy: "number", epochs: "number", phases: "array", pid: "number", process: "object", device: "string" };
const TOP: Shape = {
  schemaVersion: "number", pipeline: "string", runId: "string", createdAt: "string", host: "object", training: "object|null",
  runtimes: "array", checkpointLoad: "array", comparison: "object", numerics: "object", gpu: "object", stages: "array", timeline: "array",
};
const TRANSPORT: Shape = { maxMessageBytes: "number", refused: "object" };
const HOST: Shape = { cpuModel: "string", cores: "number", memTotalMiB: "number", platform: "string", kernel: "string", node: "string", python: "string|null" };
const CHECKPOINT: Shape = { method: "string", pid: "number", fileMiB: "number", deltaRssMiB: "number", deltaUssMiB: "number", peakRssMiB: "number", ms: "number" };
const COMPARISON: Shape = { steady: "array", phases: "array", ratios: "array" };
const NUMERICS: Shape = { reference: "string|null", runtimes: "array" };
const GPU: Shape = { status: "string", reason: "string|null", devices: "array" };
const STAGE: Shape = { name: "string", kind: "string", worker: "string", pid: "number|null", startMs: "number", endMs: "number", status: "string" };
/** Added since v1 reports were first written: checked when present. */
const TOP_ADDED: Shape = { outcome: "string", notes: "array", transport: "object", distributed: "array" };
const ATTEMPT: Shape = { attempt: "number", pid: "number|null", startMs: "number", endMs: "number", status: "string", exit: "string|null" };
const TRACK: Shape = { label: "string", pid: "number", periodMs: "number", samples: "array" };
/** A checked budget (report.budgets, present only when the pipeline declared budgets). */
const BUDGET: Shape = { runtime: "string", figure: "string", limitMiB: "number", source: "string", status: "string", worstMiB: "number|null", phase: "string|null", message: "string" };
/** Estimate vs measured (report.estimates, present in reports written since estimates exist). */
const ESTIMATES: Shape = { status: "string", reason: "string|null", calibratedAt: "string|null", naiveMiB: "number|null", runtimes: "array" };
/** The train stage's estimate (report.estimates.training, added with the PyTorch estimate; absent or null otherwise). */
const ESTIMATE_TRAINING: Shape = { stage: "string", arch: "string", estimateMiB: "number", measuredMiB: "number", errorPct: "number", parts: "string", naiveMiB: "number", naiveErrorPct: "number" };
/** Distributed train stages' estimates (report.estimates.distributed, absent in older reports). */
const ESTIMATE_DISTRIBUTED: Shape = {
  stage: "string", arch: "string", strategy: "string", ranks: "number", perRankEstimateMiB: "number", perRankMeasuredMiB: "number",
  errorPct: "number", launcherEstimateMiB: "number", parts: "string",
};
/** memlane-rt's device memory on CUDA (report.estimates.device, present only where it ran on CUDA). */
const ESTIMATE_DEVICE: Shape = {
  runtime: "string", stage: "string", maxBatch: "number", estimate: "object|null", reason: "string|null", calibration: "string|null",
  measured: "object", loadErrorPct: "number|null", endErrorPct: "number|null", peakErrorPct: "number|null",
};
const LATENCY: Shape = { p50: "number", p99: "number", mean: "number" };
/** Present only where the runtime timed requests pipelined (memlane-rt, python-torch on CUDA). */
const LATENCY_OPTIONAL: Shape = { pipelinedMean: "number" };

function kindOf(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  return typeof v;
}

function matches(v: unknown, kind: Kind): boolean {
  const k = kindOf(v);
  const ok = kind.split("|").includes(k);
  return ok && (k !== "number" || Number.isFinite(v as number));
}

function check(obj: unknown, shape: Shape, path: string, errors: string[]): obj is Record<string, unknown> {
  if (kindOf(obj) !== "object") {
    errors.push(`${path}: expected an object, received ${kindOf(obj)}`);
    return false;
  }
  const o = obj as Record<string, unknown>;
  for (const [key, kind] of Object.entries(shape)) {
    if (!(key in o)) errors.push(`${path}.${key}: missing (expected ${kind})`);
    else if (!matches(o[key], kind)) errors.push(`${path}.${key}: expected ${kind}, received ${kindOf(o[key])}`);
  }
  return true;
}

/** Type-checks the keys of `shape` that `obj` has; absent keys are fine. */
function checkPresent(o: Record<string, unknown>, shape: Shape, path: string, errors: string[]): void {
  for (const [key, kind] of Object.entries(shape))
    if (key in o && !matches(o[key], kind)) errors.push(`${path}.${key}: expected ${kind}, received ${kindOf(o[key])}`);
}

function each(arr: unknown, shape: Shape, path: string, errors: string[], more?: (o: Record<string, unknown>, p: string) => void): void {
  if (!Array.isArray(arr)) return;
  arr.forEach((item, i) => {
    if (check(item, shape, `${path}[${i}]`, errors)) more?.(item, `${path}[${i}]`);
  });
}

function checkPhases(o: Record<string, unknown>, p: string, errors: string[]): void {
  each(o["phases"], PHASE, `${p}.phases`, errors, (ph, pp) => {
    if (ph["gpu"] !== "available" && ph["gpu"] !== "unavailable") errors.push(`${pp}.gpu: expected "available" or "unavailable", received ${JSON.stringify(ph["gpu"])}`);
    if (ph["gpu"] === "unavailable" && ph["gpuMiB"] !== null) errors.push(`${pp}.gpuMiB: expected null when gpu is "unavailable", received ${String(ph["gpuMiB"])}`);
    checkPresent(ph, PHASE_ADDED, pp, errors);
    const b = ph["breakdown"];
    if (b !== undefined && b !== null && check(b, BREAKDOWN, `${pp}.breakdown`, errors))
      each((b as Record<string, unknown>)["kinds"], KIND, `${pp}.breakdown.kinds`, errors, (k, kp) => each(k["files"], KIND_FILE, `${kp}.files`, errors));
  });
}

export function validateReport(report: unknown): string[] {
  const errors: string[] = [];
  if (!check(report, TOP, "report", errors)) return errors;
  if (report["schemaVersion"] !== REPORT_SCHEMA_VERSION)
    errors.push(`report.schemaVersion: expected ${REPORT_SCHEMA_VERSION}, received ${String(report["schemaVersion"])}`);
  check(report["host"], HOST, "report.host", errors);
  if (Array.isArray(report["notes"]))
    report["notes"].forEach((n, i) => { if (typeof n !== "string") errors.push(`report.notes[${i}]: expected string, received ${kindOf(n)}`); });
  if (kindOf(report["transport"]) === "object") check(report["transport"], TRANSPORT, "report.transport", errors);
  if (report["training"] !== null && check(report["training"], TRAINING, "report.training", errors)) {
    const t = report["training"] as Record<string, unknown>;
    check(t["process"], PROCESS, "report.training.process", errors);
    checkPhases(t, "report.training", errors);
  }
  each(report["runtimes"], RUNTIME, "report.runtimes", errors, (r, p) => {
    checkPresent(r, RUNTIME_ADDED, p, errors);
    check(r["process"], PROCESS, `${p}.process`, errors);
    check(r["steady"], STEADY, `${p}.steady`, errors);
    checkPhases(r, p, errors);
    if ("profile" in r) errors.push(...validateProfile(r["profile"], `${p}.profile`));
    const lat = r["latencyMs"];
    if (kindOf(lat) === "object")
      for (const [k, v] of Object.entries(lat as Record<string, unknown>)) {
        if (!/^batch\d+$/.test(k)) errors.push(`${p}.latencyMs.${k}: expected a key batch<N>`);
        if (check(v, LATENCY, `${p}.latencyMs.${k}`, errors)) checkPresent(v, LATENCY_OPTIONAL, `${p}.latencyMs.${k}`, errors);
      }
  });
  each(report["checkpointLoad"], CHECKPOINT, "report.checkpointLoad", errors);
  check(report["comparison"], COMPARISON, "report.comparison", errors);
  check(report["numerics"], NUMERICS, "report.numerics", errors);
  if (check(report["gpu"], GPU, "report.gpu", errors)) {
    const s = (report["gpu"] as Record<string, unknown>)["status"];
    if (s !== "available" && s !== "unavailable") errors.push(`report.gpu.status: expected "available" or "unavailable", received ${JSON.stringify(s)}`);
  }
  each(report["stages"], STAGE, "report.stages", errors, (st, p) => {
    if ("attempts" in st) each(st["attempts"], ATTEMPT, `${p}.attempts`, errors);
  });
  checkPresent(report, TOP_ADDED, "report", errors);
  if ("outcome" in report && report["outcome"] !== "complete" && report["outcome"] !== "failed")
    errors.push(`report.outcome: expected "complete" or "failed", received ${JSON.stringify(report["outcome"])}`);
  if ("estimates" in report && check(report["estimates"], ESTIMATES, "report.estimates", errors)) {
    const e = report["estimates"] as Record<string, unknown>;
    if (e["status"] !== "ok" && e["status"] !== "unavailable") errors.push(`report.estimates.status: expected "ok" or "unavailable", received ${JSON.stringify(e["status"])}`);
    each(e["runtimes"], { runtime: "string", model: "string", phases: "array", steadyRssErrorPct: "number|null" }, "report.estimates.runtimes", errors);
    if (e["training"] !== undefined && e["training"] !== null) check(e["training"], ESTIMATE_TRAINING, "report.estimates.training", errors);
    if (e["distributed"] !== undefined) each(e["distributed"], ESTIMATE_DISTRIBUTED, "report.estimates.distributed", errors);
    if (e["device"] !== undefined) each(e["device"], ESTIMATE_DEVICE, "report.estimates.device", errors);
  }
  if ("budgets" in report) {
    if (!Array.isArray(report["budgets"])) errors.push(`report.budgets: expected array, received ${kindOf(report["budgets"])}`);
    each(report["budgets"], BUDGET, "report.budgets", errors);
  }
  each(report["timeline"], TRACK, "report.timeline", errors, (t, p) => {
    (t["samples"] as unknown[]).forEach((s, i) => {
      const ok = Array.isArray(s) && s.length === 4 && s.slice(0, 2).every((x) => matches(x, "number")) && matches(s[2], "number|null") && matches(s[3], "number|null");
      if (!ok) errors.push(`${p}.samples[${i}]: expected [tMs, rssKiB, ussKiB|null, gpuKiB|null], received ${JSON.stringify(s)}`);
    });
  });
  return errors;
}
