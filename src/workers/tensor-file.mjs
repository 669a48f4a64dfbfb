// A file of typed arrays, each at an offset aligned to 64 bytes, found by refs
// `{ type, offset, length }` (length in elements): how node-ort.ts hands a node-ort child its
// eval set and the child hands its outputs back (plain JavaScript, as the child is). A file, not the IPC channel: Node's advanced
// serialization fails on a message past 2 GiB ("Unable to deserialize cloned data"), thrown in
// the orchestrator, and a decoder LM's logits over compare's 256 eval samples (32k words, seq
// 128) are 4000 MiB. Reads and writes go in pieces of 1 GiB, under the 2 GiB a single fs call takes.
import { closeSync, fstatSync, openSync, readSync, writeSync } from "node:fs";

export const TYPED = { Float32Array, Uint16Array, BigInt64Array, Int32Array, Uint8Array };
const ALIGN = 64;
const PIECE = 1 << 30;

/** Writes `tensors` into a new file (mode 0600); their refs, in order. */
export function writeTensorsSync(file, tensors) {
  const refs = [];
  const fd = openSync(file, "wx", 0o600);
  try {
    let offset = 0;
    for (const t of tensors) {
      if (!TYPED[t.constructor.name]) throw new Error(`tensor file ${file}: cannot store a ${t.constructor.name}`);
      offset = Math.ceil(offset / ALIGN) * ALIGN;
      refs.push({ type: t.constructor.name, offset, length: t.length });
      const bytes = new Uint8Array(t.buffer, t.byteOffset, t.byteLength);
      for (let done = 0; done < bytes.length; ) done += writeSync(fd, bytes, done, Math.min(PIECE, bytes.length - done), offset + done);
      offset += t.byteLength;
    }
  } finally {
    closeSync(fd);
  }
  return refs;
}

/** The arrays `refs` name in `file`, each read into an array of its own. */
export function readTensorsSync(file, refs) {
  const fd = openSync(file, "r");
  try {
    const size = fstatSync(fd).size;
    return refs.map((r) => {
      const T = TYPED[r.type];
      if (!T) throw new Error(`tensor file ${file}: unknown element type ${JSON.stringify(r.type)}`);
      const bytes = r.length * T.BYTES_PER_ELEMENT;
      if (!Number.isSafeInteger(r.offset) || r.offset < 0 || r.offset % T.BYTES_PER_ELEMENT || r.offset + bytes > size)
        throw new Error(`tensor file ${file}: ${r.type} of ${r.length} at byte ${r.offset} lies outside its ${size} bytes`);
      const t = new T(r.length);
      const view = new Uint8Array(t.buffer);
      for (let done = 0; done < bytes; ) {
        const got = readSync(fd, view, done, Math.min(PIECE, bytes - done), r.offset + done);
        if (got === 0) throw new Error(`tensor file ${file}: ended inside ${r.type} at byte ${r.offset + done}`);
        done += got;
      }
      return t;
    });
  } finally {
    closeSync(fd);
  }
}
