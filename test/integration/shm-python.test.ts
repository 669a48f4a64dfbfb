/**
 * Node → Python → Node through shared memory: the orchestrator side puts a 16 MiB tensor in
 * a segment, a Python worker decodes it with the real worker codec (which maps /dev/shm) and
 * sends the bytes it read back as frames; the segment is gone when the run's registry closes.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newWorkerKey } from "../../src/transport/auth.ts";
import { Broker, type Peer } from "../../src/transport/broker.ts";
import { decodeTensors, type Tensor } from "../../src/transport/codec.ts";
import { ENV_WORKER_KEY, PROTOCOL_VERSION, type Message } from "../../src/transport/protocol.ts";
import { encodeTensorsShm, ShmRegistry } from "../../src/transport/shm.ts";
import { NO_ADDON, shmAddon } from "./shm-addon.ts";

const root = resolve(import.meta.dirname, "..", "..");
const PYTHON = join(root, ".venv", "bin", "python");
const ready = existsSync(PYTHON) && existsSync("/dev/shm");
if (!ready) console.log(`[shm-python] skipped: needs ${PYTHON} (npm run bootstrap) and /dev/shm`);

describe.skipIf(!ready)("shm round trip with a Python worker", () => {
  let broker: Broker;
  let child: ChildProcess;
  let peer: Peer;
  const waiting = new Map<string, (m: { message: Message; frames: Buffer[] }) => void>();

  beforeAll(async () => {
    broker = await Broker.bind();
    const key = newWorkerKey();
    child = spawn(PYTHON, [join(root, "test/integration/shm-echo-worker.py"), "--connect", broker.endpoint, "--name", "shm-echo"], {
      stdio: ["ignore", "inherit", "inherit"],
      env: { ...process.env, [ENV_WORKER_KEY]: key.toString("hex") },
    });
    const hello = new Promise<Peer>((res, rej) => {
      broker.expect({
        key,
        pid: child.pid,
        onHello: (_h, p) => {
          res(p);
          return { onMessage: (message, frames) => waiting.get(message.id)?.({ message, frames }) };
        },
        onRefused: (e) => rej(new Error(e.message)),
      });
      child.once("exit", (code, signal) => rej(new Error(`shm echo worker exited (${code ?? signal}) before hello`)));
    });
    peer = await hello;
  });
  afterAll(async () => {
    child?.kill("SIGKILL");
    await broker?.close();
  });

  function ask(id: string, refs: unknown[], frames: Buffer[]) {
    const answer = new Promise<{ message: Message; frames: Buffer[] }>((res) => waiting.set(id, res));
    void peer.send({ v: PROTOCOL_VERSION, type: "task", id, task: "echo.shm", args: {}, tensors: refs }, frames);
    return answer;
  }

  const addon = shmAddon();
  for (const [kind, path] of [["addon", addon?.path], ["file fallback", NO_ADDON]] as const) {
    it.skipIf(kind === "addon" && !addon)(`${kind}: Python reads the segment's bytes, and the run's end unlinks it`, async () => {
      const runId = `py-${kind.replace(" ", "")}-${process.pid}`;
      const reg = new ShmRegistry({ runId, addonPath: path, exitHooks: false, sweep: false });
      const big = new Float32Array(4 << 20);
      for (let i = 0; i < big.length; i += 997) big[i] = i * 0.5;
      big[big.length - 1] = -1.25;
      const small = new Int32Array([3, 1, 4, 1, 5]);
      const input: Record<string, Tensor> = {
        x: { dtype: "float32", shape: [1024, 4096], data: big },
        k: { dtype: "int32", shape: [5], data: small },
      };
      const { refs, frames, segment } = encodeTensorsShm(input, reg, 0, { mapped: kind === "addon" });
      expect(refs[0]!.shm?.segment).toBe(segment!.name);
      const { message, frames: back } = await ask(`t-${kind}`, refs, frames);
      expect(message.type, JSON.stringify(message)).toBe("result");
      if (message.type !== "result") return;
      expect(message.value.viaShm).toEqual(["x"]);
      const out = decodeTensors(message.tensors, back);
      expect(out.x!.shape).toEqual([1024, 4096]);
      const got = Buffer.from(out.x!.data.buffer, out.x!.data.byteOffset, out.x!.data.byteLength);
      expect(got.equals(Buffer.from(big.buffer))).toBe(true);
      expect([...(out.k!.data as Int32Array)]).toEqual([3, 1, 4, 1, 5]);
      expect(readdirSync("/dev/shm")).toContain(segment!.name);
      reg.close(); // the run ends
      expect(readdirSync("/dev/shm").filter((n) => n.includes(runId))).toEqual([]);
    });
  }

  it("a segment unlinked too early is an SHM_UNAVAILABLE error from the worker, not a crash", async () => {
    const reg = new ShmRegistry({ runId: `py-gone-${process.pid}`, addonPath: NO_ADDON, exitHooks: false, sweep: false });
    const { refs, frames } = encodeTensorsShm({ x: { dtype: "uint8", shape: [2 << 20], data: new Uint8Array(2 << 20) } }, reg);
    reg.close();
    const { message } = await ask("t-gone", refs, frames);
    expect(message.type).toBe("error");
    if (message.type === "error") {
      expect(message.code).toBe(16);
      expect(message.message).toMatch(/cannot open shared memory segment/);
    }
  });
});
