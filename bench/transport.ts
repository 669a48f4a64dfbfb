// Transport benchmark (npm run bench:transport), side by side in one run:
//  1. small messages/s through the broker: a Node DEALER echo in a worker_thread (the
//     transport alone), and the Python echo fixture through Supervisor/handle.run (the
//     path a real task takes: codec, routing, pyzmq + msgpack on the other side);
//  2. GB/s for a 64 MiB float32 tensor round trip (out and back as raw frames), for both
//     peers, next to an in-process Buffer.copy of the same bytes;
//  3. shared memory vs frames vs an in-process copy, one way, to a Python consumer that reads
//     every byte: the in-process rows are that consumer's own copy (fresh and warm buffer),
//     with ratios from the same run (bench/transport-shm.ts says how it is measured).
// Bounded to well under 60 s.
import { join } from "node:path";
import { isMainThread, Worker } from "node:worker_threads";
import * as zmq from "zeromq";
import { helloAuth, newWorkerKey } from "../src/transport/auth.ts";
import { Broker, type Peer } from "../src/transport/broker.ts";
import { decodeRaw, decodeTensors, encodeEnvelope, encodeTensors, type Tensor } from "../src/transport/codec.ts";
import { PROTOCOL_VERSION, type Message, type Result } from "../src/transport/protocol.ts";
import { REPO_ROOT, venvPython } from "../src/workers/specs.ts";
import { Supervisor } from "../src/workers/supervisor.ts";

const MiB = 1024 * 1024;
const TENSOR_BYTES = 64 * MiB;

/** Worker thread: a minimal DEALER echo, so the numbers are the transport's, not Python's. */
async function echoThread({ endpoint, key }: { endpoint: string; key: Uint8Array }): Promise<void> {
  const sock = new zmq.Dealer({ linger: 0 });
  sock.connect(endpoint);
  await sock.send(encodeEnvelope({ v: PROTOCOL_VERSION, type: "hello", id: "bench-echo", pid: process.pid, worker: "bench", capabilities: ["echo"], versions: {}, auth: helloAuth(key, "bench-echo", process.pid) }));
  for await (const [env, ...frames] of sock) {
    const m = decodeRaw(env!) as Message;
    if (m.type === "shutdown") break;
    if (m.type === "heartbeat") await sock.send(env!);
    if (m.type === "task") {
      await sock.send([encodeEnvelope({ v: PROTOCOL_VERSION, type: "result", id: m.id, value: {}, ...(m.tensors ? { tensors: m.tensors } : {}) }), ...frames]);
    }
  }
  sock.close();
}

/** Broker-level client for the thread echo: send a task, await its result by id. */
function threadClient(broker: Broker, key: Uint8Array): Promise<{ call(tensors?: Record<string, Tensor>): Promise<Result & { frames: Buffer[] }>; peer: Peer }> {
  return new Promise((resolve) => {
    const waiting = new Map<string, (r: Result & { frames: Buffer[] }) => void>();
    let seq = 0;
    broker.expect({
      key,
      name: "bench-echo",
      onHello: (_hello, peer) => {
        resolve({
          peer,
          call(tensors) {
            const id = `b${++seq}`;
            const { refs, frames } = encodeTensors(tensors ?? {});
            return new Promise((done) => {
              waiting.set(id, done);
              void peer.send({ v: PROTOCOL_VERSION, type: "task", id, task: "echo", args: {}, ...(refs.length ? { tensors: refs } : {}) }, frames);
            });
          },
        });
        return {
          onMessage: (m, frames) => {
            const done = waiting.get(m.id);
            if (done && m.type === "result") {
              waiting.delete(m.id);
              done({ ...m, frames });
            }
          },
        };
      },
      onRefused: () => {},
    });
  });
}

/** Round trips per second with `window` requests in flight, for about `ms`. */
async function rate(call: () => Promise<unknown>, window: number, ms: number): Promise<number> {
  let n = 0;
  const end = performance.now() + ms;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: window }, async () => {
      while (performance.now() < end) {
        await call();
        n++;
      }
    }),
  );
  return n / ((performance.now() - start) / 1000);
}

async function bestOf(times: number, f: () => Promise<void> | void): Promise<number> {
  let best = Infinity;
  for (let i = 0; i < times; i++) {
    const t = performance.now();
    await f();
    best = Math.min(best, performance.now() - t);
  }
  return best / 1000;
}

const gbps = (bytes: number, s: number): number => bytes / s / 1e9;
const fmt = (x: number, d = 2): string => x.toFixed(d);

/** Start the echo thread against `sup`'s broker; close() lets it shut its socket itself. */
async function startThreadEcho(sup: Supervisor) {
  const key = newWorkerKey();
  const thread = new Worker(
    // Worker threads do not inherit tsx's loader: register it, then load this file.
    `import("tsx/esm/api").then((m) => { m.register(); return import(${JSON.stringify(import.meta.url)}); })`,
    { eval: true, workerData: { endpoint: sup.endpoint, key } },
  );
  const client = await threadClient(sup.broker, key);
  return {
    client,
    async close(): Promise<void> {
      // Terminating a thread under a live zeromq socket aborts the process: ask it to stop.
      const exited = new Promise((r) => thread.once("exit", r));
      await client.peer.send({ v: PROTOCOL_VERSION, type: "shutdown", id: "bench-end" });
      await Promise.race([exited, new Promise((r) => setTimeout(r, 2000))]);
    },
  };
}

async function main(): Promise<void> {
  const sup = await Supervisor.start({ spawn: { heartbeatIntervalMs: 1000 } });
  const ipcSup = await Supervisor.start({ transport: "ipc" });
  const tcpThread = await startThreadEcho(sup);
  const ipcThread = await startThreadEcho(ipcSup);
  const py = await sup.spawn({ name: "bench-python-echo", command: venvPython(), args: ["-u", join(REPO_ROOT, "test", "fixtures", "workers", "echo.py")] });

  console.log("# memlane transport benchmark");
  console.log(`node ${process.version}, libzmq ${zmq.version}, ${sup.endpoint} and ${ipcSup.endpoint}\n`);

  // 1. small messages
  const small = async (label: string, call: () => Promise<unknown>): Promise<[number, number]> => {
    await rate(call, 1, 200); // warm-up
    const seq = await rate(call, 1, 2000);
    const piped = await rate(call, 64, 2000);
    console.log(`${label.padEnd(36)} ${fmt(seq, 0).padStart(7)} msg/s sequential (${fmt(1e6 / seq, 0)} µs round trip)  ${fmt(piped, 0).padStart(7)} msg/s with 64 in flight`);
    return [seq, piped];
  };
  const [tSeq, tPiped] = await small("small msgs, Node DEALER thread, tcp", () => tcpThread.client.call());
  await small("small msgs, Node DEALER thread, ipc", () => ipcThread.client.call());
  const [pSeq, pPiped] = await small("small msgs, Python echo fixture, tcp", () => py.run("echo", { i: 1 }));
  console.log(`  ratio Python/Node (tcp): sequential ${fmt(pSeq / tSeq)}, in flight ${fmt(pPiped / tPiped)}\n`);

  // 2. 64 MiB float32 round trip
  const data = new Float32Array(TENSOR_BYTES / 4).map((_, i) => i);
  const src = Buffer.from(data.buffer);
  const dst = Buffer.allocUnsafe(TENSOR_BYTES);
  const copyS = await bestOf(5, () => void src.copy(dst));
  const copyGbps = gbps(TENSOR_BYTES, copyS);
  const tensor = { x: { dtype: "float32" as const, shape: [TENSOR_BYTES / 4], data } };
  console.log(`64 MiB float32, Buffer.copy in process   ${fmt(copyGbps).padStart(6)} GB/s (${fmt(copyS * 1000, 1)} ms)`);
  // A round trip moves the bytes twice (out and back): its GB/s counts both.
  const bulk = async (label: string, call: () => Promise<Result & { frames: Buffer[] }> | Promise<unknown>): Promise<void> => {
    const s = await bestOf(4, async () => void (await call()));
    const g = gbps(2 * TENSOR_BYTES, s);
    console.log(`${label.padEnd(40)} ${fmt(g).padStart(6)} GB/s (${fmt(s * 1000, 1)} ms)  ratio to Buffer.copy ${fmt(g / copyGbps)}`);
  };
  const check = await tcpThread.client.call(tensor);
  const back = decodeTensors(check.tensors, check.frames).x!.data as Float32Array;
  if (back.length !== data.length || back[12345] !== 12345) throw new Error("thread echo returned different bytes");
  await bulk("64 MiB round trip, Node thread, tcp", () => tcpThread.client.call(tensor));
  await bulk("64 MiB round trip, Node thread, ipc", () => ipcThread.client.call(tensor));
  await bulk("64 MiB round trip, Python echo, tcp", () => py.run("echo", {}, { tensors: tensor }));

  await Promise.all([tcpThread.close(), ipcThread.close()]);
  await Promise.all([sup.close(), ipcSup.close()]);

  // 3. shared memory vs frames vs the consumer's own in-process copy (bench/transport-shm.ts)
  const { runShmBench, formatShmRows } = await import("./transport-shm.ts");
  console.log(`\n${formatShmRows(await runShmBench())}`);
}

if (isMainThread) {
  await main();
} else {
  const { workerData } = await import("node:worker_threads");
  await echoThread(workerData as { endpoint: string; key: Uint8Array });
}
