// How memlane feeds an ONNX model it did not build: the batch axis and every other dim of each
// input (shapes.ts, on graph signatures as exporters write them), float16 bits, and the input
// files (.npz stored and compressed, .safetensors) as numpy and safetensors write them.
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readInputFile } from "../../src/pipeline/inputs/files.ts";
import { generateInput } from "../../src/pipeline/inputs/generate.ts";
import type { OnnxIo, OnnxValue } from "../../src/pipeline/inputs/onnx-io.ts";
import { parseShapeFlag, resolveModelIo } from "../../src/pipeline/inputs/shapes.ts";
import { fromHalfBits, moveAxisToFront, toHalfBits } from "../../src/pipeline/inputs/tensor-data.ts";
import { pythonPath } from "../fixtures/onnx/models.ts";

const v = (name: string, dtype: OnnxValue["dtype"], dims: OnnxValue["dims"]): OnnxValue => ({ name, dtype, elemTypeName: dtype ?? "DOUBLE", dims });
const model = (inputs: OnnxValue[], outputs: OnnxValue[] = [v("y", "float32", null)]): OnnxIo =>
  ({ file: "m.onnx", inputs, outputs, nodes: [], constDims: new Map() });
const specs = (io: OnnxIo, opts = {}) => resolveModelIo(io, opts).inputs.map((i) => [i.name, i.shape, i.batchAxis]);

describe("the batch axis and the other dims of each input", () => {
  it("a dim named like a batch wins, wherever it is (time-major LSTM: [seq, batch, 8])", () => {
    expect(specs(model([v("x", "float32", ["seq", "batch", 8])]))).toEqual([["x", [128, -1, 8], 1]]);
    expect(specs(model([v("x", "float32", ["s1", "s0", 8])]))).toEqual([["x", [128, -1, 8], 1]]);
  });
  it("else a symbolic dim 0; other symbolic dims from --seq, or from --shape through a shared name", () => {
    const io = model([v("ids", "int64", ["p", "q"]), v("mask", "int64", ["p", "q"])]);
    expect(specs(io, { seq: 7 })).toEqual([["ids", [-1, 7], 0], ["mask", [-1, 7], 0]]);
    expect(specs(io, { shapes: parseShapeFlag("mask=4x33") })).toEqual([["ids", [-1, 33], 0], ["mask", [-1, 33], 0]]);
  });
  it("a static batch of 1 at dim 0 runs batch 1 only; a fully static model is batch-first with its batch", () => {
    const one = resolveModelIo(model([v("ids", "int64", [1, "sequence"])]));
    expect(one.inputs[0]).toMatchObject({ shape: [-1, 128], batchAxis: 0 });
    expect(one.staticBatch).toBe(1);
    expect(resolveModelIo(model([v("x", "float32", [1, 3, 8, 8])])).staticBatch).toBe(1);
  });
  it("a fully static input beside a free batch has none (batchAxis -1, fed as is)", () => {
    expect(specs(model([v("x", "float32", ["N", 4]), v("table", "float32", [10, 4])]))).toEqual([["x", [-1, 4], 0], ["table", [10, 4], -1]]);
  });
  it("outputs follow the inputs' batch dim name", () => {
    const r = resolveModelIo(model([v("x", "float32", ["seq", "batch", 8])], [v("h", "float32", ["seq", "batch", 16]), v("c", "float32", [1, "batch", 16])]));
    expect(r.outputs.map((o) => [o.name, o.shape, o.batchAxis])).toEqual([["h", [128, -1, 16], 1], ["c", [1, -1, 16], 1]]);
  });
  it("refuses what it cannot feed, naming the input", () => {
    expect(() => resolveModelIo(model([v("x", null, ["N", 2])]))).toThrow(/input "x" has element type DOUBLE/);
    expect(() => resolveModelIo(model([v("x", "float32", null)]))).toThrow(/input "x" has no shape in the model; give it with --shape x=/);
    expect(() => parseShapeFlag("x=0x3")).toThrow(/--shape: expected name=DIMxDIM/);
    expect(() => parseShapeFlag("x=1x3,x=1x4")).toThrow(/--shape: input "x" given more than once/);
  });
});

describe("values", () => {
  it("float16 bits round-trip the halves exactly and round to nearest", () => {
    for (const x of [0, 1, -2.5, 65504, 6.103515625e-5, 5.960464477539063e-8, -0.1]) expect(fromHalfBits(toHalfBits(x))).toBeCloseTo(x, 3);
    expect(toHalfBits(1)).toBe(0x3c00);
    expect(toHalfBits(1e6)).toBe(0x7c00);
  });
  it("position ids count along the last axis; a generated float16 input is half bits", () => {
    const pos = generateInput({ name: "position_ids", dtype: "int64", shape: [-1, 4], batchAxis: 0 }, 2, 1);
    expect(Array.from(pos.tensor.data as BigInt64Array, Number)).toEqual([0, 1, 2, 3, 0, 1, 2, 3]);
    const mask = generateInput({ name: "attention_mask", dtype: "float16", shape: [-1, 3], batchAxis: 0 }, 2, 1);
    expect([mask.values, Array.from(mask.tensor.data as Uint16Array, fromHalfBits)]).toEqual(["ones (mask)", [1, 1, 1, 1, 1, 1]]);
    const h = generateInput({ name: "x", dtype: "float16", shape: [-1, 3], batchAxis: 0 }, 2, 1);
    expect(h.tensor.data).toBeInstanceOf(Uint16Array);
    for (const b of h.tensor.data as Uint16Array) expect(Math.abs(fromHalfBits(b))).toBeLessThanOrEqual(1);
  });
  it("bbox inputs are ordered boxes (x0 <= x1, y0 <= y1) below their Gathers' bound, else on LayoutLM's 0-1000 grid", () => {
    for (const [bound, top] of [[{ bound: 64, node: "/x/Gather" }, 64], [undefined, 1001]] as const) {
      const b = generateInput({ name: "bbox", dtype: "int64", shape: [-1, 50, 4], batchAxis: 0 }, 3, 5, bound);
      expect(b.values).toMatch(new RegExp(`^boxes \\(x0, y0, x1, y1\\) in \\[0, ${top}\\), x0 <= x1, y0 <= y1`));
      const v = Array.from(b.tensor.data as BigInt64Array, Number);
      expect(v).toHaveLength(3 * 50 * 4);
      for (let i = 0; i < v.length; i += 4) {
        expect(v[i]!).toBeLessThanOrEqual(v[i + 2]!);
        expect(v[i + 1]!).toBeLessThanOrEqual(v[i + 3]!);
      }
      expect(Math.min(...v)).toBeGreaterThanOrEqual(0);
      expect(Math.max(...v)).toBeLessThan(top);
      expect(new Set(v).size, "boxes spread over the grid").toBeGreaterThan(Math.min(top, v.length) / 4);
    }
    // not four coordinates: not boxes
    expect(generateInput({ name: "bbox", dtype: "int64", shape: [-1, 5], batchAxis: 0 }, 2, 1).values).toBe("zeros (reaches no Gather)");
  });
  it("moves a batch axis to the front", () => {
    const m = moveAxisToFront("int32", Int32Array.from([0, 1, 2, 3, 4, 5]), [3, 2], 1); // [seq 3, batch 2]
    expect(m.shape).toEqual([2, 3]);
    expect(Array.from(m.data as Int32Array)).toEqual([0, 2, 4, 1, 3, 5]);
  });
});

describe("--inputs files as numpy and safetensors write them", () => {
  let dir = "";
  beforeAll(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), "memlane-input-files-"));
    const py = [
      "import sys, numpy as np",
      "from safetensors.numpy import save_file",
      "a = {'ids': np.arange(6, dtype=np.int64).reshape(2, 3), 'm': np.array([[True, False]]), 'x': np.linspace(-1, 1, 4, dtype=np.float32).reshape(2, 2),",
      "     'h': np.array([0.5, -2], dtype=np.float16)}",
      "np.savez(sys.argv[1] + '/a.npz', **a); np.savez_compressed(sys.argv[1] + '/c.npz', **a); save_file(a, sys.argv[1] + '/a.safetensors')",
      "np.savez(sys.argv[1] + '/f.npz', x=np.asfortranarray(np.ones((2, 3), np.float32)), d=np.ones(2))",
    ].join("\n");
    execFileSync(pythonPath(), ["-c", py, dir]);
  }, 60_000);
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("reads the same arrays from .npz (stored, deflated) and .safetensors", () => {
    for (const f of ["a.npz", "c.npz", "a.safetensors"]) {
      const m = readInputFile(path.join(dir, f));
      const get = (k: string) => m.get(k) as { dtype: string; shape: number[]; data: ArrayLike<number | bigint> };
      expect(get("ids").dtype, f).toBe("int64");
      expect(get("ids").shape, f).toEqual([2, 3]);
      expect(Array.from(get("ids").data, Number), f).toEqual([0, 1, 2, 3, 4, 5]);
      expect([get("m").dtype, Array.from(get("m").data)], f).toEqual(["bool", [1, 0]]);
      expect(Array.from(get("x").data), f).toEqual([-1, -1 / 3, 1 / 3, 1].map((x) => Math.fround(x)));
      expect(Array.from(get("h").data as Uint16Array, fromHalfBits), f).toEqual([0.5, -2]);
    }
  });
  it("names what it cannot read: a Fortran-order array, a missing file", () => {
    expect(() => readInputFile(path.join(dir, "f.npz"))).toThrow(/f\.npz: x: a Fortran-order array/);
    expect(() => readInputFile(path.join(dir, "nope.bin"))).toThrow(/--inputs: cannot read/);
  });
});

describe("pipeline .export({ onnx }) input options", () => {
  it("are checked when the pipeline is built, naming the stage and the option", async () => {
    const { pipeline } = await import("../../src/pipeline/builder.ts");
    expect(() => pipeline("p").export({ onnx: "m.onnx", shapes: { ids: [1, 0] } })).toThrow(/stage "export": shapes\.ids: expected a full shape/);
    expect(() => pipeline("p").export({ zoo: "mlp", seq: 3 })).toThrow(/stage "export": seq: expected only with onnx/);
    expect(() => pipeline("p").export({ onnx: "m.onnx" }).benchmark("node-ort", { optional: "yes" as never })).toThrow(/optional: expected a boolean/);
    expect(pipeline("p").export({ onnx: "m.onnx", shapes: { ids: ["N", 128] }, seq: 64 }).stages).toHaveLength(1);
  });
});
