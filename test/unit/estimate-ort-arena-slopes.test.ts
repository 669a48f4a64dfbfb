// The ORT runtimes' arena terms are given, never fitted (src/estimate/calibration.ts
// arenaSlope): the arena replay's bytes are resident bytes. At first-inference ORT has run one
// request, so the replay's arena after it (ortFirstRequestMiB) counts, slope 1, and the whole
// run's arena (activationMiB) not at all; at steady-inference the reverse; before the first
// request neither, however a runtime's noisy figures lean on the activation probe.
import { describe, expect, it } from "vitest";
import { type Calibration, fitModels } from "../../src/estimate/calibration.ts";
import { FEATURE_NAMES, fitLinear, predict } from "../../src/estimate/fit.ts";

// An ORT runtime's weights are what its load left in use (loadMiB: here the weights and a copy of the conv kernels).
const f = (w: number, cw: number, a: number, e: number, first = 0) => ({ weightMiB: w, convWeightMiB: cw, activationMiB: a, evalMiB: e, evalOutputMiB: 0, heldMiB: 0, largestBatchMiB: 0, loadMiB: w + cw, nativeReleasedMiB: 0, deadOutputMiB: 0, outputBufferMiB: 0, nativeWorkspaceMiB: 0, ortFirstRequestMiB: first, loadTransientMiB: 0, deadOutputKeptMiB: 0, firstRequestMiB: 0, mappedWeightMiB: 0, socketEvalMiB: 0 });
// The first request's arena is a part of the whole run's (batch 1 before 64).
const PROBE_FEATURES = [f(0, 0, 0, 0), f(0, 0, 0, 1), f(48, 0, 0, 1), f(36, 36, 0, 1), f(0, 0, 32, 3, 2), f(0, 0, 0, 128), f(16, 0, 8, 9, 0.5)];
const ACT = FEATURE_NAMES.indexOf("activationMiB") + 1; // coef[0] is the intercept
const FIRST = FEATURE_NAMES.indexOf("ortFirstRequestMiB") + 1;

/** node-ort's model-load figures carry noise that leans on the activation probe (index 4). */
function probes(): Calibration["probes"] {
  return PROBE_FEATURES.map((x, i) => {
    const noise = [0, 4, -3, 2, 9, -2, 1][i]!;
    const load = 60 + x.loadMiB + x.evalMiB;
    const first = load + 3 + x.ortFirstRequestMiB;
    const steady = load + 5 + x.activationMiB;
    const row = (l: number, fi: number, st: number) => ({
      "model-load": { rss: l, uss: l, pss: l, peak: l },
      "first-inference": { rss: fi, uss: fi, pss: fi, peak: fi },
      "steady-inference": { rss: st, uss: st, pss: st, peak: st },
    });
    return { name: `p${i}`, features: { "python-ort": x, "node-ort": x }, phases: { "python-ort": row(load, first, steady), "node-ort": row(load + 100 + noise, first + 100 + noise, steady + 100 + noise) } };
  });
}

describe("the ORT runtimes' arena slopes", () => {
  it("count the first request's arena alone at first-inference, the whole run's at steady-inference", () => {
    const m = fitModels(probes());
    for (const rt of ["python-ort", "node-ort"])
      for (const c of ["rss", "uss", "pss", "peak"] as const) {
        const first = m[rt]!.fits["first-inference"]![c].coef, steady = m[rt]!.fits["steady-inference"]![c].coef;
        expect([first[ACT], first[FIRST]]).toEqual([0, 1]);
        expect([steady[ACT], steady[FIRST]]).toEqual([1, 0]);
      }
    // python-ort's figures follow the terms exactly: so do its predictions, for a model whose
    // first request's arena (40 MiB) is a tenth of the run's (400).
    const model = f(10, 0, 400, 2, 40);
    expect(predict(m["python-ort"]!.fits["first-inference"]!.rss, model)).toBeCloseTo(60 + 10 + 2 + 3 + 40, 6);
    expect(predict(m["python-ort"]!.fits["steady-inference"]!.rss, model)).toBeCloseTo(60 + 10 + 2 + 5 + 400, 6);
  });

  it("are 0 before the first request, where a free fit of node-ort's noise would not be", () => {
    const m = fitModels(probes());
    for (const rt of ["python-ort", "node-ort"]) {
      const load = m[rt]!.fits["model-load"]!.rss.coef;
      expect([load[ACT], load[FIRST]]).toEqual([0, 0]);
    }
    const free = fitLinear(probes().map((p) => ({ features: p.features["node-ort"]!, value: p.phases["node-ort"]!["model-load"]!.rss })));
    expect(free.coef[ACT]).toBeGreaterThan(0.1);
  });

  it("leave the other terms fitted to what they leave, and report the whole prediction's residual", () => {
    const node = fitModels(probes())["node-ort"]!.fits["first-inference"]!.rss;
    expect(node.coef[0]).toBeGreaterThan(155);
    const rows = probes().map((p) => predict(node, p.features["node-ort"]!) - p.phases["node-ort"]!["first-inference"]!.rss);
    expect(node.rmsMiB).toBeCloseTo(Math.sqrt(rows.reduce((a, r) => a + r * r, 0) / rows.length), 9);
  });
});
