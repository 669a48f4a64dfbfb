/**
 * Encoding and decoding of protocol messages: one msgpack envelope followed by raw tensor
 * frames (docs/protocol.md). Decoding validates and answers a typed violation instead of
 * throwing, so that the broker can reply with an `error` and keep serving.
 */
import { Packr } from "msgpackr";
import { checkPhaseMark } from "./check-phase.ts";
import {
  DTYPE_BYTES,
  ErrorCode,
  MESSAGE_TYPES,
  type DType,
  type Message,
  type MessageType,
  type TensorRef,
} from "./protocol.ts";

// useRecords:false keeps plain msgpack maps (no msgpackr record extension) so Python and
// C++ read what we write and the golden bytes match; mapsAsObjects gives plain objects.
// int64AsType 'auto' keeps int64 values as numbers while they are exact (|x| <= 2^53) and
// as bigint beyond, instead of silently rounding (the golden int64 frame has 2^53 + 1).
// 'auto' exists at runtime but is missing from msgpackr's typings, hence the cast.
const packr = new Packr({
  useRecords: false,
  mapsAsObjects: true,
  int64AsType: "auto" as "bigint",
  encodeUndefinedAsNil: false,
  // Smallest map header (fixmap) like Python and C++ writers, so bytes match the goldens.
  variableMapSize: true,
});

/** Why a received message was refused: the code and text of the `error` reply. */
export interface ProtocolViolation {
  code: (typeof ErrorCode)[keyof typeof ErrorCode];
  message: string;
  /** The offending message's id when it could be read, so the reply can name it. */
  id?: string;
}

/** A decoded message: the validated envelope and the raw frames that followed it. */
export interface Decoded {
  message: Message;
  frames: Buffer[];
}

export type DecodeResult = { ok: true; value: Decoded } | { ok: false; error: ProtocolViolation };

/** A tensor as typed-array data: float16 travels as its raw bits in a Uint16Array. */
export type TensorData =
  | Float32Array
  | Uint16Array
  | BigInt64Array
  | Int32Array
  | Uint8Array;

export interface Tensor {
  dtype: DType;
  shape: number[];
  data: TensorData;
}

// A decoded msgpack map is a plain object; msgpackr answers odd bytes (0xc1) with class
// instances, which are not maps.
const isPlainMap = (x: unknown): x is Record<string, unknown> =>
  typeof x === "object" && x !== null && (Object.getPrototypeOf(x) === Object.prototype || Object.getPrototypeOf(x) === null);

// msgpackr writes integers beyond 32 bits as float64; Python would then read a float for
// e.g. a millisecond timestamp. Integers stay integers: promote them to bigint (int64).
function intsStayInts(value: unknown): unknown {
  if (typeof value === "number") {
    if (Number.isInteger(value) && (value > 0xffffffff || value < -0x80000000)) {
      return Number.isSafeInteger(value) ? BigInt(value) : value;
    }
    return value;
  }
  if (Array.isArray(value)) return value.map(intsStayInts);
  if (isPlainMap(value)) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) if (v !== undefined) out[k] = intsStayInts(v);
    return out;
  }
  return value;
}

/** Encode one envelope as msgpack (map key order is insertion order). */
export function encodeEnvelope(message: object): Buffer {
  return packr.pack(intsStayInts(message));
}

/** Decode msgpack bytes without validation (the golden tests and tools use it). */
export function decodeRaw(bytes: Uint8Array): unknown {
  return packr.unpack(bytes);
}

/** Frames ready for a DEALER/ROUTER send: the envelope, then the tensor frames. */
export function encodeMessage(message: object, frames: readonly Uint8Array[] = []): Uint8Array[] {
  return [encodeEnvelope(message), ...frames];
}

const malformed = (message: string, id?: string): DecodeResult => ({
  ok: false,
  error: id === undefined
    ? { code: ErrorCode.MALFORMED_MESSAGE, message }
    : { code: ErrorCode.MALFORMED_MESSAGE, message, id },
});

/**
 * Decode and validate `[envelope, ...frames]` as received from a peer (without the ROUTER
 * identity). Checks the envelope shape and every TensorRef against the frames; the
 * version is checked by the receiver, which knows what to do about a mismatch.
 */
export function decodeMessage(parts: readonly Buffer[]): DecodeResult {
  const [head, ...frames] = parts;
  if (head === undefined || head.length === 0) return malformed("empty message: no envelope frame");
  let env: unknown;
  try {
    env = packr.unpack(head);
  } catch (err) {
    return malformed(`envelope is not valid msgpack (${(err as Error).message})`);
  }
  if (env !== null && typeof env === "object" && (env as object).constructor?.name === "C1Type") {
    return malformed("envelope is not valid msgpack (reserved byte 0xc1)");
  }
  if (!isPlainMap(env)) {
    const got = env === null ? "nil" : Array.isArray(env) ? "an array" : ArrayBuffer.isView(env) ? "binary" : typeof env;
    return malformed(`envelope is not a msgpack map (got ${got})`);
  }
  const id = typeof env.id === "string" ? env.id : undefined;
  if (typeof env.id !== "string") return malformed("envelope lacks a string `id`");
  if (env.type === undefined) return malformed("envelope lacks `type`", id);
  if (typeof env.type !== "string") return malformed(`envelope \`type\` is ${typeof env.type}, expected a string`, id);
  if (typeof env.v !== "number" || !Number.isInteger(env.v)) return malformed("envelope lacks an integer `v`", id);
  if (!(MESSAGE_TYPES as readonly string[]).includes(env.type)) {
    return { ok: false, error: { code: ErrorCode.UNKNOWN_TYPE, message: `unknown message type "${env.type}"`, id } };
  }
  if (env.tensors !== undefined) {
    const problem = checkTensorRefs(env.tensors, frames);
    if (problem) return malformed(problem, id);
  }
  if (env.type === "phase") {
    const problem = checkPhaseMark(env);
    if (problem) return malformed(problem, id);
  }
  return { ok: true, value: { message: env as unknown as Message, frames } };
}

const DTYPES = Object.keys(DTYPE_BYTES) as DType[];

/** Returns what is wrong with a TensorRef list against the frames, or undefined. */
export function checkTensorRefs(refs: unknown, frames: readonly Uint8Array[]): string | undefined {
  if (!Array.isArray(refs)) return "`tensors` is not an array";
  for (const [i, ref] of refs.entries()) {
    if (!isPlainMap(ref)) return `tensors[${i}] is not a map`;
    const name = typeof ref.name === "string" ? ref.name : `#${i}`;
    if (typeof ref.name !== "string") return `tensors[${i}] lacks a string \`name\``;
    if (!DTYPES.includes(ref.dtype as DType)) return `tensor "${name}": unknown dtype ${JSON.stringify(ref.dtype)}`;
    const shape = ref.shape;
    if (!Array.isArray(shape) || !shape.every((d) => Number.isInteger(d) && d >= 0)) {
      return `tensor "${name}": shape must be an array of non-negative integers`;
    }
    if (ref.shm !== undefined) continue; // shared memory is checked where it is mapped
    if (!Number.isInteger(ref.frame)) return `tensor "${name}": lacks an integer \`frame\` (or \`shm\`)`;
    const index = ref.frame as number;
    const frame = frames[index];
    if (index < 0 || frame === undefined) {
      return `tensor "${name}": frame index ${index} out of range (message has ${frames.length} frames)`;
    }
    const want = shape.reduce((a: number, d: number) => a * d, 1) * DTYPE_BYTES[ref.dtype as DType];
    if (frame.byteLength !== want) {
      return `tensor "${name}": frame ${index} has ${frame.byteLength} bytes, expected ${want} (shape [${shape.join(", ")}] x ${ref.dtype})`;
    }
  }
  return undefined;
}

type ArrayCtor = { new (b: ArrayBuffer, o: number, n: number): TensorData; BYTES_PER_ELEMENT: number };
const CTORS: Readonly<Record<DType, ArrayCtor>> = Object.freeze({
  float32: Float32Array,
  float16: Uint16Array,
  int64: BigInt64Array,
  int32: Int32Array,
  uint8: Uint8Array,
  bool: Uint8Array,
});

/**
 * Turn named tensors into TensorRefs and frames. The frames view the typed arrays' memory
 * (no copy); the host is little-endian, which is the wire order.
 */
export function encodeTensors(
  tensors: Readonly<Record<string, Tensor>>,
  firstFrame = 0,
): { refs: TensorRef[]; frames: Buffer[] } {
  const refs: TensorRef[] = [];
  const frames: Buffer[] = [];
  for (const [name, t] of Object.entries(tensors)) {
    const want = t.shape.reduce((a, d) => a * d, 1) * DTYPE_BYTES[t.dtype];
    if (t.data.byteLength !== want) {
      throw new RangeError(
        `tensor "${name}": data has ${t.data.byteLength} bytes, expected ${want} (shape [${t.shape.join(", ")}] x ${t.dtype})`,
      );
    }
    refs.push({ name, dtype: t.dtype, shape: [...t.shape], frame: firstFrame + frames.length });
    frames.push(Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength));
  }
  return { refs, frames };
}

/**
 * Turn TensorRefs and frames (already validated by decodeMessage) into typed arrays.
 * Zero-copy when the frame is aligned for its element type; copied otherwise, since a
 * typed array cannot start at a misaligned offset.
 */
export function decodeTensors(refs: readonly TensorRef[] | undefined, frames: readonly Uint8Array[]): Record<string, Tensor> {
  const out: Record<string, Tensor> = {};
  for (const ref of refs ?? []) {
    if (ref.frame === undefined) {
      // shm hook (src/transport/shm.ts registers the resolver when loaded): TensorRef.shm refs.
      if (ref.shm && shmResolver) out[ref.name] = shmResolver(ref);
      continue;
    }
    const frame = frames[ref.frame];
    if (frame === undefined) throw new RangeError(`tensor "${ref.name}": frame ${ref.frame} out of range`);
    out[ref.name] = { dtype: ref.dtype, shape: [...ref.shape], data: viewAs(ref.dtype, frame) };
  }
  return out;
}

// --- shm hook (owner: src/transport/shm.ts) ---------------------------------------------
// decodeTensors resolves `shm` refs through this once shm.ts is loaded (it registers on
// import); without it they are skipped as before. A hook, not an import: shm.ts imports codec.
let shmResolver: ((ref: TensorRef) => Tensor) | undefined;
export function setShmResolver(resolve: ((ref: TensorRef) => Tensor) | undefined): void {
  shmResolver = resolve;
}
// --- end shm hook ---------------------------------------------------------------------------

function viewAs(dtype: DType, frame: Uint8Array): TensorData {
  const Ctor = CTORS[dtype];
  const size = Ctor.BYTES_PER_ELEMENT;
  if (frame.byteOffset % size === 0) {
    return new Ctor(frame.buffer as ArrayBuffer, frame.byteOffset, frame.byteLength / size);
  }
  const copy = new ArrayBuffer(frame.byteLength);
  new Uint8Array(copy).set(frame);
  return new Ctor(copy, 0, frame.byteLength / size);
}

/** The message types a worker may send (the rest only flow orchestrator → worker). */
export const FROM_WORKER: ReadonlySet<MessageType> = new Set(["hello", "progress", "phase", "result", "error", "heartbeat"]);
