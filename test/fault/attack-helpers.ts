// Shared by the attack suite (test/fault/attacks.test.ts): a seeded generator, counts scaled by
// MEMLANE_FAULT_SCALE, the checks every attack ends with (no orphans, nothing left in TMPDIR or
// /dev/shm), a raw ZMTP client that streams a frame without holding it in memory, and the
// fuzzed messages.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { encodeEnvelope } from "../../src/transport/codec.ts";
import { MESSAGE_TYPES, PROTOCOL_VERSION } from "../../src/transport/protocol.ts";
import { pidAlive, waitUntil } from "../integration/supervisor-helpers.ts";

/** 1 in `npm test`; `npm run fuzz` sets 100. */
export const SCALE = Math.max(1, Number(process.env.MEMLANE_FAULT_SCALE ?? "1") || 1);
export const SEED = Number(process.env.MEMLANE_FAULT_SEED ?? "20261122") >>> 0;
export const scaled = (n: number): number => Math.round(n * SCALE);

/** mulberry32: small, fast and the same sequence for the same seed everywhere. */
export function rng(seed = SEED): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface Scratch {
  dir: string;
  /** Restores TMPDIR and returns what was left in the private one (removing it). */
  leftovers(): string[];
}

/**
 * A private TMPDIR for one attack: the orchestrator (this process) and every worker it spawns
 * use it, so anything an attack leaves behind shows up here and nowhere else.
 */
export function privateTmp(): Scratch {
  const before = process.env.TMPDIR;
  const dir = mkdtempSync(join(tmpdir(), "memlane-fault-"));
  process.env.TMPDIR = dir;
  return {
    dir,
    leftovers() {
      if (before === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = before;
      const left = readdirSync(dir);
      rmSync(dir, { recursive: true, force: true });
      return left;
    },
  };
}

/** Shared-memory segments of this orchestrator still in /dev/shm. */
export function shmLeftovers(): string[] {
  try {
    return readdirSync("/dev/shm").filter((n) => n.startsWith(`memlane-${process.pid}-`));
  } catch {
    return [];
  }
}

/** Waits for every pid to be gone; returns those still alive (the orphans). */
export async function orphans(pids: readonly number[], ms = 5000): Promise<number[]> {
  await waitUntil(() => pids.every((p) => !pidAlive(p)), ms);
  return pids.filter((p) => pidAlive(p));
}

/** What an attacker reads from a worker's world-readable /proc/<pid>/cmdline. */
export function stolenArgs(pid: number): { endpoint: string; name: string } {
  const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
  const after = (flag: string): string => argv[argv.indexOf(flag) + 1] ?? "";
  return { endpoint: after("--connect"), name: after("--name") };
}

const hex = (r: () => number, n: number): string => Array.from({ length: n }, () => Math.floor(r() * 16).toString(16)).join("");

/** A hello claiming a real worker's id and pid, with a guessed or missing `auth`. */
export function forgedHello(r: () => number, id: string, pid: number): Buffer {
  const auth = r() < 0.2 ? undefined : r() < 0.5 ? hex(r, 64) : hex(r, Math.floor(r() * 80));
  return encodeEnvelope({
    v: PROTOCOL_VERSION, type: "hello", id, pid, worker: "python", capabilities: ["infer.ort", "shm"],
    versions: {}, ...(auth === undefined ? {} : { auth }),
  });
}

// ---- fuzzed messages -------------------------------------------------------------------------

const pick = <T>(r: () => number, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
const bytes = (r: () => number, n: number): Buffer => Buffer.from(Array.from({ length: n }, () => Math.floor(r() * 256)));

function value(r: () => number, depth = 0): unknown {
  switch (Math.floor(r() * (depth > 3 ? 6 : 9))) {
    case 0: return Math.floor(r() * 2 ** 31) - 2 ** 30;
    case 1: return r() * 1e6;
    case 2: return pick(r, ["", "x", "float32", "infer.native", "../../etc/passwd", "\u0000", "é".repeat(40)]);
    case 3: return r() < 0.5;
    case 4: return null;
    case 5: return bytes(r, Math.floor(r() * 16));
    case 6: return Array.from({ length: Math.floor(r() * 4) }, () => value(r, depth + 1));
    case 7: return Object.fromEntries(Array.from({ length: Math.floor(r() * 4) }, (_, i) => [`k${i}`, value(r, depth + 1)]));
    default: return 2 ** 53 + Math.floor(r() * 10);
  }
}

function tensorRef(r: () => number, frames: number): Record<string, unknown> {
  const ref: Record<string, unknown> = {
    name: pick(r, ["inputs", "x", "", 7]),
    dtype: pick(r, ["float32", "int64", "float16", "complex128", null]),
    shape: pick(r, [[4], [0], [-1], [2 ** 31, 2 ** 31], [1, 3, 32, 32], "4", []]),
  };
  if (r() < 0.2) ref["shm"] = { segment: pick(r, ["memlane-0-x-1", "/etc/passwd", "", 3]), offset: Math.floor(r() * 100) - 10, length: Math.floor(r() * 1e9) };
  else ref["frame"] = pick(r, [0, frames, frames + 5, -1, 0.5, "0"]);
  return ref;
}

/**
 * One fuzzed multipart message: garbage bytes, non-map msgpack, flipped bits of a valid
 * envelope, or an envelope of random fields, types and TensorRefs with 0-3 frames. With
 * `neverShutdown`, a well-formed `shutdown` (which legitimately ends a worker) is never made.
 */
export function fuzzMessage(r: () => number, neverShutdown = false): Buffer[] {
  const kind = r();
  if (kind < 0.15) return [bytes(r, Math.floor(r() * 64))];
  if (kind < 0.2) return [encodeEnvelope(value(r) as object)];
  if (kind < 0.23) return [Buffer.concat([Buffer.alloc(1 + Math.floor(r() * 2000), 0x91), Buffer.from([0xc0])])]; // deep nesting
  if (kind < 0.26) return [Buffer.from([0xdb, 0x7f, 0xff, 0xff, 0xff, 0x41])]; // str32 claiming 2 GiB
  const frames = Array.from({ length: Math.floor(r() * 4) }, () => bytes(r, pick(r, [0, 1, 3, 16, 4096])));
  const env: Record<string, unknown> = {};
  if (r() < 0.9) env["v"] = r() < 0.8 ? PROTOCOL_VERSION : value(r);
  if (r() < 0.9) env["type"] = r() < 0.85 ? pick(r, MESSAGE_TYPES) : value(r);
  if (r() < 0.9) env["id"] = r() < 0.8 ? `fz-${Math.floor(r() * 1e6)}` : value(r);
  if (env["type"] === "task") {
    env["task"] = pick(r, ["infer.native", "load", "run", "echo", "train", "nope", 3]);
    env["args"] = r() < 0.8 ? Object.fromEntries(["model", "plan", "batchSizes", "iterations", "device", "threads"].filter(() => r() < 0.5).map((k) => [k, value(r)])) : value(r);
  }
  if (env["type"] === "hello") Object.assign(env, { pid: value(r), auth: r() < 0.5 ? hex(r, 64) : value(r) });
  if (r() < 0.4) env["tensors"] = r() < 0.9 ? Array.from({ length: 1 + Math.floor(r() * 3) }, () => tensorRef(r, frames.length)) : value(r);
  for (let i = Math.floor(r() * 3); i > 0; i--) env[`extra${i}`] = value(r);
  if (neverShutdown && env["type"] === "shutdown" && env["v"] === PROTOCOL_VERSION) env["v"] = PROTOCOL_VERSION + 1;
  let head = encodeEnvelope(env);
  if (r() < 0.15) {
    head = Buffer.from(head);
    for (let i = 0; i < 1 + Math.floor(r() * 3); i++) { const at = Math.floor(r() * head.length); head[at] = head[at]! ^ (1 << Math.floor(r() * 8)); }
    if (neverShutdown && head.includes("shutdown")) head = head.subarray(0, Math.max(1, head.length - 1)); // a flipped bit could still say shutdown
  }
  return [head, ...frames];
}

// ---- a raw ZMTP 3.0 peer -------------------------------------------------------------------

/**
 * Connects to a ZeroMQ endpoint as a NULL-mechanism DEALER and streams one frame that claims
 * `size` bytes, writing zeros from one small buffer: the attacker never holds the frame. Ends
 * when the other side closes the connection (or when everything was written).
 */
export function streamFrame(endpoint: string, size: number): Promise<{ written: number; closedEarly: boolean }> {
  const sock: Socket = endpoint.startsWith("ipc://")
    ? connect({ path: endpoint.slice("ipc://".length) })
    : connect({ host: endpoint.replace(/^tcp:\/\/|:\d+$/g, ""), port: Number(endpoint.split(":").pop()) });
  const chunk = Buffer.alloc(1 << 20);
  let written = 0;
  return new Promise((resolve) => {
    let done = false;
    const finish = (closedEarly: boolean): void => {
      if (done) return;
      done = true;
      sock.destroy();
      resolve({ written, closedEarly });
    };
    sock.on("error", () => finish(written < size));
    sock.on("close", () => finish(written < size));
    sock.on("data", () => {}); // the peer's greeting and READY
    sock.on("connect", () => {
      const greeting = Buffer.alloc(64);
      greeting[0] = 0xff;
      greeting[9] = 0x7f;
      greeting[10] = 3; // ZMTP 3.0
      greeting.write("NULL", 12, "ascii");
      const body = Buffer.concat([Buffer.from("\x05READY\x0bSocket-Type", "latin1"), Buffer.from([0, 0, 0, 6]), Buffer.from("DEALER")]);
      const header = Buffer.alloc(9);
      header[0] = 0x02; // long frame, last
      header.writeBigUInt64BE(BigInt(size), 1);
      sock.write(Buffer.concat([greeting, Buffer.from([0x04, body.length]), body, header]));
      const pump = (): void => {
        while (!done && written < size) {
          const n = Math.min(chunk.length, size - written);
          written += n;
          if (!sock.write(n === chunk.length ? chunk : chunk.subarray(0, n))) {
            sock.once("drain", pump);
            return;
          }
        }
        if (written >= size) setTimeout(() => finish(false), 200);
      };
      pump();
    });
  });
}
