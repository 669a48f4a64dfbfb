import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { decodeMessage, decodeRaw, decodeTensors, encodeEnvelope, encodeMessage, encodeTensors } from "../../src/transport/codec.ts";
import { ErrorCode, PROTOCOL_VERSION, type Task } from "../../src/transport/protocol.ts";

const GOLDEN = join(import.meta.dirname, "..", "fixtures", "golden");
const golden = (f: string): Buffer => readFileSync(join(GOLDEN, f));
const expected = JSON.parse(readFileSync(join(GOLDEN, "expected.json"), "utf8")) as Record<string, Record<string, unknown>>;

describe("golden bytes", () => {
  for (const name of ["hello", "task", "error"]) {
    it(`${name}.msgpack decodes to expected.json and re-encodes byte for byte`, () => {
      const bytes = golden(`${name}.msgpack`);
      expect(decodeRaw(bytes)).toEqual(expected[name]);
      expect(Object.getPrototypeOf(decodeRaw(bytes))).toBe(Object.prototype);
      expect(encodeEnvelope(expected[name]!).equals(bytes)).toBe(true);
    });
  }

  it("task frames decode to the expected tensors (int64 beyond 2^53 exact)", () => {
    const r = decodeMessage([golden("task.msgpack"), golden("task.frame0.bin"), golden("task.frame1.bin")]);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.value.message.type).toBe("task");
    const t = decodeTensors((r.value.message as Task).tensors, r.value.frames);
    const frames = expected.frames as Record<string, unknown[]>;
    expect([...(t.inputs!.data as Float32Array)]).toEqual(frames["task.frame0.bin"]!.map((x) => Math.fround(x as number)));
    expect([...(t.labels!.data as BigInt64Array)].map(String)).toEqual(frames["task.frame1.bin"]);
    expect(t.inputs!.shape).toEqual([2, 3]);
  });
});

describe("envelope encoding", () => {
  it("keeps integers integers on the wire, including beyond 32 bits", () => {
    const bytes = encodeEnvelope({ small: 5, neg: -3, ms: 1_732_000_000_123, float: 0.5 });
    const hex = bytes.toString("hex");
    expect(hex).toContain("d3" + (1_732_000_000_123).toString(16).padStart(16, "0")); // int64
    expect(hex).toContain("cb3fe0000000000000"); // 0.5 as float64
    expect(decodeRaw(bytes)).toEqual({ small: 5, neg: -3, ms: 1_732_000_000_123, float: 0.5 });
  });

  it("decodes int64 beyond 2^53 as bigint, within it as number", () => {
    expect(decodeRaw(encodeEnvelope({ a: 2n ** 53n + 1n, b: 2 ** 53 - 1 }))).toEqual({ a: 2n ** 53n + 1n, b: 2 ** 53 - 1 });
  });

  it("leaves undefined fields out", () => {
    expect(decodeRaw(encodeEnvelope({ a: 1, b: undefined }))).toEqual({ a: 1 });
  });
});

describe("validation", () => {
  const env = (o: object): Buffer => encodeEnvelope(o);
  const base = { v: PROTOCOL_VERSION, id: "x-1" };
  const refusal = (parts: Buffer[]): { code: number; message: string; id?: string } => {
    const r = decodeMessage(parts);
    if (r.ok) throw new Error("expected a refusal");
    return r.error;
  };

  it("refuses an empty message and invalid msgpack", () => {
    expect(refusal([])).toMatchObject({ code: ErrorCode.MALFORMED_MESSAGE, message: "empty message: no envelope frame" });
    expect(refusal([Buffer.from([0xc1])]).message).toMatch(/^envelope is not valid msgpack/);
  });

  it("refuses a non-map envelope, naming what it got", () => {
    expect(refusal([env([1, 2])]).message).toBe("envelope is not a msgpack map (got an array)");
    expect(refusal([env(7 as unknown as object)]).message).toBe("envelope is not a msgpack map (got number)");
  });

  it("refuses missing id, type and v", () => {
    expect(refusal([env({ v: 1, type: "heartbeat" })]).message).toBe("envelope lacks a string `id`");
    expect(refusal([env(base)])).toEqual({ code: ErrorCode.MALFORMED_MESSAGE, message: "envelope lacks `type`", id: "x-1" });
    expect(refusal([env({ id: "a", type: "heartbeat" })]).message).toBe("envelope lacks an integer `v`");
  });

  it("answers an unknown type with UNKNOWN_TYPE", () => {
    expect(refusal([env({ ...base, type: "gossip" })])).toEqual({ code: ErrorCode.UNKNOWN_TYPE, message: 'unknown message type "gossip"', id: "x-1" });
  });

  it("checks tensor refs against the frames", () => {
    const ref = (r: object): Buffer => env({ ...base, type: "result", value: {}, tensors: [{ name: "x", dtype: "float32", shape: [2], frame: 0, ...r }] });
    expect(refusal([ref({ frame: 2 }), Buffer.alloc(8)]).message).toBe('tensor "x": frame index 2 out of range (message has 1 frames)');
    expect(refusal([ref({}), Buffer.alloc(12)]).message).toBe('tensor "x": frame 0 has 12 bytes, expected 8 (shape [2] x float32)');
    expect(refusal([ref({ dtype: "complex64" }), Buffer.alloc(8)]).message).toBe('tensor "x": unknown dtype "complex64"');
    expect(refusal([ref({ shape: [-1] }), Buffer.alloc(8)]).message).toContain("shape must be an array of non-negative integers");
    expect(decodeMessage([ref({}), Buffer.alloc(8)]).ok).toBe(true);
  });

  it("ignores unknown fields", () => {
    expect(decodeMessage([env({ ...base, type: "heartbeat", future: { x: 1 } })]).ok).toBe(true);
  });

  it("checks a phase mark's memory reading: finite counts >= 0, optional ones absent or counts", () => {
    const memory = { rssKiB: 1024, pssKiB: 900, ussKiB: 800, swapKiB: 0, hwmKiB: 1100 };
    const mark = (o: object): Buffer => env({ ...base, type: "phase", name: "import", mark: "end", tMs: 1_732_000_000_123, memory, ...o });
    expect(decodeMessage([mark({})]).ok).toBe(true);
    expect(decodeMessage([mark({ memory: { ...memory, gpuKiB: 0, mallocFreeKiB: 12, mallocInUseKiB: 34 } })]).ok).toBe(true);
    expect(refusal([mark({ memory: { ...memory, rssKiB: Number.NaN } })])).toEqual({
      code: ErrorCode.MALFORMED_MESSAGE, id: "x-1", message: 'phase mark "import": memory.rssKiB must be a finite number >= 0, got NaN',
    });
    expect(refusal([mark({ memory: { ...memory, ussKiB: -5 } })]).message).toBe('phase mark "import": memory.ussKiB must be a finite number >= 0, got -5');
    expect(refusal([mark({ memory: { ...memory, hwmKiB: "1100" } })]).message).toMatch(/memory\.hwmKiB must be a finite number >= 0, got "1100"/);
    const { swapKiB: _, ...noSwap } = memory;
    expect(refusal([mark({ memory: noSwap })]).message).toMatch(/memory\.swapKiB must be a finite number >= 0, got nothing/);
    expect(refusal([mark({ memory: { ...memory, mallocFreeKiB: -1 } })]).message).toMatch(/memory\.mallocFreeKiB must be absent or a finite number >= 0, got -1/);
    expect(refusal([mark({ memory: { ...memory, gpuKiB: null } })]).message).toMatch(/memory\.gpuKiB must be absent/);
    expect(refusal([mark({ memory: [1, 2] })]).message).toBe('phase mark "import": `memory` must be a map');
    expect(refusal([mark({ mark: "middle" })]).message).toBe('phase mark "import": `mark` must be "start" or "end"');
    expect(refusal([mark({ name: "" })]).message).toMatch(/`name` must be a string of 1 to 128 characters/);
    expect(refusal([mark({ name: "x".repeat(129) })]).message).toMatch(/`name` must be a string/);
    expect(refusal([mark({ tMs: "now" })]).message).toBe('phase mark "import": `tMs` must be a finite number');
  });
});

describe("tensors", () => {
  it("round-trips every dtype through refs and frames", () => {
    const tensors = {
      f: { dtype: "float32" as const, shape: [2, 2], data: new Float32Array([1, 2, 3, 4]) },
      h: { dtype: "float16" as const, shape: [3], data: new Uint16Array([0x3c00, 0, 0xbc00]) },
      l: { dtype: "int64" as const, shape: [2], data: new BigInt64Array([-1n, 2n ** 62n]) },
      i: { dtype: "int32" as const, shape: [1], data: new Int32Array([-7]) },
      u: { dtype: "uint8" as const, shape: [2], data: new Uint8Array([0, 255]) },
      b: { dtype: "bool" as const, shape: [2], data: new Uint8Array([1, 0]) },
    };
    const { refs, frames } = encodeTensors(tensors);
    expect(refs.map((r) => r.frame)).toEqual([0, 1, 2, 3, 4, 5]);
    const parts = encodeMessage({ ...{ v: 1, id: "t", type: "result", value: {} }, tensors: refs }, frames) as Buffer[];
    const r = decodeMessage(parts.map((p) => Buffer.from(p)));
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    const back = decodeTensors(refs, r.value.frames);
    for (const [k, t] of Object.entries(tensors)) expect(back[k]).toEqual(t);
  });

  it("views aligned frames without copying and copies misaligned ones", () => {
    const aligned = Buffer.from(new Float32Array([1, 2]).buffer);
    const ref = [{ name: "x", dtype: "float32" as const, shape: [2], frame: 0 }];
    expect(decodeTensors(ref, [aligned]).x!.data.buffer).toBe(aligned.buffer);
    const backing = Buffer.alloc(9);
    Buffer.from(new Float32Array([1, 2]).buffer).copy(backing, 1);
    const misaligned = backing.subarray(1);
    const t = decodeTensors(ref, [misaligned]).x!;
    expect(t.data.buffer).not.toBe(backing.buffer);
    expect([...(t.data as Float32Array)]).toEqual([1, 2]);
  });

  it("encodes frames as views of the typed arrays (no copy)", () => {
    const data = new Float32Array(4);
    const { frames } = encodeTensors({ x: { dtype: "float32", shape: [4], data } });
    expect(frames[0]!.buffer).toBe(data.buffer);
  });

  it("refuses data whose size does not match its shape", () => {
    expect(() => encodeTensors({ x: { dtype: "float32", shape: [3], data: new Float32Array(2) } })).toThrow(
      'tensor "x": data has 8 bytes, expected 12 (shape [3] x float32)',
    );
  });
});
