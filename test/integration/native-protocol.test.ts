/**
 * memlane-rt's handling of bad requests over real ZeroMQ: a bare ROUTER in the test sends
 * what a well-behaved orchestrator never would (undecodable envelopes, wrong versions,
 * unknown types and tasks, wrong shapes, NaN, bad plans) and the worker answers each with
 * an error as data and keeps serving. Also: heartbeat, cancel, shutdown, orphan exit.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pack } from "msgpackr";
import * as zmq from "zeromq";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compileOnnx } from "../../src/compiler/index.ts";
import { decodeRaw } from "../../src/transport/codec.ts";
import { ErrorCode } from "../../src/transport/protocol.ts";
import { encodeTensorsShm, ShmRegistry } from "../../src/transport/shm.ts";
import { memlaneRtBinary } from "../../src/workers/specs.ts";
import { ensureModels } from "../fixtures/onnx/models.ts";

function binary(): string | null {
  try {
    return memlaneRtBinary();
  } catch {
    return null;
  }
}
const BIN = binary();
if (!BIN) console.warn("native-protocol: memlane-rt is not built (run `npm run bootstrap`); skipping");

type Env = Record<string, unknown> & { v: number; type: string; id: string };

/** One memlane-rt process on a private ROUTER. */
class Rig {
  router = new zmq.Router({ linger: 0 });
  proc!: ChildProcess;
  identity!: Buffer;
  hello!: Env;
  stderr = "";
  exit: Promise<number | null> = Promise.resolve(null);

  async start(extra: string[] = []): Promise<void> {
    await this.router.bind("tcp://127.0.0.1:*");
    this.proc = spawn(BIN!, ["--connect", this.router.lastEndpoint!, "--device", "cpu", "--threads", "1", ...extra], {
      stdio: ["ignore", "ignore", "pipe"],
    });
    this.proc.stderr!.on("data", (d: Buffer) => (this.stderr += d.toString()));
    this.exit = new Promise((r) => this.proc.on("exit", (code) => r(code)));
    const [id, env] = await this.recvRaw();
    this.identity = id!;
    this.hello = decodeRaw(env!) as Env;
    // The import phase (process start to hello) follows the hello under its id.
    this.importMarks = [(await this.recv()).env, (await this.recv()).env];
  }
  importMarks: Env[] = [];

  async recvRaw(ms = 10_000): Promise<Buffer[]> {
    const t = setTimeout(() => this.router.close(), ms);
    try {
      return (await this.router.receive()) as Buffer[];
    } finally {
      clearTimeout(t);
    }
  }

  async recv(): Promise<{ env: Env; frames: Buffer[] }> {
    const [, env, ...frames] = await this.recvRaw();
    // The orchestrator's own decoder: msgpack-c writes an integral double (a process start
    // time in whole milliseconds) as a uint64, which msgpackr's default unpack makes a bigint.
    return { env: decodeRaw(env!) as Env, frames };
  }

  async send(env: unknown, frames: Uint8Array[] = []): Promise<void> {
    await this.router.send([this.identity, pack(env), ...frames]);
  }
  async sendRaw(parts: Uint8Array[]): Promise<void> {
    await this.router.send([this.identity, ...parts]);
  }

  /** Send a task and collect its messages up to the result or error. */
  async task(id: string, task: string, args: object = {}, tensors: object[] = [], frames: Uint8Array[] = []) {
    await this.send({ v: 1, type: "task", id, task, args, tensors }, frames);
    const seen: Env[] = [];
    for (;;) {
      const m = await this.recv();
      seen.push(m.env);
      if (m.env.id === id && (m.env.type === "result" || m.env.type === "error")) return { ...m, seen };
    }
  }

  async stop(): Promise<void> {
    if (this.proc.exitCode === null && this.proc.signalCode === null) this.proc.kill("SIGKILL");
    await this.exit;
    this.router.close();
  }
}

const f32 = (a: number[]): Uint8Array => new Uint8Array(new Float32Array(a).buffer);
let work = "";
let plan = "";

describe.skipIf(!BIN)("memlane-rt protocol and bad requests", () => {
  const rig = new Rig();
  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), "memlane-native-protocol-"));
    const { dir, manifest } = ensureModels();
    plan = join(work, "mlp.mlplan");
    await compileOnnx(join(dir, manifest.mlp!.onnx), plan);
    await rig.start();
  }, 300_000);
  afterAll(async () => {
    await rig.stop();
    rmSync(work, { recursive: true, force: true });
  });

  it("sends hello first, with pid and capabilities", () => {
    expect(rig.hello).toMatchObject({ v: 1, type: "hello", worker: "memlane-rt", pid: rig.proc.pid });
    // "shm": not a task; it reads shared-memory TensorRefs (docs/protocol.md)
    expect(rig.hello.capabilities).toEqual(["infer.native", "load", "run", "shm"]);
    const [start, end] = rig.importMarks;
    expect(start).toMatchObject({ type: "phase", id: rig.hello.id, name: "import", mark: "start" });
    expect(end).toMatchObject({ type: "phase", id: rig.hello.id, name: "import", mark: "end" });
    expect((end!.tMs as number) - (start!.tMs as number)).toBeGreaterThanOrEqual(0);
    expect((end!.tMs as number) - (start!.tMs as number)).toBeLessThan(60_000);
    expect((end!.memory as { rssKiB: number }).rssKiB).toBeGreaterThan(0);
  });

  it("answers a heartbeat with the same id", async () => {
    await rig.send({ v: 1, type: "heartbeat", id: "hb-1" });
    expect((await rig.recv()).env).toEqual({ v: 1, type: "heartbeat", id: "hb-1" });
  });

  it("MALFORMED_MESSAGE for bytes that are not msgpack, a non-map, or a missing id", async () => {
    await rig.sendRaw([Buffer.from([0xc1, 0x00, 0xff])]);
    expect((await rig.recv()).env).toMatchObject({ type: "error", code: ErrorCode.MALFORMED_MESSAGE });
    // A 5-byte header claiming 2^32-1 array entries: refused, not allocated.
    await rig.sendRaw([Buffer.from([0xdd, 0xff, 0xff, 0xff, 0xff, 0x01])]);
    expect((await rig.recv()).env).toMatchObject({ type: "error", code: ErrorCode.MALFORMED_MESSAGE });
    await rig.send([1, 2, 3]);
    expect((await rig.recv()).env).toMatchObject({ type: "error", code: ErrorCode.MALFORMED_MESSAGE });
    await rig.send({ v: 1, type: "task" });
    const e = (await rig.recv()).env;
    expect(e).toMatchObject({ type: "error", code: ErrorCode.MALFORMED_MESSAGE });
    expect(e.message).toContain("id");
  });

  it("VERSION_MISMATCH naming both versions, UNKNOWN_TYPE, UNKNOWN_TASK", async () => {
    await rig.send({ v: 2, type: "task", id: "v2", task: "run" });
    const v = (await rig.recv()).env;
    expect(v).toMatchObject({ id: "v2", code: ErrorCode.VERSION_MISMATCH });
    expect(v.message).toBe("orchestrator speaks protocol v2, worker speaks v1");
    await rig.send({ v: 1, type: "frobnicate", id: "u1" });
    expect((await rig.recv()).env).toMatchObject({ id: "u1", code: ErrorCode.UNKNOWN_TYPE });
    const t = await rig.task("t-unknown", "infer.ort");
    expect(t.env).toMatchObject({ code: ErrorCode.UNKNOWN_TASK, details: { task: "infer.ort" } });
  });

  it("run before load: an error, not a crash", async () => {
    const r = await rig.task("r0", "run", {}, [{ name: "input", dtype: "float32", shape: [1, 64], frame: 0 }], [f32(new Array(64).fill(0))]);
    expect(r.env).toMatchObject({ type: "error", code: ErrorCode.INVALID_ARGUMENT });
    expect(r.env.message).toContain("no model loaded");
  });

  it("PLAN_INVALID with the reader's message for a corrupt plan", async () => {
    const bad = join(work, "bad.mlplan");
    writeFileSync(bad, Buffer.concat([Buffer.from("NOTAPLAN"), Buffer.alloc(100)]));
    const r = await rig.task("l-bad", "load", { model: bad, maxBatch: 4 });
    expect(r.env).toMatchObject({ type: "error", code: ErrorCode.PLAN_INVALID });
    expect(r.env.message).toContain("magic");
    expect(r.env.message).toContain("expected");
  });

  it("loads a real plan, then refuses wrong shapes and NaN with named details and keeps serving", async () => {
    const l = await rig.task("l1", "load", { model: plan, maxBatch: 4 });
    expect(l.env.type).toBe("result");
    expect(l.seen.filter((m) => m.type === "phase").map((m) => `${m.name}:${m.mark}`)).toEqual([
      "runtime-create:start", "runtime-create:end", "model-load:start", "model-load:end",
    ]);
    const value = l.env.value as { inputs: { name: string; shape: number[] }[]; arenaBytes: number };
    expect(value.inputs[0]!.shape).toEqual([-1, 64]);
    const name = value.inputs[0]!.name;

    const wrong = await rig.task("r-shape", "run", {}, [{ name, dtype: "float32", shape: [1, 63], frame: 0 }], [f32(new Array(63).fill(0))]);
    expect(wrong.env).toMatchObject({ type: "error", code: ErrorCode.SHAPE_MISMATCH });
    expect(wrong.env.message).toContain("expected float32 [-1,64]");
    expect(wrong.env.message).toContain("got float32 [1,63]");
    expect(wrong.env.details).toMatchObject({ expected: [-1, 64], got: [1, 63] });
    // Plan v2: the dtype is part of the contract too (8-byte int64 values, same shape).
    const ints = await rig.task("r-dtype", "run", {}, [{ name, dtype: "int64", shape: [1, 64], frame: 0 }], [new Uint8Array(64 * 8)]);
    expect(ints.env).toMatchObject({ type: "error", code: ErrorCode.SHAPE_MISMATCH });
    expect(ints.env.message).toContain("expected float32 [-1,64] (batch first, -1 = batch), got int64 [1,64]");

    const big = await rig.task("r-big", "run", {}, [{ name, dtype: "float32", shape: [5, 64], frame: 0 }], [f32(new Array(320).fill(0))]);
    expect(big.env).toMatchObject({ type: "error", code: ErrorCode.SHAPE_MISMATCH });
    expect(big.env.message).toContain("maxBatch 4");

    const nan = new Array(128).fill(0.5);
    nan[70] = Number.NaN;
    const n = await rig.task("r-nan", "run", {}, [{ name, dtype: "float32", shape: [2, 64], frame: 0 }], [f32(nan)]);
    expect(n.env).toMatchObject({ type: "error", code: ErrorCode.NAN_INPUT, details: { tensor: name, index: 70 } });

    const missing = await rig.task("r-frame", "run", {}, [{ name, dtype: "float32", shape: [1, 64], frame: 3 }], []);
    expect(missing.env).toMatchObject({ type: "error", code: ErrorCode.MALFORMED_MESSAGE });

    const short = await rig.task("r-short", "run", {}, [{ name, dtype: "float32", shape: [2, 64], frame: 0 }], [f32([1, 2, 3])]);
    expect(short.env).toMatchObject({ type: "error", code: ErrorCode.MALFORMED_MESSAGE });

    // A dtype no plan takes is refused while decoding.
    const dtype = await rig.task("r-dtype16", "run", {}, [{ name, dtype: "float16", shape: [1, 64], frame: 0 }], [new Uint8Array(128)]);
    expect(dtype.env).toMatchObject({ type: "error", code: ErrorCode.INVALID_ARGUMENT });

    const badArg = await rig.task("l-arg", "load", { model: plan, maxBatch: "many" });
    expect(badArg.env).toMatchObject({ type: "error", code: ErrorCode.INVALID_ARGUMENT });
    expect(badArg.env.message).toContain("maxBatch");

    // The loaded model survived every bad request.
    const ok = await rig.task("r-ok", "run", {}, [{ name, dtype: "float32", shape: [3, 64], frame: 0 }], [f32(new Array(192).fill(0.25))]);
    expect(ok.env.type).toBe("result");
    const refs = ok.env.tensors as { shape: number[]; frame: number }[];
    expect(refs[0]!.shape).toEqual([3, 10]);
    expect(ok.frames[0]!.byteLength).toBe(3 * 10 * 4);
  });

  it("refuses a profileIterations above its cap with INVALID_ARGUMENT naming the field", async () => {
    const args = { model: plan, batchSizes: [2], iterations: 1, warmup: 0, profile: true, profileIterations: 1e9 };
    const r = await rig.task("p-cap", "infer.native", args, [{ name: "inputs", dtype: "float32", shape: [2, 64], frame: 0 }], [f32(new Array(128).fill(0.5))]);
    expect(r.env).toMatchObject({ type: "error", code: ErrorCode.INVALID_ARGUMENT });
    expect(r.env.message).toMatch(/profileIterations.*\[1, 100000\].*1000000000/);
  });

  it("reads `shm` TensorRefs: the same outputs as frames; a gone segment is SHM_UNAVAILABLE, a bad range MALFORMED", async () => {
    const l = await rig.task("l-shm", "load", { model: plan, maxBatch: 4 });
    expect(l.env.type).toBe("result");
    const name = (l.env.value as { inputs: { name: string }[] }).inputs[0]!.name;
    const x = new Float32Array(4 * 64).map((_, i) => Math.cos(i) * 2);
    const reg = new ShmRegistry({ runId: `rt-${process.pid}`, thresholdBytes: 0, exitHooks: false, sweep: false });
    try {
      const { refs, segment } = encodeTensorsShm({ [name]: { dtype: "float32", shape: [4, 64], data: x } }, reg);
      expect(refs[0]!.shm?.segment).toBe(segment!.name);
      const viaShm = await rig.task("r-shm", "run", {}, refs, []);
      const viaFrame = await rig.task("r-frame-ref", "run", {}, [{ name, dtype: "float32", shape: [4, 64], frame: 0 }], [new Uint8Array(x.buffer)]);
      expect(viaShm.env.type, JSON.stringify(viaShm.env)).toBe("result");
      expect(viaShm.frames[0]!.equals(viaFrame.frames[0]!)).toBe(true);
      const outside = await rig.task("r-shm-range", "run", {}, [{ ...refs[0]!, shm: { ...refs[0]!.shm!, offset: 64 } }], []);
      expect(outside.env).toMatchObject({ type: "error", code: ErrorCode.MALFORMED_MESSAGE });
      expect(outside.env.message).toContain("lies outside segment");
      const badName = await rig.task("r-shm-name", "run", {}, [{ ...refs[0]!, shm: { ...refs[0]!.shm!, segment: "../etc/passwd" } }], []);
      expect(badName.env).toMatchObject({ type: "error", code: ErrorCode.MALFORMED_MESSAGE });
      reg.release(segment!.name);
      const gone = await rig.task("r-shm-gone", "run", {}, refs, []);
      expect(gone.env).toMatchObject({ type: "error", code: ErrorCode.SHM_UNAVAILABLE });
      expect(gone.env.message).toContain("cannot open shared memory segment");
    } finally {
      reg.close();
    }
  });

  it("cancel: a running infer.native answers CANCELLED and the worker goes on", async () => {
    const x = f32(new Array(64 * 64).fill(0.1));
    await rig.send(
      { v: 1, type: "task", id: "long", task: "infer.native", args: { model: plan, batchSizes: [64], iterations: 1_000_000, warmup: 0 },
        tensors: [{ name: "inputs", dtype: "float32", shape: [64, 64], frame: 0 }] },
      [x],
    );
    for (;;) {
      const m = (await rig.recv()).env;
      if (m.type === "phase" && m.name === "steady-inference" && m.mark === "start") break;
      expect(m.type).not.toBe("error");
    }
    await rig.send({ v: 1, type: "cancel", id: "long" });
    for (;;) {
      const m = (await rig.recv()).env;
      if (m.id === "long" && m.type === "error") {
        expect(m.code).toBe(ErrorCode.CANCELLED);
        break;
      }
    }
    await rig.send({ v: 1, type: "heartbeat", id: "after-cancel" });
    expect((await rig.recv()).env.id).toBe("after-cancel");
  });

  it("shutdown: exits 0", async () => {
    const other = new Rig();
    await other.start();
    await other.send({ v: 1, type: "shutdown", id: "bye" });
    expect(await other.exit).toBe(0);
    other.router.close();
  });

  it("exits (code 3) when the orchestrator goes silent: no orphans", async () => {
    const other = new Rig();
    await other.start(["--heartbeat-timeout", "0.5"]);
    expect(await other.exit).toBe(3);
    expect(other.stderr).toContain("no message from the orchestrator");
    other.router.close();
  });
});
