import { describe, expect, it } from "vitest";
import { profileTables } from "../../src/report/html/profile.ts";
import { profileFromTask, profileMarkdown, profileTerminal, validateProfile } from "../../src/report/profile.ts";
import type { Report } from "../../src/report/schema.ts";
import { TORCH_NO_PROFILE } from "../../src/pipeline/exec-benchmark.ts";

const raw = {
  batch: 1, runs: 4, wallMsMean: 3,
  ops: [
    { name: "conv1", opType: "Conv", fused: "Add+Relu", kernel: "winograd_avx2", totalMs: 8, minMs: 0.75, calls: 8 },
    { name: "fc", opType: "Gemm", totalMs: 2, minMs: 0.25, calls: 4 },
    { name: "conv2", opType: "Conv", totalMs: 0, calls: 4 },
  ],
};

describe("profileFromTask", () => {
  it("turns totals into ms per call, shares and op types, slowest first", () => {
    const p = profileFromTask(raw, "memlane-rt", "bench:native");
    expect(p.opsMsPerRun).toBeCloseTo(2.5);
    expect(p.ops.map((o) => [o.name, o.msPerRun, o.pct])).toEqual([["conv1", 2, 80], ["fc", 0.5, 20], ["conv2", 0, 0]]);
    expect(p.ops[0]!.fused).toBe("Add+Relu");
    expect(p.ops.map((o) => o.kernel)).toEqual(["winograd_avx2", undefined, undefined]);
    expect(p.ops.map((o) => o.minMsPerRun)).toEqual([1.5, 0.25, null]); // two chunk calls a run; conv2 sent no minimum
    expect(p.byType).toEqual([{ opType: "Conv", nodes: 2, msPerRun: 2, minMsPerRun: null, pct: 80 }, { opType: "Gemm", nodes: 1, msPerRun: 0.5, minMsPerRun: 0.25, pct: 20 }]);
    expect(p.unavailable).toBeNull();
    expect(validateProfile(p, "p")).toEqual([]);
  });

  it("keeps an unavailable profile's reason and refuses a malformed one naming where", () => {
    const u = profileFromTask({ batch: 8, unavailable: "per-op profiling: the cuda backend cannot time its ops" }, "memlane-rt", "s");
    expect(u).toMatchObject({ batch: 8, runs: 0, ops: [], unavailable: expect.stringMatching(/cuda backend/) });
    expect(() => profileFromTask({ batch: 1, runs: 0, ops: [] }, "onnxruntime", "bench:python-ort (infer.ort)")).toThrow(/bench:python-ort \(infer.ort\): profile: expected \{batch, runs > 0/);
    expect(() => profileFromTask({ ...raw, ops: [{ name: "x", totalMs: -1 }] }, "onnxruntime", "s")).toThrow(/s: profile.ops\[0\]/);
    expect(validateProfile({ ...profileFromTask(raw, "memlane-rt", "s"), runs: "4" }, "report.runtimes[0].profile")).toEqual([expect.stringMatching(/^report.runtimes\[0\].profile.runs: /)]);
  });

  it("shows python-torch's asked-for profile as unavailable, a valid report field", () => {
    const t = profileFromTask({ batch: 4, unavailable: TORCH_NO_PROFILE }, "pytorch", "bench:python-torch (infer.torch)");
    expect(validateProfile(t, "p")).toEqual([]);
    expect(profileMarkdown([{ name: "python-torch", profile: t }])).toMatch(/python-torch: profile unavailable: python-torch has no per-op profiler/);
    expect(validateProfile({ ...t, source: "torch" }, "p")).toEqual([expect.stringMatching(/^p.source: /)]);
  });

  it("renders markdown, terminal and the side-by-side html tables", () => {
    const nat = profileFromTask(raw, "memlane-rt", "s");
    const ort = profileFromTask({ ...raw, ops: [{ name: "conv1", opType: "FusedConv", totalMs: 4, calls: 4 }] }, "onnxruntime", "s");
    const runtimes = [{ name: "native", profile: nat }, { name: "python-ort", profile: ort }, { name: "python-torch" }];
    const md = profileMarkdown(runtimes);
    expect(md).toMatch(/### native\n\nnative \(memlane-rt's executor\): batch 1, 4 profiled calls after the timed ones, 3.00 ms a call with profiling on; the ops sum to 2.50 ms, 83 % of the call\. min ms/);
    expect(md).toMatch(/\| op \| type \| kernel \| ms \| % of ops \| min ms \|\n[^\n]*\n\| conv1 \| Conv\+Add\+Relu \| winograd_avx2 \| 2.00 \| 80.0 \| 1.50 \|/);
    // ORT names no kernels: its table has no kernel column.
    expect(md).toMatch(/### python-ort[^#]*\| op \| type \| ms \| % of ops \| min ms \|/);
    expect(md).not.toMatch(/python-torch/);
    expect(profileTerminal(runtimes, 120)).toMatch(/conv1\s+Conv\+Add\+Relu\s+2.00\s+80.0\s+Conv\s+2.00\s+80.0/);
    const html = profileTables({ runtimes } as unknown as Report);
    expect(html).toMatch(/<th colspan="4">native<\/th><th colspan="4">python-ort<\/th>/);
    expect(html).toMatch(/conv1 <em>\(Conv\+Add\+Relu, winograd_avx2\)<\/em>/);
    expect(html).toMatch(/<tr><td>FusedConv<\/td><td>—<\/td><td>1.00 ms · 100.0 % · 1<\/td><\/tr>/);
    expect(profileTables({ runtimes: [{ name: "native" }] } as unknown as Report)).toBe("");
  });
});
