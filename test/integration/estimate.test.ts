// The estimate end to end on this machine: a calibration from two real probe runs (fresh
// `memlane compare` processes, real workers), `memlane estimate` reading it from a temp cache
// dir, and a compare run whose report carries estimate vs measured. Two probes instead of the
// full set keep it to about a minute; the fit then has fewer terms to tell apart, which the
// assertions allow for (they check structure and the terms the two probes do move).
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { calibrationKey, saveCalibration } from "../../src/estimate/cache.ts";
import { calibrate } from "../../src/estimate/calibration.ts";
import { cudaBenchBinary } from "../../src/estimate/cuda-device.ts";
import { FEATURE_NAMES } from "../../src/estimate/fit.ts";
import { PROBES, writeProbes } from "../../src/estimate/probe-models.ts";
import type { Report } from "../../src/report/schema.ts";
import { validateReport } from "../../src/report/validate.ts";
import { expectNoneLeft, startCli } from "./pipeline-helpers.ts";
import { ORT_ONLY_OPS } from "../fixtures/ort-only-ops.ts";
import { writeModel } from "../unit/compiler-onnx-builder.ts";

const dir = mkdtempSync(path.join(os.tmpdir(), "memlane-estimate-"));
const cache = path.join(dir, "cache");
const saved = process.env.MEMLANE_CACHE_DIR;
afterAll(() => {
  if (saved === undefined) delete process.env.MEMLANE_CACHE_DIR;
  else process.env.MEMLANE_CACHE_DIR = saved;
  rmSync(dir, { recursive: true, force: true });
});

describe("memlane estimate (calibrated on this machine)", () => {
  it("calibrates from probe runs, predicts per runtime and phase, and a compare report carries estimate vs measured", async () => {
    process.env.MEMLANE_CACHE_DIR = cache;
    const probes = PROBES.filter((p) => p.name === "tiny" || p.name === "weights");
    const lines: string[] = [];
    const cal = await calibrate(calibrationKey(), { err: (l) => lines.push(l) }, probes);
    expect(lines.join("\n")).toMatch(/calibrated probe tiny .*calibrated probe weights/s);
    expect(Object.keys(cal.models).sort()).toEqual(["native", "node-ort", "python-ort"]);
    // python-ort copies the weights at model-load: the load probe's in-use bytes hold them
    // (slope 1, given), so the fitted slope on W is none.
    const ortLoad = cal.models["python-ort"]!.fits["model-load"]!.rss.coef;
    expect(ortLoad[FEATURE_NAMES.indexOf("loadMiB") + 1]).toBe(1);
    expect(ortLoad[1] + ortLoad[2]).toBe(0);
    saveCalibration(cal);

    const model = writeProbes(dir, probes).get("weights")!;
    const est = startCli(["estimate", model, "--batch", "1,8", "--eval-samples", "64", "--json"], { MEMLANE_CACHE_DIR: cache });
    expect((await est.exit).code, est.stderr()).toBe(0);
    const out = JSON.parse(est.stdout()) as { runtimes: Array<{ runtime: string; phases: Array<{ phase: string; rss: number; peak: number; spreadMiB: number }> }>; naiveMiB: number; terms: { weightMiB: number } };
    expect(out.terms.weightMiB).toBeCloseTo(48, 6);
    // python-ort's load: its 48 MiB of weights, as the load probe found them in use.
    const ort = out.runtimes.find((r) => r.runtime === "python-ort")!;
    const at = (ph: string) => ort.phases.find((p) => p.phase === ph)!.rss;
    expect(at("model-load") - at("runtime-create")).toBeGreaterThan(48);
    const native = out.runtimes.find((r) => r.runtime === "native")!;
    expect(native.phases.map((p) => p.phase)).toContain("steady-inference");
    for (const p of native.phases) expect(p.spreadMiB, `${p.phase}: the fit's rms over the probes`).toBeGreaterThanOrEqual(0);
    // memlane-rt maps the plan: its weights are resident once the first inference touched them.
    expect(native.phases.at(-1)!.rss).toBeGreaterThan(48);
    expect(out.naiveMiB).toBeCloseTo(48 + (8 * (1024 + 2048) * 4) / 2 ** 20, 3);
    expect(est.stderr()).not.toMatch(/calibrating/);

    // A model memlane-rt cannot run, asked for memlane-rt alone: the line says why.
    const refused = startCli(["estimate", writeModel(ORT_ONLY_OPS, "ort-only-ops", dir), "--runtimes", "native"], { MEMLANE_CACHE_DIR: cache });
    expect((await refused.exit).code, refused.stderr()).toBe(0);
    expect(refused.stdout()).toMatch(/native: not estimated: memlane-rt cannot run a model its compiler refuses \(.*ScatterND .*computes on run-time data/);

    // --device cuda: memlane-rt's device allocations come from the plan with no GPU; the total
    // needs this GPU's calibration, so without a GPU it says why and gives no number.
    if (cudaBenchBinary()) {
      const dev = startCli(["estimate", model, "--batch", "1,8", "--runtimes", "native", "--device", "cuda"], { MEMLANE_CACHE_DIR: cache });
      expect((await dev.exit).code, dev.stderr()).toBe(0);
      const text = dev.stdout();
      expect(text).toMatch(/device \(CUDA\), native allocations at batch 8 \(MiB, from the plan\): weights 48(\.0+)?; per execution context \(1\): cublas-workspace 32(\.0+)?, arena /);
      if (existsSync("/dev/nvidiactl")) expect(text).toMatch(/device \(CUDA\), native: \d+(\.\d+)? MiB after the load/);
      else expect(text).toMatch(/device \(CUDA\), native: unavailable \(no CUDA device here/);
      expect(text).not.toMatch(/python-ort/); // not asked for
    }

    const runs = path.join(dir, "runs");
    const cmp = startCli(["compare", model, "--batch", "1,8", "--iterations", "3", "--eval-samples", "64", "-o", runs, "-q"], { MEMLANE_CACHE_DIR: cache });
    expect((await cmp.exit).code, cmp.stderr()).toBe(0);
    expect(cmp.stdout()).toMatch(/Estimate vs measured \(steady RSS/);
    expect(await expectNoneLeft(cmp.tag)).toEqual([]);
    const r = JSON.parse(readFileSync(path.join(runs, readdirSync(runs)[0]!, "report.json"), "utf8")) as Report;
    expect(validateReport(r)).toEqual([]);
    expect(r.estimates!.status).toBe("ok");
    for (const rt of r.estimates!.runtimes) {
      const measured = r.runtimes.find((x) => x.name === rt.runtime)!;
      const last = rt.phases.at(-1)!;
      expect(last.rss.measuredMiB).toBe(measured.phases.find((p) => p.name === last.phase)!.rssMiB);
      expect(last.rss.errorPct).toBeCloseTo(((last.rss.estimateMiB - last.rss.measuredMiB) / last.rss.measuredMiB) * 100, 6);
      // The same probe was one of the two the fit saw: its steady RSS must come back close for
      // the worker processes. node-ort's is the orchestrator's own heap, whose V8 collections
      // move it by 20 % between two runs of the same model; its accuracy is bench:estimate's.
      if (rt.runtime !== "node-ort") expect(Math.abs(last.rss.errorPct), `${rt.runtime} steady RSS`).toBeLessThan(15);
    }
  }, 300_000);

  it("says why when no calibration is cached", async () => {
    const runs = path.join(dir, "runs-uncal");
    const model = writeProbes(dir, PROBES.filter((p) => p.name === "tiny")).get("tiny")!;
    const cmp = startCli(["compare", model, "--runtimes", "native", "--batch", "1", "--iterations", "2", "-o", runs, "-q"], { MEMLANE_CACHE_DIR: path.join(dir, "empty-cache") });
    expect((await cmp.exit).code, cmp.stderr()).toBe(0);
    const r = JSON.parse(readFileSync(path.join(runs, readdirSync(runs)[0]!, "report.json"), "utf8")) as Report;
    expect(r.estimates).toMatchObject({ status: "unavailable" });
    expect(r.estimates!.reason).toMatch(/memlane estimate --calibrate/);
  }, 120_000);
});
