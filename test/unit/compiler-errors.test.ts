import { spawnSync } from "node:child_process";
import { readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { CompileError, compileOnnx, readPlan, weightData } from "../../src/compiler/index.ts";
import { compile } from "./compiler-compile-helper.ts";
import { type ModelSpec, init, modelBytes, node, tempDir, writeModel } from "./compiler-onnx-builder.ts";

describe("compiler: errors", () => {
  it("refuses an unsupported op naming op type, node and the supported list, and writes nothing", async () => {
    const dir = tempDir();
    const p = writeModel({ inputs: [["x", ["N", 4]]], outputs: ["y"], nodes: [node("Relu", ["x"], ["r"]), node("Foo", ["r"], ["y"], {}, "my_foo")] }, "foo", dir);
    const err = await compileOnnx(p, join(dir, "foo.mlplan")).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CompileError);
    const e = err as CompileError;
    expect(e.message).toMatch(/op Foo \(node "my_foo"\)/);
    expect(e.message).toMatch(/Conv, Gemm, MatMul/);
    expect(e.kind).toBe("unsupported-op");
    expect(e.details).toMatchObject({ opType: "Foo", node: "my_foo" });
    expect(readdirSync(dir)).toEqual(["foo.onnx"]);
  });

  it("lists every unsupported op type at once, with its count and first node", async () => {
    const err = await compile({
      inputs: [["x", ["N", 4]]], outputs: ["y"],
      nodes: [node("Foo", ["x"], ["a"], {}, "foo1"), node("Bar", ["a"], ["b"], {}, "bar1"), node("Foo", ["b"], ["y"], {}, "foo2")],
    }).then(() => undefined, (e: unknown) => e as CompileError);
    if (!err) throw new Error("compiled a model with unsupported ops");
    expect(err.message).toMatch(/2 ops memlane-rt cannot run — not supported: Foo \(2 nodes, first "foo1"\), Bar \(node "bar1"\)/);
    expect(err.details).toMatchObject({ opType: "Foo", node: "foo1", ops: [{ opType: "Foo", count: 2, node: "foo1" }, { opType: "Bar", count: 1, node: "bar1" }] });
  });

  it("refuses a run-time op that can only be folded (Floor on an activation)", async () => {
    const err = await compile({ inputs: [["x", ["N", 4]]], outputs: ["y"], nodes: [node("Floor", ["x"], ["y"], {}, "floor1")] }).catch((e: unknown) => e);
    expect((err as Error).message).toMatch(/op Floor \(node "floor1"\).*only be folded/);
  });

  // An If the batch decides (Equal(batch, 1)) folds to one branch for the symbolic batch and
  // another for a batch of one: it is refused, not inlined (infer.ts batchDecides); one on a
  // run-time value is refused as well.
  it("refuses an If whose condition the batch or the data decides", async () => {
    const branches = {
      then_branch: { graph: { nodes: [node("Identity", ["x"], ["a"])], outputs: ["a"] } },
      else_branch: { graph: { nodes: [node("Relu", ["x"], ["b"])], outputs: ["b"] } },
    };
    const onBatch = await compile({
      inputs: [["x", ["N", 4]]], outputs: ["y"], inits: [init("zero", [], [0], "int64"), init("one", [], [1], "int64")],
      nodes: [node("Shape", ["x"], ["s"]), node("Gather", ["s", "zero"], ["b"], { axis: 0 }), node("Equal", ["b", "one"], ["c"]), node("If", ["c"], ["y"], branches, "if_batch")],
    }).catch((e: unknown) => e);
    expect((onBatch as Error).message).toMatch(/op If \(node "if_batch"\)/);
    const onData = await compile({
      inputs: [["x", ["N", 4]]], outputs: ["y"], inits: [init("zero", [1], [0])],
      nodes: [node("ReduceSum", ["x"], ["r"], { keepdims: 0 }), node("Greater", ["r", "zero"], ["c"]), node("If", ["c"], ["y"], branches, "if_data")],
    }).catch((e: unknown) => e);
    expect((onData as Error).message).toMatch(/op If \(node "if_data"\) computes on run-time data/);
  });

  it("names the file of a corrupt or truncated ONNX model", async () => {
    const dir = tempDir();
    const junk = join(dir, "junk.onnx");
    writeFileSync(junk, Buffer.from("this is not a protobuf at all, not even close \xff\xff\xff"));
    await expect(compileOnnx(junk, join(dir, "j.mlplan"))).rejects.toThrow(/junk\.onnx: not a valid ONNX model/);
    const good = modelBytes({ inputs: [["x", ["N", 4]]], outputs: ["y"], inits: [init("w", [4, 4])], nodes: [node("MatMul", ["x", "w"], ["y"])] });
    const cut = join(dir, "cut.onnx");
    writeFileSync(cut, good.subarray(0, Math.floor(good.length * 0.6)));
    await expect(compileOnnx(cut, join(dir, "c.mlplan"))).rejects.toThrow(/cut\.onnx/);
    await expect(compileOnnx(join(dir, "missing.onnx"), join(dir, "m.mlplan"))).rejects.toThrow(/missing\.onnx: cannot read/);
    expect(readdirSync(dir).sort()).toEqual(["cut.onnx", "junk.onnx"]);
  });

  it("reads external data relative to the model, and refuses a missing file or a path that leaves its directory", async () => {
    const dir = tempDir();
    writeFileSync(join(dir, "w.bin"), Buffer.concat([Buffer.alloc(8), Buffer.from(new Float32Array([1, 2, 3, 4]).buffer)]));
    const spec = (location: string): ModelSpec => ({
      inputs: [["x", ["N", 2]]], outputs: ["y"],
      inits: [{ name: "w", dims: [2, 2], external: { location, offset: 8, length: 16 } }],
      nodes: [node("MatMul", ["x", "w"], ["y"])],
    });
    const ok = writeModel(spec("w.bin"), "ext", dir);
    await compileOnnx(ok, join(dir, "ext.mlplan"));
    const plan = readPlan(join(dir, "ext.mlplan"));
    expect(Array.from(weightData(plan, plan.header.ops[0]!.inputs[1]!))).toEqual([1, 2, 3, 4]);
    await expect(compileOnnx(writeModel(spec("nope.bin"), "missing", dir), join(dir, "x.mlplan"))).rejects.toThrow(/missing\.onnx: tensor "w" external data file .*nope\.bin cannot be read/);
    await expect(compileOnnx(writeModel(spec("../w.bin"), "escape", dir), join(dir, "x.mlplan"))).rejects.toThrow(/leaves the model directory/);
  });

  it("the standalone CLI compiles and inspects, and exits 1 with the error on an unsupported op", () => {
    const dir = tempDir();
    const good = writeModel({ inputs: [["x", ["N", 4]]], outputs: ["y"], nodes: [node("Relu", ["x"], ["y"])] }, "good", dir);
    const cli = join(process.cwd(), "src/compiler/cli.ts");
    const run = (...args: string[]) => spawnSync(process.execPath, ["--import", "tsx", cli, ...args], { encoding: "utf8" });
    const r = run(good, join(dir, "good.mlplan"));
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/good\.mlplan: 1 ops/);
    expect(run("inspect", join(dir, "good.mlplan")).stdout).toMatch(/0 Relu +x\[batch,4\] -> y\[batch,4\]/);
    const bad = writeModel({ inputs: [["x", ["N", 4]]], outputs: ["y"], nodes: [node("Foo", ["x"], ["y"], {}, "f")] }, "bad", dir);
    const b = run(bad, join(dir, "bad.mlplan"));
    expect(b.status).toBe(1);
    expect(b.stderr).toMatch(/op Foo \(node "f"\) is not supported/);
  });

  it("validates options, naming the option", async () => {
    const p = writeModel({ inputs: [["x", ["N", 4]]], outputs: ["y"], nodes: [node("Relu", ["x"], ["y"])] });
    await expect(compileOnnx(p, `${p}.plan`, { verify: "yes" as unknown as boolean })).rejects.toThrow(/options\.verify: expected a boolean/);
    await expect(compileOnnx(p, `${p}.plan`, { nope: 1 } as never)).rejects.toThrow(/options\.nope: unknown option/);
  });

  it("reads typed float_data and int64 initializers as well as raw_data", async () => {
    const { h, plan } = await compile({
      inputs: [["x", ["N", 2]]], outputs: ["y"],
      inits: [init("w", [2, 2], [1, 2, 3, 4], "float-typed"), init("shape", [2], [0, -1], "int64")],
      nodes: [node("MatMul", ["x", "w"], ["m"]), node("Reshape", ["m", "shape"], ["y"])],
    });
    expect(Array.from(weightData(plan, h.ops[0]!.inputs[1]!))).toEqual([1, 2, 3, 4]);
    expect(h.ops[1]!.attrs.shape).toEqual([-1, 2]);
  });
});
