// The tensor file a node-ort child hands its outputs back through (src/workers/tensor-file.mjs):
// arrays of every element type come back equal, at aligned offsets, and a ref outside the file
// or of an unknown type is refused by name.
import { mkdtempSync, rmSync, truncateSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { readTensorsSync, writeTensorsSync } from "../../src/workers/tensor-file.mjs";

const dir = mkdtempSync(join(tmpdir(), "memlane-tensor-file-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("tensor files", () => {
  it("reads back what it wrote, every array at a 64-byte offset", () => {
    const arrays = [Float32Array.from([1.5, -2, 3]), BigInt64Array.from([5n, -7n]), Uint8Array.from([1, 2, 3, 4, 5]), new Int32Array(0), Uint16Array.from([65535])];
    const file = join(dir, "a.bin");
    const refs = writeTensorsSync(file, arrays);
    expect(refs.map((r) => r.offset % 64)).toEqual([0, 0, 0, 0, 0]);
    expect(refs.map((r) => r.type)).toEqual(["Float32Array", "BigInt64Array", "Uint8Array", "Int32Array", "Uint16Array"]);
    const back = readTensorsSync(file, refs);
    back.forEach((b, k) => expect(b).toEqual(arrays[k]));
    // Each one its own array, not a view of one buffer.
    expect(new Set(back.map((b) => b.buffer)).size).toBe(back.length);
  });

  it("refuses to overwrite a file, a ref outside it, a truncated file and an unknown type", () => {
    const file = join(dir, "b.bin");
    const [ref] = writeTensorsSync(file, [new Float32Array(16)]);
    expect(() => writeTensorsSync(file, [new Float32Array(1)])).toThrow(/EEXIST/);
    expect(() => readTensorsSync(file, [{ ...ref, length: 17 }])).toThrow(/lies outside its 64 bytes/);
    expect(() => readTensorsSync(file, [{ ...ref, type: "Float64Array" }])).toThrow(/unknown element type "Float64Array"/);
    truncateSync(file, 32);
    expect(() => readTensorsSync(file, [ref])).toThrow(/lies outside its 32 bytes/);
    expect(() => writeTensorsSync(join(dir, "c.bin"), [new Float64Array(1) as never])).toThrow(/cannot store a Float64Array/);
  });
});
