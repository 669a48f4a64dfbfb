import { existsSync, readdirSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { decodeTensors, type Tensor } from "../../src/transport/codec.ts";
import {
  DEFAULT_SHM_THRESHOLD, decodeTensorsShm, encodeTensorsShm, parseSegmentName, segmentName, shmBackend, ShmRegistry,
} from "../../src/transport/shm.ts";
import { NO_ADDON, shmAddon } from "../integration/shm-addon.ts";

const haveShm = existsSync("/dev/shm");
const addon = haveShm ? shmAddon() : null;
const runId = (tag: string) => `unit-${tag}-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
const ours = (id: string) => readdirSync("/dev/shm").filter((n) => n.includes(id));

function tensors(): Record<string, Tensor> {
  const big = new Float32Array((2 * DEFAULT_SHM_THRESHOLD) / 4 + 3);
  for (let i = 0; i < big.length; i++) big[i] = Math.sin(i) * 1000;
  const ids = new BigInt64Array([1n, -2n, 2n ** 53n + 1n]);
  const mask = new Uint8Array(DEFAULT_SHM_THRESHOLD + 1).fill(7);
  return {
    big: { dtype: "float32", shape: [big.length], data: big },
    ids: { dtype: "int64", shape: [3], data: ids },
    mask: { dtype: "uint8", shape: [1, DEFAULT_SHM_THRESHOLD + 1], data: mask },
  };
}

describe("segment names", () => {
  it("carry the orchestrator pid and the run id, and parse back", () => {
    expect(segmentName(123, "20261121-190000-digits", 4)).toBe("memlane-123-20261121-190000-digits-4");
    expect(parseSegmentName("memlane-123-20261121-190000-digits-4")).toEqual({ pid: 123, runId: "20261121-190000-digits", n: 4 });
    expect(segmentName(1, "a/b c", 0)).toBe("memlane-1-a_b_c-0");
    expect(parseSegmentName("other-123-x-1")).toBeNull();
  });

  it("refuses bad registry options with the option's name", () => {
    expect(() => new ShmRegistry({ runId: "" })).toThrow(/`runId`: expected a non-empty string/);
    expect(() => new ShmRegistry({ runId: "x", thresholdBytes: -1 })).toThrow(/`thresholdBytes`/);
  });
});

const backends = [
  ["addon", addon?.path ?? "unavailable"],
  ["file fallback", NO_ADDON],
] as const;

describe.skipIf(!haveShm).each(backends)("shm tensors (%s)", (kind, addonPath) => {
  const usable = kind === "file fallback" || addon !== null;
  const path = kind === "addon" ? addon?.path : NO_ADDON;

  it.skipIf(!usable)("uses the backend it was asked for", () => {
    expect(shmBackend(path).kind).toBe(kind === "addon" ? "addon" : "file");
    void addonPath;
  });

  it.skipIf(!usable)("puts tensors over the threshold in one aligned segment, the rest in frames, and reads them back", () => {
    const id = runId(kind.replace(" ", ""));
    const reg = new ShmRegistry({ runId: id, addonPath: path, exitHooks: false, sweep: false });
    const input = tensors();
    const { refs, frames, segment } = encodeTensorsShm(input, reg, 0, { mapped: kind === "addon" });
    expect(segment).not.toBeNull();
    expect(segment!.bytes === null).toBe(kind !== "addon");
    expect(refs.map((r) => [r.name, r.frame ?? null, r.shm?.offset ?? null])).toEqual([
      ["big", null, 0],
      ["ids", 0, null],
      ["mask", null, Math.ceil((input.big!.data.byteLength) / 64) * 64],
    ]);
    expect(refs[0]!.shm!.segment).toBe(segmentName(process.pid, id, 0));
    expect(frames).toHaveLength(1);
    const out = decodeTensorsShm(refs, frames, path);
    const got = Buffer.from(out.big!.data.buffer, out.big!.data.byteOffset, out.big!.data.byteLength);
    expect(got.equals(Buffer.from(input.big!.data.buffer))).toBe(true);
    expect([...(out.ids!.data as BigInt64Array)]).toEqual([1n, -2n, 2n ** 53n + 1n]);
    expect(out.mask!.shape).toEqual([1, DEFAULT_SHM_THRESHOLD + 1]);
    expect(Buffer.from(out.mask!.data as Uint8Array).equals(Buffer.from(input.mask!.data as Uint8Array))).toBe(true);
    expect(ours(id)).toEqual([segment!.name]);
    reg.close();
    expect(ours(id)).toEqual([]);
    // A view made before the unlink stays readable: the mapping outlives the name.
    expect((out.big!.data as Float32Array)[1]).toBeCloseTo(Math.sin(1) * 1000, 3);
  });

  it.skipIf(!usable)("codec.decodeTensors resolves shm refs through the hook shm.ts registers", () => {
    const reg = new ShmRegistry({ runId: runId("hook"), addonPath: path, exitHooks: false, sweep: false });
    const { refs, frames } = encodeTensorsShm(tensors(), reg);
    const out = decodeTensors(refs, frames);
    expect(Object.keys(out).sort()).toEqual(["big", "ids", "mask"]);
    expect((out.big!.data as Float32Array)[2]).toBeCloseTo(Math.sin(2) * 1000, 3);
    reg.close();
  });

  it.skipIf(!usable)("sends everything as frames when nothing reaches the threshold", () => {
    const reg = new ShmRegistry({ runId: runId("small"), addonPath: path, exitHooks: false, sweep: false });
    const { refs, frames, segment } = encodeTensorsShm({ x: { dtype: "int32", shape: [2], data: new Int32Array([1, 2]) } }, reg);
    expect(segment).toBeNull();
    expect(refs[0]!.frame).toBe(0);
    expect(frames).toHaveLength(1);
    reg.close();
  });

  it.skipIf(!usable)("release() unlinks one segment early; close() is idempotent and refuses new segments", () => {
    const id = runId("rel");
    const reg = new ShmRegistry({ runId: id, addonPath: path, thresholdBytes: 0, exitHooks: false, sweep: false });
    const a = reg.allocate(100, { mapped: true });
    const view = a.bytes;
    reg.allocate(0);
    expect(ours(id).sort()).toEqual([a.name, segmentName(process.pid, id, 1)].sort());
    expect(a.bytes === null).toBe(kind !== "addon");
    reg.release(a.name);
    expect(ours(id)).toEqual([segmentName(process.pid, id, 1)]);
    // The producer's mapping is freed at once (addon): its old views read as empty, not freed memory.
    if (kind === "addon") expect(view!.byteLength).toBe(0);
    expect(a.bytes).toBeNull();
    expect(reg.allocate(8).bytes).toBeNull(); // unmapped by default: filled with write()
    reg.close();
    reg.close();
    expect(ours(id)).toEqual([]);
    expect(() => reg.allocate(1)).toThrow(/closed/);
  });

  it.skipIf(!usable)("sends a tensor produced in its own segment where it lies, without a copy, as often as asked", () => {
    const id = runId("inplace");
    const reg = new ShmRegistry({ runId: id, addonPath: path, exitHooks: false, sweep: false });
    if (kind !== "addon") {
      expect(() => reg.allocateTensor("float32", [4])).toThrow(/needs the addon/);
      expect(ours(id)).toEqual([]);
      reg.close();
      return;
    }
    const { tensor, segment } = reg.allocateTensor("float32", [2, 3]);
    (tensor.data as Float32Array).set([1, 2, 3, 4, 5, 6]); // the producer fills it in place
    const small = { dtype: "int32" as const, shape: [1], data: new Int32Array([9]) };
    for (let i = 0; i < 2; i++) {
      const enc = encodeTensorsShm({ x: tensor, s: small }, reg);
      expect(enc.segment).toBeNull(); // nothing copied, no new segment
      expect(enc.refs[0]!.shm).toEqual({ segment: segment.name, offset: 0, length: 24 });
      expect(enc.frames).toHaveLength(1);
      expect([...(decodeTensorsShm(enc.refs, enc.frames, path).x!.data as Float32Array)]).toEqual([1, 2, 3, 4, 5, 6]);
    }
    expect(ours(id)).toEqual([segment.name]);
    reg.release(segment.name);
    expect(reg.segmentOf(tensor.data)).toBeUndefined();
    expect(() => encodeTensorsShm({ x: tensor }, reg)).toThrow(/data has 0 bytes/); // released: never a dangling ref
    reg.close();
  });

  it.skipIf(!usable)("names a missing segment and a bad length", () => {
    expect(() => decodeTensorsShm([{ name: "t", dtype: "float32", shape: [4], shm: { segment: "memlane-1-nope-0", offset: 0, length: 16 } }], [], path))
      .toThrow(/opening shared memory segment memlane-1-nope-0 failed/);
    const reg = new ShmRegistry({ runId: runId("len"), addonPath: path, thresholdBytes: 0, exitHooks: false, sweep: false });
    const seg = reg.allocate(16);
    expect(() => decodeTensorsShm([{ name: "t", dtype: "float32", shape: [5], shm: { segment: seg.name, offset: 0, length: 16 } }], [], path))
      .toThrow(/shm length 16 bytes, expected 20/);
    expect(() => decodeTensorsShm([{ name: "t", dtype: "float32", shape: [4], shm: { segment: seg.name, offset: 8, length: 16 } }], [], path))
      .toThrow(/outside segment/);
    reg.close();
  });
});
