import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { PLAN_MAGIC, PLAN_VERSION, PlanError, compileOnnx, parsePlan, readPlan, weightData } from "../../src/compiler/index.ts";
import { Field, fnv1a64, fnv1a64Reference } from "../../src/compiler/plan-format.ts";
import { serialisePlan } from "../../src/compiler/write.ts";
import type { Built } from "../../src/compiler/build.ts";
import { init, node, tempDir, writeModel } from "./compiler-onnx-builder.ts";

async function samplePlan(): Promise<{ path: string; bytes: Buffer }> {
  const dir = tempDir();
  const p = writeModel({
    inputs: [["x", ["N", 3]]], outputs: ["y"],
    inits: [init("w", [3, 5], Array.from({ length: 15 }, (_, i) => i)), init("b", [5], [1, 2, 3, 4, 5])],
    nodes: [node("Gemm", ["x", "w", "b"], ["g"]), node("Relu", ["g"], ["r"]), node("Sigmoid", ["r"], ["y"])],
  }, "sample", dir);
  const path = join(dir, "sample.mlplan");
  await compileOnnx(p, path);
  return { path, bytes: readFileSync(path) };
}

function expectPlanError(buf: Buffer, field: RegExp, found?: string): PlanError {
  let err: unknown;
  try {
    parsePlan(buf, "t.mlplan");
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(PlanError);
  const e = err as PlanError;
  expect(e.field).toMatch(field);
  if (found !== undefined) expect(e.found).toBe(found);
  expect(e.message).toMatch(/^t\.mlplan: invalid plan: /);
  return e;
}

describe("plan format", () => {
  it("FNV-1a 64 matches the reference and published vectors", () => {
    expect(fnv1a64(new Uint8Array())).toBe(0xcbf29ce484222325n);
    expect(fnv1a64(new TextEncoder().encode("a"))).toBe(0xaf63dc4c8601ec8cn);
    expect(fnv1a64(new TextEncoder().encode("foobar"))).toBe(0x85944171f73967e8n);
    const r = Uint8Array.from({ length: 4096 }, (_, i) => (i * 7919 + 13) & 255);
    expect(fnv1a64(r)).toBe(fnv1a64Reference(r));
  });

  it("writes exactly the documented byte layout", async () => {
    const { path, bytes } = await samplePlan();
    expect(bytes.subarray(0, 8).toString("latin1")).toBe(PLAN_MAGIC);
    expect(bytes.readUInt32LE(Field.version)).toBe(PLAN_VERSION);
    expect(bytes.readUInt32LE(Field.flags)).toBe(0);
    expect(bytes.readBigUInt64LE(Field.headerOffset)).toBe(64n);
    const h = Number(bytes.readBigUInt64LE(Field.headerLength));
    const blob = Number(bytes.readBigUInt64LE(Field.blobOffset));
    const b = Number(bytes.readBigUInt64LE(Field.blobLength));
    expect(blob % 64).toBe(0);
    expect(blob).toBeGreaterThanOrEqual(64 + h);
    expect(Number(bytes.readBigUInt64LE(Field.fileLength))).toBe(bytes.length);
    expect(blob + b).toBe(bytes.length);
    expect(bytes.readBigUInt64LE(Field.headerHash)).toBe(fnv1a64Reference(bytes.subarray(64, 64 + h)));
    expect(bytes.subarray(64 + h, blob).every((x) => x === 0)).toBe(true);
    const plan = readPlan(path);
    expect(plan.header.arena.alignment).toBe(64);
    for (const t of plan.header.tensors) expect(t.offset % 64).toBe(0);
    const gemm = plan.header.ops[0]!;
    expect(gemm.attrs.activation).toBe("relu");
    expect(Array.from(weightData(plan, gemm.inputs[1]!))).toEqual(Array.from({ length: 15 }, (_, i) => i));
    expect(Array.from(weightData(plan, gemm.inputs[2]!))).toEqual([1, 2, 3, 4, 5]);
  });

  it("rejects a wrong magic, a wrong version and a short file", async () => {
    const { bytes } = await samplePlan();
    const m = Buffer.from(bytes);
    m.write("MLRTPLAX", 0, "latin1");
    expectPlanError(m, /^magic$/, '"MLRTPLAX"');
    const v = Buffer.from(bytes);
    v.writeUInt32LE(5, Field.version);
    const e = expectPlanError(v, /^version$/, "5");
    expect(e.expected).toBe("2 to 4");
    // A v1 plan is refused with the way out: recompile it.
    v.writeUInt32LE(1, Field.version);
    expect(expectPlanError(v, /^version$/, "1").expected).toMatch(/^2 to 4 .*recompile/);
    expectPlanError(bytes.subarray(0, 40), /^file length$/);
  });

  it("rejects truncated plans at any point", async () => {
    const { bytes } = await samplePlan();
    const h = Number(bytes.readBigUInt64LE(Field.headerLength));
    expectPlanError(bytes.subarray(0, 64 + Math.floor(h / 2)), /^header length$/);
    expectPlanError(bytes.subarray(0, bytes.length - 1), /^blob length$/);
    const longer = Buffer.concat([bytes, Buffer.alloc(64)]);
    expectPlanError(longer, /^file length$/);
  });

  it("rejects a corrupt header, a misaligned blob and a wrong file length field", async () => {
    const { bytes } = await samplePlan();
    const c = Buffer.from(bytes);
    c[70] = c[70]! ^ 0x5a;
    expectPlanError(c, /^header hash$/);
    const a = Buffer.from(bytes);
    a.writeBigUInt64LE(a.readBigUInt64LE(Field.blobOffset) + 8n, Field.blobOffset);
    expectPlanError(a, /^blob offset$/);
    const f = Buffer.from(bytes);
    f.writeBigUInt64LE(BigInt(bytes.length + 64), Field.fileLength);
    expectPlanError(f, /^file length$/);
  });

  it("rejects a weight outside the blob and an activation outside the arena", async () => {
    const { path } = await samplePlan();
    const plan = readPlan(path);
    const rewrite = (mutate: (h: Built["header"]) => void): Buffer => {
      const header = structuredClone(plan.header);
      mutate(header);
      const { chunks } = serialisePlan({ header, weights: [{ offset: 0, data: Uint8Array.from(plan.blob) }], blobBytes: plan.blob.length });
      return Buffer.concat(chunks);
    };
    expect(() => parsePlan(rewrite(() => {}), "ok")).not.toThrow();
    const w = plan.header.tensors.findIndex((t) => t.kind === "weight");
    expectPlanError(rewrite((h) => (h.tensors[w]!.offset = plan.blob.length)), new RegExp(`^tensors\\[${w}\\].*offset \\+ bytes$`));
    const a = plan.header.tensors.findIndex((t) => t.kind !== "weight");
    expectPlanError(rewrite((h) => (h.tensors[a]!.offset = h.arena.bytesPerSample)), new RegExp(`^tensors\\[${a}\\].*offset \\+ bytes$`));
    expectPlanError(rewrite((h) => (h.ops[0]!.inputs[0] = 999)), /^ops\[0\].*inputs\[0\]$/);
  });

  it("refuses a plan that computes nothing: no op, or an output no op writes (same words as memlane-rt)", async () => {
    const { path } = await samplePlan();
    const plan = readPlan(path);
    const rewrite = (mutate: (h: Built["header"]) => void): Buffer => {
      const header = structuredClone(plan.header);
      mutate(header);
      const { chunks } = serialisePlan({ header, weights: [{ offset: 0, data: Uint8Array.from(plan.blob) }], blobBytes: plan.blob.length });
      return Buffer.concat(chunks);
    };
    const none = expectPlanError(rewrite((h) => (h.ops = [])), /^ops$/, "none (an empty list)");
    expect(none.message).toMatch(/ops: expected at least one op, found none \(an empty list\)$/);
    // The last op (Sigmoid) writes the output: without it, nothing does.
    const y = plan.header.outputs[0]!;
    const e = expectPlanError(rewrite((h) => h.ops.pop()), /^outputs\[0\] \(y\)$/, `tensor ${y}, which nothing writes`);
    expect(e.expected).toBe("a tensor written by an op or a plan input");
    // An output that is a plan input is written (by the caller): accepted.
    expect(() => parsePlan(rewrite((h) => (h.outputs = [...h.outputs, h.inputs[0]!])), "ok")).not.toThrow();
  });
});
