// A trained model's int64 held-out windows (tiny-gpt) become the eval set of its exported
// graph's input: fed as is when dtype and non-batch dims agree, refused by name otherwise.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import onnxProto from "onnx-proto";
import { afterAll, describe, expect, it } from "vitest";
import { heldoutEvalSet } from "../../src/pipeline/heldout-eval.ts";

const { onnx } = onnxProto;
const dir = mkdtempSync(join(tmpdir(), "memlane-heldout-eval-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** ids int64 [batch, 64] -> Gather from a [256, 4] table -> out float [batch, 64, 4]. */
function byteModel(): string {
  const T = onnx.TensorProto.DataType;
  const m = onnx.ModelProto.create({
    irVersion: 8,
    opsetImport: [{ domain: "", version: 17 }],
    graph: {
      name: "g",
      node: [{ opType: "Gather", name: "embed", input: ["table", "ids"], output: ["out"] }],
      initializer: [{ name: "table", dims: [256, 4], dataType: T.FLOAT, rawData: new Uint8Array(256 * 4 * 4) }],
      input: [{ name: "ids", type: { tensorType: { elemType: T.INT64, shape: { dim: [{ dimParam: "batch" }, { dimValue: 64 }] } } } }],
      output: [{ name: "out", type: { tensorType: { elemType: T.FLOAT, shape: { dim: [{ dimParam: "batch" }, { dimValue: 64 }, { dimValue: 4 }] } } } }],
    },
  });
  const p = join(dir, "bytes.onnx");
  writeFileSync(p, onnx.ModelProto.encode(m).finish());
  return p;
}

describe("heldoutEvalSet", () => {
  const model = byteModel();
  const windows = (n: number, t = 64) => ({ dtype: "int64" as const, shape: [n, t], data: new BigInt64Array(n * t).fill(7n) });

  it("feeds int64 windows to the graph's int64 input, batch first", () => {
    const raw = windows(5);
    const set = heldoutEvalSet(model, raw);
    expect(set.nEval).toBe(5);
    expect(set.io.inputs.map((i) => [i.name, i.dtype, i.shape, i.batchAxis])).toEqual([["ids", "int64", [-1, 64], 0]]);
    expect(set.io.outputs.map((o) => o.name)).toEqual(["out"]);
    expect(set.inputs[0]!.tensor).toBe(raw);
    expect(set.staticBatch).toBeNull();
  });

  it("refuses windows of another length or dtype, naming the input", () => {
    expect(() => heldoutEvalSet(model, windows(5, 32))).toThrow(/input "ids" takes int64 \[N, 64\], the held-out int64 \[5, 32\] does not fit/);
    expect(() => heldoutEvalSet(model, { dtype: "float32", shape: [5, 64], data: new Float32Array(320) })).toThrow(/input "ids" takes int64/);
  });
});
