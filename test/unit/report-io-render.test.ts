// A compare of a model with several outputs where one runtime did not run: every renderer
// (terminal, markdown, HTML) shows the diff per output, the row of the runtime that did not run
// with its error, and (markdown) the inputs fed; report.json keeps them (schema.ts).
import { describe, expect, it } from "vitest";
import { buildReport } from "../../src/report/build.ts";
import { renderHtmlReport } from "../../src/report/html/index.ts";
import { renderMarkdown } from "../../src/report/markdown.ts";
import { renderTerminal } from "../../src/report/terminal.ts";
import { validateReport } from "../../src/report/validate.ts";
import { realisticRun } from "./report-fixture.ts";

function compareRun() {
  const run = realisticRun();
  const outputs = (d1: number | null, d2: number | null) => [
    { name: "last_hidden_state", dtype: "float32", shape: [256, 128, 64], maxAbsDiff: d1 },
    { name: "pooler_output", dtype: "float32", shape: [256, 64], maxAbsDiff: d2 },
  ];
  run.runtimes = run.runtimes.map((r) =>
    r.name === "python-torch" ? { ...r, maxAbsDiff: null, outputs: outputs(null, null) } : { ...r, maxAbsDiff: 3e-6, outputs: outputs(3e-6, 1e-7) });
  run.numericsReference = "python-torch";
  run.runtimesNotRun = [{ name: "tvm", status: "failed", error: { code: 6, name: "TASK_FAILED", message: "worker exited with code 1 before its hello" } }];
  run.inputs = [{ name: "input_ids", dtype: "int64", shape: [-1, 128], batchAxis: 0, values: 'ids in [0, 1000) (indices of Gather "emb")' }];
  return buildReport(run);
}

describe("a compare with several outputs and a runtime that failed", () => {
  const report = compareRun();

  it("keeps the new fields in a valid report", () => {
    expect(validateReport(JSON.parse(JSON.stringify(report)))).toEqual([]);
    expect(report.numerics.runtimes.find((r) => r.name === "native")!.outputs).toEqual([
      { name: "last_hidden_state", maxAbsDiff: 3e-6 }, { name: "pooler_output", maxAbsDiff: 1e-7 },
    ]);
  });

  it("terminal: the failed runtime's row and error, the diff per output", () => {
    const t = renderTerminal(report);
    expect(t).toMatch(/\ntvm +failed +- +- /);
    expect(t).toContain("tvm: failed — TASK_FAILED: worker exited with code 1 before its hello");
    expect(t).toMatch(/Max abs diff per output vs python-torch:\noutput +python-torch +python-ort +node-ort +native/);
    expect(t).toMatch(/\nlast_hidden_state +reference +3\.00e-6 +3\.00e-6 +3\.00e-6/);
    expect(t).toMatch(/\npooler_output +reference +1\.00e-7/);
    expect(t).toContain('Inputs fed to every runtime (N: the batch):\n  input_ids int64 [N, 128]: ids in [0, 1000) (indices of Gather "emb")');
  });

  it("markdown: the row, the error, the diff per output with dtype and shape, the inputs fed", () => {
    const md = renderMarkdown(report);
    expect(md).toMatch(/\| tvm \| failed \| — \|/);
    expect(md).toContain("- `tvm` failed: TASK_FAILED (6): worker exited with code 1 before its hello");
    expect(md).toContain("| last_hidden_state | float32 | [256, 128, 64] | reference | 3.00e-6 | 3.00e-6 | 3.00e-6 |");
    expect(md).toContain('| input_ids | int64 | [N, 128] | ids in [0, 1000) (indices of Gather "emb") |');
  });

  it("HTML: the failed runtime and the diff per output", () => {
    const html = renderHtmlReport(report);
    expect(html).toContain("<li><strong>tvm</strong> failed: TASK_FAILED: worker exited with code 1 before its hello</li>");
    expect(html).toMatch(/<table id="numerics-outputs">.*<td>pooler_output<\/td><td>—<\/td><td>1\.00e-7<\/td>/s);
  });
});
