/**
 * Plan v3 shape profiles (docs/plan-format.md, "Profiles"): one plan, several shapes, the
 * weights stored once; the profile table's layout, a v2 plan still read, and a corrupt table
 * refused naming the field and its byte offset.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { PlanError, compileOnnx, formatPlan, parsePlan, readPlan, weightData } from "../../src/compiler/index.ts";
import { Field, PLAN_VERSION, PLAN_VERSION_SINGLE, PROFILE_TABLE, fnv1a64 } from "../../src/compiler/plan-format.ts";
import { encodeHeader, serialisePlan } from "../../src/compiler/write.ts";
import { readOnnxIo } from "../../src/pipeline/inputs/onnx-io.ts";
import { profileShapes } from "../../src/pipeline/inputs/profiles.ts";
import { execute } from "../../src/cli/commands/compile.ts";
import type { Io } from "../../src/cli/io.ts";
import { init, node, tempDir, writeModel } from "./compiler-onnx-builder.ts";

/** x [N, S, 4] + positions(S) -> MatMul w [4, 8] + b: w and b are the same in every profile, the positions are not. */
function positionsModel(dir: string): string {
  return writeModel({
    inputs: [["x", ["N", "S", 4]]], outputs: ["y"],
    inits: [init("w", [4, 8]), init("b", [8]), init("one", [1], [1], "int64"), init("zero", [], [0], "int64"), init("step", [], [1], "int64"), init("ax", [1], [1], "int64")],
    nodes: [
      node("Shape", ["x"], ["shp"]), node("Gather", ["shp", "one"], ["s1"], { axis: 0 }), node("Squeeze", ["s1"], ["s"]),
      node("Range", ["zero", "s", "step"], ["r"]), node("Cast", ["r"], ["rf"], { to: 1 }), node("Unsqueeze", ["rf", "ax"], ["pos"]),
      node("Add", ["x", "pos"], ["xp"]), node("MatMul", ["xp", "w"], ["m"]), node("Add", ["m", "b"], ["y"]),
    ],
  }, "pos", dir);
}

const SEQS = [2, 3, 5];

async function threeProfiles(): Promise<{ path: string; bytes: Buffer; onnx: string; dir: string }> {
  const dir = tempDir();
  const onnx = positionsModel(dir);
  const path = join(dir, "pos.mlplan");
  await compileOnnx(onnx, path, { profiles: SEQS.map((s) => ({ x: [-1, s, 4] })) });
  return { path, bytes: readFileSync(path), onnx, dir };
}

function planError(buf: Buffer): PlanError {
  try {
    parsePlan(buf, "t.mlplan");
  } catch (e) {
    expect(e).toBeInstanceOf(PlanError);
    return e as PlanError;
  }
  throw new Error("the plan was accepted");
}

/** The file with its header region rewritten by `mutate` and the header hash made right again. */
function withHeader(bytes: Buffer, mutate: (region: Buffer) => void): Buffer {
  const b = Buffer.from(bytes);
  const h = Number(b.readBigUInt64LE(Field.headerLength));
  mutate(b.subarray(64, 64 + h));
  b.writeBigUInt64LE(fnv1a64(b.subarray(64, 64 + h)), Field.headerHash);
  return b;
}

describe("plan v3: shape profiles", () => {
  it("compiles one profile per shape and stores the weights they share once", async () => {
    const dir = tempDir();
    const onnx = positionsModel(dir);
    const s = await compileOnnx(onnx, join(dir, "p.mlplan"), { profiles: SEQS.map((q) => ({ x: [-1, q, 4] })) });
    expect(s.profiles.map((p) => p.inputs[0]!.shape)).toEqual(SEQS.map((q) => [-1, q, 4]));
    expect(s.profiles.map((p) => p.outputs[0]!.shape)).toEqual(SEQS.map((q) => [-1, q, 8]));
    // Each profile's arena follows its shapes.
    expect(s.profiles[2]!.arenaBytesPerSample).toBeGreaterThan(s.profiles[0]!.arenaBytesPerSample);
    const plan = readPlan(join(dir, "p.mlplan"));
    expect(plan.version).toBe(PLAN_VERSION);
    expect(plan.profiles).toHaveLength(3);
    const weightsOf = (p: number) => Object.fromEntries(plan.profiles[p]!.tensors.flatMap((t, id) => (t.kind === "weight" ? [[t.name, { id, t }]] : [])));
    const w = [0, 1, 2].map(weightsOf);
    // w and b: one offset for all three profiles; the folded positions: one each, of its length.
    for (const name of ["w", "b"]) expect(new Set(w.map((m) => m[name]!.t.offset)).size).toBe(1);
    const pos = w.map((m) => Object.values(m).find((x) => x.t.shape.length === 2 && x.t.shape[1] === 1)!);
    expect(pos.map((p) => p.t.shape[0])).toEqual(SEQS);
    expect(new Set(pos.map((p) => p.t.offset)).size).toBe(3);
    expect(Array.from(weightData(plan, pos[2]!.id, 2))).toEqual([0, 1, 2, 3, 4]);
    // The blob: positions 8 B, w 128 B, b 32 B, positions 12 and 20 B, each in 64-byte slots:
    // one copy of w and b, not three.
    expect(plan.blob.length).toBe(64 + 128 + 64 + 64 + 64);
    expect(s.weightsBytes).toBe(128 + 32 + 8 + 12 + 20);
    expect(s.profiles.map((p) => p.weightsBytes)).toEqual([168, 172, 180]);
    const listing = formatPlan(plan);
    expect(listing).toMatch(/^plan v4, 3 shape profiles sharing 200 B of weights/);
    expect(listing).toMatch(/profile 2:\n {2}plan pos\.onnx .*\n {4}inputs: {2}x\[batch,5,4\]/);
  });

  it("writes the documented profile table: count, reserved, {offset, length} from the file start", async () => {
    const { bytes } = await threeProfiles();
    expect(bytes.readUInt32LE(Field.version)).toBe(PLAN_VERSION);
    const region = bytes.subarray(64, 64 + Number(bytes.readBigUInt64LE(Field.headerLength)));
    expect(region.readUInt32LE(PROFILE_TABLE.count)).toBe(3);
    expect(region.readUInt32LE(PROFILE_TABLE.reserved)).toBe(0);
    let end = 64 + PROFILE_TABLE.entries + 3 * PROFILE_TABLE.entryBytes;
    for (let i = 0; i < 3; i++) {
      const off = Number(region.readBigUInt64LE(PROFILE_TABLE.entries + 16 * i)), len = Number(region.readBigUInt64LE(PROFILE_TABLE.entries + 16 * i + 8));
      expect(off).toBe(end); // back to back after the table
      end = off + len;
    }
    expect(end).toBe(64 + region.length);
  });

  it("still reads a version 2 plan (one msgpack header, no table)", async () => {
    const { path } = await threeProfiles();
    const plan = readPlan(path);
    // A v2 file: the preamble, the bare msgpack map of one profile, the blob.
    const header = Buffer.from(encodeHeader(plan.profiles[0]!));
    const blobOffset = Math.ceil((64 + header.length) / 64) * 64;
    const v2 = Buffer.alloc(blobOffset + plan.blob.length);
    readFileSync(path).copy(v2, 0, 0, 64);
    v2.writeUInt32LE(PLAN_VERSION_SINGLE, Field.version);
    v2.writeBigUInt64LE(BigInt(header.length), Field.headerLength);
    v2.writeBigUInt64LE(BigInt(blobOffset), Field.blobOffset);
    v2.writeBigUInt64LE(BigInt(blobOffset + plan.blob.length), Field.fileLength);
    v2.writeBigUInt64LE(fnv1a64(header), Field.headerHash);
    header.copy(v2, 64);
    Buffer.from(plan.blob).copy(v2, blobOffset);
    const read = parsePlan(v2, "v2.mlplan");
    expect(read.version).toBe(2);
    expect(read.profiles).toHaveLength(1);
    expect(read.header.inputs.map((id) => read.header.tensors[id]!.shape)).toEqual([[-1, 2, 4]]);
  });

  it("refuses a corrupt profile table naming the field and its byte offset", async () => {
    const { bytes } = await threeProfiles();
    let e = planError(withHeader(bytes, (r) => r.writeUInt32LE(0, 0)));
    expect(e.field).toBe("profiles.count (profile table, byte 64)");
    expect(e.found).toBe("0");
    e = planError(withHeader(bytes, (r) => r.writeUInt32LE(1000, 0)));
    expect(e.field).toBe("profiles.count (profile table, byte 64)");
    e = planError(withHeader(bytes, (r) => r.writeUInt32LE(7, 4)));
    expect(e.field).toBe("profiles.reserved (profile table, byte 68)");
    // Entry 1's offset (byte 64 + 8 + 16) pointing back into entry 0's header.
    e = planError(withHeader(bytes, (r) => r.writeBigUInt64LE(r.readBigUInt64LE(8), 24)));
    expect(e.field).toBe("profiles[1].offset (profile table, byte 88)");
    expect(e.expected).toMatch(/after the table and the previous profile, inside the header/);
    // Entry 2's length past the header's end.
    e = planError(withHeader(bytes, (r) => r.writeBigUInt64LE(r.readBigUInt64LE(48) + 1n, 48)));
    expect(e.field).toBe("profiles[2].length (profile table, byte 112)");
    // Without the hash fixed, any flipped byte is a header hash error first.
    const raw = Buffer.from(bytes);
    raw[64] = 9;
    expect(planError(raw).field).toBe("header hash");
  });

  it("names the profile of a bad header, and refuses profiles that disagree or repeat shapes", async () => {
    const { path } = await threeProfiles();
    const plan = readPlan(path);
    const rewrite = (mutate: (ps: typeof plan.profiles) => void): Buffer => {
      const profiles = structuredClone(plan.profiles);
      mutate(profiles);
      return Buffer.concat(serialisePlan({ profiles, weights: [{ offset: 0, data: Uint8Array.from(plan.blob) }], blobBytes: plan.blob.length }).chunks);
    };
    expect(() => parsePlan(rewrite(() => {}), "ok")).not.toThrow();
    expect(planError(rewrite((ps) => (ps[1]!.ops = []))).field).toBe("profiles[1].ops");
    const x = plan.profiles[2]!.inputs[0]!;
    expect(planError(rewrite((ps) => (ps[2]!.tensors[x]!.name = "z"))).field).toBe("profiles[2].inputs[0]");
    const same = planError(rewrite((ps) => (ps[2] = structuredClone(ps[0]!))));
    // The words of memlane-rt's reader (plan_profiles_test.cc checks the same message).
    expect(same.message).toMatch(/profiles\[2\]\.inputs: expected shapes no other profile has, found those of profiles\[0\]$/);
  });

  it("refuses options that cannot make a plan, naming them", async () => {
    const { onnx, dir } = await threeProfiles();
    const out = join(dir, "bad.mlplan");
    await expect(compileOnnx(onnx, out, { profiles: [{ x: [-1, 2, 4] }, { x: [-1, 2, 4] }] })).rejects.toThrow(/options\.profiles\[1\] gives the inputs the same shapes as options\.profiles\[0\]/);
    await expect(compileOnnx(onnx, out, { profiles: [] })).rejects.toThrow(/options\.profiles: expected a list of 1\.\.64/);
    await expect(compileOnnx(onnx, out, { profiles: [{ x: [-1, 2, 4] }], inputShapes: { x: [-1, 2, 4] } })).rejects.toThrow(/not with options\.profiles/);
    await expect(compileOnnx(onnx, out, { profiles: [{ x: [-1, 2, 4] }, { x: [-1, 3, 5] }] })).rejects.toThrow(/inputShapes\["x"\]: dimension 2 is fixed to 4/);
  });

  it("--seq values and --profile flags become one inputShapes map a profile", async () => {
    const { onnx } = await threeProfiles();
    const io = readOnnxIo(onnx);
    expect(profileShapes(io, { seqs: [16, 64, 128] })).toEqual([{ x: [-1, 16, 4] }, { x: [-1, 64, 4] }, { x: [-1, 128, 4] }]);
    expect(profileShapes(io, { profiles: [{ x: ["N", 7, 4] }, { x: [1, 9, 4] }] })).toEqual([{ x: [-1, 7, 4] }, { x: [-1, 9, 4] }]);
    expect(profileShapes(io, { shapes: { x: ["N", 7, 4] } })).toEqual([{ x: [-1, 7, 4] }]);
    expect(profileShapes(io, {})).toEqual([]);
    expect(() => profileShapes(io, { profiles: [{ x: ["N", 7, 4] }], shapes: { x: ["N", 7, 4] } })).toThrow(/--shape: not with --profile/);
    expect(() => profileShapes(io, { profiles: [{ x: ["N", 7, 4] }], seqs: [1, 2] })).toThrow(/--seq: one value with --profile/);
    expect(() => profileShapes(io, { profiles: [{ x: ["N", 7, 5] }] })).toThrow(/^--profile #1: input "x" dim 2 is fixed at 4/);
  });

  it("memlane compile --profile, given once per profile, writes them all into one plan", async () => {
    const { onnx, dir } = await threeProfiles();
    const lines: string[] = [];
    const io: Io = { out: (l) => lines.push(l), err: (l) => lines.push(l), isTTY: false, redraw: () => {}, columns: 100 };
    const out = join(dir, "cli.mlplan");
    expect(await execute([onnx, "-o", out, "--profile", "x=Nx7x4", "--profile", "x=1x9x4"], io)).toBe(0);
    expect(lines).toContain("profile 0: x [N, 7, 4] → y [N, 7, 8]");
    expect(lines).toContain("profile 1: x [N, 9, 4] → y [N, 9, 8]");
    expect(readPlan(out).profiles.map((h) => h.tensors[h.inputs[0]!]!.shape)).toEqual([[-1, 7, 4], [-1, 9, 4]]);
    // One --shape: a one-profile plan, printed as before.
    lines.length = 0;
    expect(await execute([onnx, "-o", out, "--shape", "x=Nx7x4"], io)).toBe(0);
    expect(lines).toContain("inputs: x [N, 7, 4]");
    await expect(execute([onnx, "-o", out, "--profile", "x=Nx7x4", "--shape", "x=Nx7x4"], io)).rejects.toThrow(/--shape: not with --profile/);
    await expect(execute([onnx, "-o", out, "--profile", "x=Nx7"], io)).rejects.toThrow(/^--profile #1: input "x" has rank 3 \[N, S, 4\], received 2 dims \[Nx7\]$/);
  });
});
