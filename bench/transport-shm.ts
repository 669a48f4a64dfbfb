/**
 * Shared memory against frames and against an in-process copy, side by side in one run, for
 * one 64 MiB float32 tensor whose consumer is a Python worker.
 *
 * Method. Every row is the same round trip, timed in this process: a task message goes to one
 * Python receiver (a DEALER that decodes with python/memlane_worker/codec.py + shm.py, as a
 * worker does), the receiver gets at the tensor's bytes the row's way and reads every byte (a
 * uint32 sum), then answers with the sum. GB/s = tensor bytes / median round trip. The rows
 * differ only in how the consumer gets at the bytes:
 *   in-process copy (fresh)  the consumer and the tensor share a process: it takes its own
 *                            copy into a new buffer (numpy .copy(): 64 MiB is a fresh mmap, so
 *                            page faults + copy), sums it, frees it
 *   in-process copy (warm)   the same into a buffer it keeps between tasks (np.copyto)
 *   in-process, no copy      sums the producer's array itself: the floor for any transport
 *   frames                   the tensor as a ZeroMQ frame over tcp loopback
 *   shm, new segment/send    the sender copies the tensor into a new segment (pwrite; "mmap"
 *                            variant: memcpy through the addon's mapping), the receiver maps
 *                            it and sums it and unmaps it, the segment is unlinked: one copy
 *                            into fresh pages, like the fresh in-process copy
 *   shm, produced in place   the tensor lives in its own segment (ShmRegistry.allocateTensor,
 *                            filled once before timing, as a producer computing into it would)
 *                            and is sent every time; the receiver's mapping cache maps it once.
 *                            "uncached": the same with the receiver's cache entry dropped after
 *                            each task (a fresh mapping and its page faults every time)
 * The in-process rows run in the receiver (the consumer's language and runtime) on a private
 * copy of the same bytes; every row sums the same bytes, with the same reps, one warm-up round,
 * and rows interleaved round by round so that load from other processes falls on all alike.
 * Every row must return the same sum. Host memory is a second pass, one mode at a time: RSS
 * of sender and receiver before, their peak during (VmHWM after clear_refs plus 2 ms samples)
 * and the receiver's RssAnon/RssShmem while it holds the tensor (a copy is anonymous memory,
 * a mapped segment is shared), with the receiver's cached mappings dropped before each mode.
 * The sender's RSS includes the two in-place segments (mapped and filled before timing). `node --import tsx bench/transport-shm.ts` runs it alone.
 */
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { resetPeak } from "../src/memory/proc.ts";
import { newWorkerKey } from "../src/transport/auth.ts";
import { Broker, type Peer } from "../src/transport/broker.ts";
import { encodeTensors, type Tensor } from "../src/transport/codec.ts";
import { ENV_WORKER_KEY, PROTOCOL_VERSION, type Message } from "../src/transport/protocol.ts";
import { encodeTensorsShm, shmBackend, ShmRegistry, type ShmSegment } from "../src/transport/shm.ts";

const root = resolve(fileURLToPath(import.meta.url), "..", "..");

export interface ShmBenchOptions {
  /** Tensor size in MiB (default 64). */
  mib?: number;
  /** Timed rounds after one warm-up round (default 9). */
  reps?: number;
  python?: string;
  addonPath?: string;
}

export const SHM_BENCH_MODES = [
  "in-process copy (fresh)", "in-process copy (warm)", "in-process, no copy",
  "frames", "shm, new segment/send", "shm, new segment/send (mmap)",
  "shm, produced in place", "shm, in place (uncached)",
] as const;
export type ShmBenchMode = (typeof SHM_BENCH_MODES)[number];

export interface ShmBenchRow {
  mode: ShmBenchMode;
  mib: number;
  /** Median round trip: task sent → answer with the sum. */
  medianMs: number;
  gbPerS: number;
  /** Sender's share: building the message (the copy into a new segment for shm). */
  sendMs: number;
  /** Receiver's share, timed by itself: get at the bytes + sum them (+ free/unmap). */
  receiverMs: number;
  senderRssMiB: number | null;
  senderPeakMiB: number | null;
  receiverRssMiB: number | null;
  receiverPeakMiB: number | null;
  /** Receiver's RssAnon / RssShmem while it holds the tensor. */
  receiverAnonMiB: number | null;
  receiverShmemMiB: number | null;
}

// The consumer. "setup" keeps a private copy of the tensor (for the in-process rows) and a
// warm buffer; every other task gets at the bytes its mode's way and sums them as uint32.
const RECEIVER = String.raw`
import os, sys, time
sys.path.insert(0, sys.argv[2])
import msgpack, numpy as np, zmq
from memlane_worker import auth, codec, shm
s = zmq.Context.instance().socket(zmq.DEALER)
s.connect(sys.argv[1])
key = auth.take_key()
s.send(msgpack.packb({"v": 1, "type": "hello", "id": "bench-shm-hello", "pid": os.getpid(), "worker": "bench", "capabilities": ["consume"], "versions": {},
                      "auth": auth.hello_auth(key, "bench-shm-hello", os.getpid())}))
src = warm = None
def total(a):
    return int(a.reshape(-1).view(np.uint32).sum(dtype=np.uint64))
def status():
    f = {l.split(":")[0]: int(l.split()[1]) for l in open("/proc/self/status") if l.startswith(("RssAnon:", "RssShmem:"))}
    return f["RssAnon"], f["RssShmem"]
while True:
    parts = s.recv_multipart(copy=False)
    env = msgpack.unpackb(parts[0].bytes)
    if env["type"] == "shutdown":
        break
    if env["type"] != "task":
        continue
    mode = env["args"]["mode"]
    t0 = time.perf_counter()
    if mode == "setup":
        src = codec.decode(env.get("tensors"), parts[1:])["x"].copy()
        warm = np.empty_like(src); np.copyto(warm, src)
        arrays = {"x": src}
    elif mode == "forget":
        shm._cache.clear(); arrays = {}
    elif mode == "in-process copy (fresh)":
        arrays = {"x": src.copy()}
    elif mode == "in-process copy (warm)":
        np.copyto(warm, src); arrays = {"x": warm}
    elif mode == "in-process, no copy":
        arrays = {"x": src}
    else:
        arrays = codec.decode(env.get("tensors"), parts[1:])
    value = sum(total(a) for a in arrays.values())
    anon, shmem = status()  # while the tensor is held
    del arrays, parts
    if env["args"].get("dropMapping"):
        # this segment is never sent again: unmap it inside this task, as a consumer without
        # the cache would (else the unmap lands in whichever task looks up a segment next)
        for ref in env.get("tensors") or []:
            shm._cache.pop(ref["shm"]["segment"], None)
    ms = (time.perf_counter() - t0) * 1000
    s.send(msgpack.packb({"v": 1, "type": "result", "id": env["id"], "value": {"sum": value, "ms": ms, "anonKiB": anon, "shmemKiB": shmem}}))
`;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const mib = (kib: number | undefined | null) => (kib === undefined || kib === null ? null : Math.round((kib / 1024) * 10) / 10);

function statusKiB(pid: number): { rss: number; hwm: number } | undefined {
  try {
    const f = Object.fromEntries(readFileSync(`/proc/${pid}/status`, "utf8").split("\n").map((l) => [l.split(":")[0], parseInt(l.split(/\s+/)[1] ?? "", 10)]));
    return { rss: f.VmRSS, hwm: f.VmHWM };
  } catch {
    return undefined;
  }
}

/** Peak RSS of some pids while `work` runs: max of VmHWM (after a reset) and 2 ms samples. */
async function peakDuring<T>(pids: number[], work: () => Promise<T>): Promise<{ result: T; peaks: (number | undefined)[] }> {
  await Promise.all(pids.map((p) => resetPeak(p)));
  const peaks: (number | undefined)[] = pids.map(() => undefined);
  const note = (i: number, kib: number | undefined) => { if (kib !== undefined) peaks[i] = Math.max(peaks[i] ?? 0, kib); };
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      pids.forEach((p, i) => note(i, statusKiB(p)?.rss));
      await new Promise((r) => setTimeout(r, 2));
    }
  })();
  const result = await work();
  sampling = false;
  await sampler;
  pids.forEach((p, i) => note(i, statusKiB(p)?.hwm));
  return { result, peaks };
}

export async function runShmBench(options: ShmBenchOptions = {}): Promise<ShmBenchRow[]> {
  const size = (options.mib ?? 64) << 20;
  const reps = options.reps ?? 9;
  const python = options.python ?? join(root, ".venv", "bin", "python");
  if (!existsSync(python)) throw new Error(`bench needs the worker venv at ${python}: run npm run bootstrap`);
  const data = new Float32Array(size / 4);
  for (let i = 0; i < data.length; i++) data[i] = (i * 2654435761) % 1e6; // every page distinct, nothing compressible
  const tensor: Record<string, Tensor> = { x: { dtype: "float32", shape: [data.length], data } };
  const addon = shmBackend(options.addonPath).kind === "addon";
  const modes = SHM_BENCH_MODES.filter((m) => addon || !m.includes("mmap") && !m.includes("place"));

  const broker = await Broker.bind();
  const key = newWorkerKey();
  const child = spawn(python, ["-c", RECEIVER, broker.endpoint, join(root, "python")], {
    stdio: ["ignore", "inherit", "inherit"], env: { ...process.env, [ENV_WORKER_KEY]: key.toString("hex") },
  });
  const waiting = new Map<string, (m: Message) => void>();
  const registry = new ShmRegistry({ runId: `bench-${Date.now()}`, addonPath: options.addonPath });
  try {
    const peer = await new Promise<Peer>((res, rej) => {
      broker.expect({
        key,
        pid: child.pid,
        onHello: (_h, p) => { res(p); return { onMessage: (m) => waiting.get(m.id)?.(m) }; },
        onRefused: (e) => rej(new Error(e.message)),
      });
      child.once("exit", (c) => rej(new Error(`bench receiver exited (${c}) before hello`)));
    });
    // Produced in place: each "in place" row has its own segment, filled before timing.
    const inPlace = new Map<ShmBenchMode, Tensor>();
    if (addon) {
      for (const m of ["shm, produced in place", "shm, in place (uncached)"] as const) {
        const { tensor: t } = registry.allocateTensor("float32", [data.length]);
        (t.data as Float32Array).set(data);
        inPlace.set(m, t);
      }
    }
    let seq = 0;
    const sums = new Set<unknown>();
    const send = async (mode: ShmBenchMode | "setup" | "forget") => {
      const id = `bench-${seq++}`;
      const answered = new Promise<Message>((res) => waiting.set(id, res));
      const t = performance.now();
      let enc: { refs: unknown[]; frames: Buffer[]; segment: ShmSegment | null } = { refs: [], frames: [], segment: null };
      if (mode === "frames" || mode === "setup") enc = { ...encodeTensors(tensor), segment: null };
      else if (mode.startsWith("shm, new")) enc = encodeTensorsShm(tensor, registry, 0, { mapped: mode.includes("mmap") });
      else if (inPlace.has(mode as ShmBenchMode)) enc = encodeTensorsShm({ x: inPlace.get(mode as ShmBenchMode)! }, registry);
      const sendMs = performance.now() - t;
      const dropMapping = mode.startsWith("shm, new") || mode.includes("uncached");
      await peer.send({ v: PROTOCOL_VERSION, type: "task", id, task: "consume", args: { mode, dropMapping }, tensors: enc.refs as never }, enc.frames);
      const reply = await answered;
      if (enc.segment) registry.release(enc.segment.name);
      const ms = performance.now() - t;
      waiting.delete(id);
      if (reply.type !== "result") throw new Error(`receiver answered ${JSON.stringify(reply)}`);
      if (mode !== "forget") sums.add(reply.value.sum);
      return { ms, sendMs, recvMs: reply.value.ms as number, anon: reply.value.anonKiB as number, shmem: reply.value.shmemKiB as number };
    };
    await send("setup");

    // Timing: one warm-up round, then `reps` rounds, each round every mode once, in order.
    const samples = new Map(modes.map((m) => [m, { ms: [] as number[], send: [] as number[], recv: [] as number[] }]));
    for (let round = 0; round <= reps; round++) {
      for (const m of modes) {
        const r = await send(m);
        if (round === 0) continue;
        const s = samples.get(m)!;
        s.ms.push(r.ms); s.send.push(r.sendMs); s.recv.push(r.recvMs);
      }
    }
    // Memory: one mode at a time, two sends each, peaks of both processes; the receiver's
    // cached mappings are dropped first, so that a row shows its own mapping only.
    const rows: ShmBenchRow[] = [];
    for (const m of modes) {
      await send("forget");
      const before = [statusKiB(process.pid), statusKiB(child.pid!)];
      let anon = 0, shmem = 0;
      const { peaks } = await peakDuring([process.pid, child.pid!], async () => {
        for (let i = 0; i < 2; i++) { const r = await send(m); anon = Math.max(anon, r.anon); shmem = Math.max(shmem, r.shmem); }
      });
      const s = samples.get(m)!;
      rows.push({ mode: m, mib: size / 2 ** 20, medianMs: median(s.ms), gbPerS: size / median(s.ms) / 1e6,
        sendMs: median(s.send), receiverMs: median(s.recv),
        senderRssMiB: mib(before[0]?.rss), senderPeakMiB: mib(peaks[0]),
        receiverRssMiB: mib(before[1]?.rss), receiverPeakMiB: mib(peaks[1]),
        receiverAnonMiB: mib(anon), receiverShmemMiB: mib(shmem) });
    }
    if (sums.size !== 1) throw new Error(`rows summed different bytes (sums ${[...sums].join(", ")})`);
    await peer.send({ v: PROTOCOL_VERSION, type: "shutdown", id: "bench-bye" });
    return rows;
  } finally {
    registry.close();
    setTimeout(() => child.kill("SIGKILL"), 2000).unref();
    await broker.close();
  }
}

const f = (v: number | null, d = 1) => (v === null ? "n/a" : v.toFixed(d));

/** A table plus the ratios that matter, measured in this one run. */
export function formatShmRows(rows: ShmBenchRow[], addonPath?: string): string {
  const b = shmBackend(addonPath);
  const lines = [
    `shared memory vs frames vs an in-process copy: ${rows[0]?.mib ?? 0} MiB float32 tensor, consumer = a Python worker that reads every byte (uint32 sum) (shm backend: ${b.kind}${b.reason ? `; ${b.reason}` : ""})`,
    "method: every row is the same round trip (task → consumer gets at the bytes + sums them → answer), GB/s = bytes / median; rows interleaved round by round, same reps, one warm-up round; in-process rows run in the consumer on a private copy of the same bytes",
    "mode                           median ms    GB/s  send ms  recv ms   sender RSS→peak MiB  receiver RSS→peak MiB  receiver holding anon/shmem MiB",
    ...rows.map((r) => `${r.mode.padEnd(30)} ${f(r.medianMs, 2).padStart(9)} ${f(r.gbPerS, 2).padStart(7)} ${f(r.sendMs, 1).padStart(8)} ${f(r.receiverMs, 1).padStart(8)}   ${`${f(r.senderRssMiB)} → ${f(r.senderPeakMiB)}`.padEnd(19)}  ${`${f(r.receiverRssMiB)} → ${f(r.receiverPeakMiB)}`.padEnd(21)}  ${f(r.receiverAnonMiB)} / ${f(r.receiverShmemMiB)}`),
    "(send ms: building the message, incl. the copy into a new segment; recv ms: the consumer's own time to get at the bytes and sum them; the receiver's RSS includes its private copy of the tensor for the in-process rows)",
  ];
  const by = (m: ShmBenchMode) => rows.find((r) => r.mode === m);
  const ratio = (a: ShmBenchMode, c: ShmBenchMode, note = "") => {
    const x = by(a), y = by(c);
    if (x && y) lines.push(`${a} / ${c}: ${(x.gbPerS / y.gbPerS).toFixed(2)}×${note}`);
  };
  ratio("shm, produced in place", "in-process copy (fresh)");
  ratio("shm, produced in place", "in-process copy (warm)");
  ratio("shm, produced in place", "in-process, no copy", " (the floor: the sum alone)");
  ratio("shm, in place (uncached)", "in-process copy (fresh)", " (a fresh mapping every task)");
  ratio("shm, produced in place", "shm, in place (uncached)", " (what the receiver's mapping cache buys)");
  ratio("shm, new segment/send", "in-process copy (fresh)", " (both: one copy into fresh pages)");
  ratio("shm, new segment/send", "frames");
  return lines.join("\n");
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const addonPath = process.env.MEMLANE_ADDON;
  runShmBench({ addonPath }).then(
    (rows) => console.log(formatShmRows(rows, addonPath)),
    (err) => { console.error(err); process.exitCode = 1; },
  );
}
