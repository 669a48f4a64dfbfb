/**
 * Shared memory against frames, side by side in one run: a 64 MiB float32 tensor sent from
 * this process to a Python receiver that decodes it with the real worker codec and reads
 * every byte (a uint32 sum), answering with the sum. GB/s = tensor bytes / (send → answer)
 * median; the in-process row is one typed-array copy of the same bytes, the ceiling.
 * Modes: frames (zeromq, tcp loopback), shm (a new segment per send, filled with pwrite),
 * shm (mmap+copy) (the same through the addon's mapping), shm (written once) (one segment
 * sent again each time: the receiver's side alone).
 * Host memory: each process's RSS before the mode and its peak during it (VmHWM after a
 * clear_refs reset), from /proc. bench/transport.ts imports runShmBench/formatShmRows;
 * `node --import tsx bench/transport-shm.ts` runs it alone.
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { readProcessMemory, resetPeak } from "../src/memory/proc.ts";
import { Broker, type Peer } from "../src/transport/broker.ts";
import { encodeTensors, type Tensor } from "../src/transport/codec.ts";
import { PROTOCOL_VERSION, type Message } from "../src/transport/protocol.ts";
import { encodeTensorsShm, shmBackend, ShmRegistry } from "../src/transport/shm.ts";

const root = resolve(fileURLToPath(import.meta.url), "..", "..");

export interface ShmBenchOptions {
  /** Tensor size in MiB (default 64). */
  mib?: number;
  /** Timed repetitions per mode after one warm-up (default 5). */
  reps?: number;
  python?: string;
  addonPath?: string;
}

export interface ShmBenchRow {
  mode: "in-process copy" | "frames" | "shm" | "shm (mmap+copy)" | "shm (written once)";
  mib: number;
  medianMs: number;
  gbPerS: number;
  /** Sender's share: building the message (the copy into the segment for shm). */
  encodeMs: number | null;
  /** Receiver's share: decode (map) and read every byte, timed in the receiver. */
  receiverMs: number | null;
  senderRssMiB: number | null;
  senderPeakMiB: number | null;
  receiverRssMiB: number | null;
  receiverPeakMiB: number | null;
  /** Receiver RSS read by itself while holding the tensor (catches mapped shm pages). */
  receiverHoldMiB: number | null;
}

// The receiver: a DEALER that decodes with python/memlane_worker/codec.py (frames or shm)
// and sums the bytes as uint32, so both paths pay for reading every page.
const RECEIVER = String.raw`
import os, sys, time
sys.path.insert(0, sys.argv[2])
import msgpack, numpy as np, zmq
from memlane_worker import codec
s = zmq.Context.instance().socket(zmq.DEALER)
s.connect(sys.argv[1])
s.send(msgpack.packb({"v": 1, "type": "hello", "id": "bench-shm-hello", "pid": os.getpid(), "worker": "bench", "capabilities": ["consume"], "versions": {}}))
while True:
    parts = s.recv_multipart(copy=False)
    env = msgpack.unpackb(parts[0].bytes)
    if env["type"] == "shutdown":
        break
    if env["type"] != "task":
        continue
    t0 = time.perf_counter()
    arrays = codec.decode(env.get("tensors"), parts[1:])
    total = sum(int(a.reshape(-1).view(np.uint32).sum(dtype=np.uint64)) for a in arrays.values())
    ms = (time.perf_counter() - t0) * 1000
    # RSS while the tensor is still held (frames received, or the segment mapped and read).
    rss = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmRSS:"))
    del arrays, parts
    s.send(msgpack.packb({"v": 1, "type": "result", "id": env["id"], "value": {"sum": total, "ms": ms, "rssKiB": rss}}))
`;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const mib = (kib: number | undefined) => (kib === undefined ? null : Math.round((kib / 1024) * 10) / 10);

async function memory(pid: number) {
  const r = await readProcessMemory(pid);
  return r ? { rss: r.rssKiB, hwm: r.hwmKiB } : undefined;
}

/**
 * Peak RSS of some pids while `work` runs: max of VmHWM (after a reset) and samples every
 * 5 ms (the kernel refreshes VmHWM lazily, so a shared mapping's pages can miss it).
 */
async function peakDuring<T>(pids: number[], work: () => Promise<T>): Promise<{ result: T; peaks: (number | undefined)[] }> {
  await Promise.all(pids.map((p) => resetPeak(p)));
  const peaks: (number | undefined)[] = pids.map(() => undefined);
  const note = (i: number, kib: number | undefined) => { if (kib !== undefined) peaks[i] = Math.max(peaks[i] ?? 0, kib); };
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      await Promise.all(pids.map(async (p, i) => note(i, (await memory(p))?.rss)));
      await new Promise((r) => setTimeout(r, 5));
    }
  })();
  const result = await work();
  sampling = false;
  await sampler;
  await Promise.all(pids.map(async (p, i) => note(i, (await memory(p))?.hwm)));
  return { result, peaks };
}

export async function runShmBench(options: ShmBenchOptions = {}): Promise<ShmBenchRow[]> {
  const size = (options.mib ?? 64) << 20;
  const reps = options.reps ?? 5;
  const python = options.python ?? join(root, ".venv", "bin", "python");
  if (!existsSync(python)) throw new Error(`bench needs the worker venv at ${python}: run npm run bootstrap`);
  const data = new Float32Array(size / 4);
  for (let i = 0; i < data.length; i += 1024) data[i] = i;
  const tensor: Record<string, Tensor> = { x: { dtype: "float32", shape: [data.length], data } };
  const rows: ShmBenchRow[] = [];

  // In-process copy: the same bytes copied once, no second process.
  const dst = new Float32Array(data.length);
  await resetPeak(process.pid); // the peak of this row, not of whatever ran before in this process
  const copyMs: number[] = [];
  for (let i = 0; i <= reps; i++) {
    const t = performance.now();
    dst.set(data);
    if (i > 0) copyMs.push(performance.now() - t);
  }
  const self = await memory(process.pid);
  rows.push({ mode: "in-process copy", mib: size / 2 ** 20, medianMs: median(copyMs), gbPerS: size / median(copyMs) / 1e6,
    encodeMs: median(copyMs), receiverMs: null,
    senderRssMiB: mib(self?.rss), senderPeakMiB: mib(self?.hwm), receiverRssMiB: null, receiverPeakMiB: null, receiverHoldMiB: null });

  const broker = await Broker.bind();
  const child = spawn(python, ["-c", RECEIVER, broker.endpoint, join(root, "python")], { stdio: ["ignore", "inherit", "inherit"] });
  const waiting = new Map<string, (m: Message) => void>();
  const registry = new ShmRegistry({ runId: `bench-${Date.now()}`, addonPath: options.addonPath });
  try {
    const peer = await new Promise<Peer>((res, rej) => {
      broker.expect({
        pid: child.pid,
        onHello: (_h, p) => { res(p); return { onMessage: (m) => waiting.get(m.id)?.(m) }; },
        onRefused: (e) => rej(new Error(e.message)),
      });
      child.once("exit", (c) => rej(new Error(`bench receiver exited (${c}) before hello`)));
    });
    let seq = 0;
    const sums = new Set<unknown>();
    // "written once": one segment filled before the loop and sent again each time, as for an
    // eval set that several workers map (the receiver's cost alone: map + read).
    const once = encodeTensorsShm(tensor, registry);
    const modes = ["frames", "shm", ...(shmBackend(options.addonPath).kind === "addon" ? ["shm (mmap+copy)" as const] : []), "shm (written once)"] as const;
    for (const mode of modes) {
      const before = [await memory(process.pid), await memory(child.pid!)];
      const encodeMs: number[] = [];
      const receiverMs: number[] = [];
      let holdKiB = 0;
      const { result: times, peaks } = await peakDuring([process.pid, child.pid!], async () => {
        const times: number[] = [];
        for (let i = 0; i <= reps; i++) {
          const id = `bench-${seq++}`;
          const answered = new Promise<Message>((res) => waiting.set(id, res));
          const t = performance.now();
          const enc = mode === "frames"
            ? { ...encodeTensors(tensor), segment: null }
            : mode === "shm (written once)"
              ? { ...once, segment: null }
              : encodeTensorsShm(tensor, registry, 0, { mapped: mode !== "shm" });
          const encoded = performance.now() - t;
          await peer.send({ v: PROTOCOL_VERSION, type: "task", id, task: "consume", args: {}, tensors: enc.refs }, enc.frames);
          const reply = await answered;
          if (enc.segment) registry.release(enc.segment.name);
          const ms = performance.now() - t;
          if (reply.type !== "result") throw new Error(`receiver answered ${JSON.stringify(reply)}`);
          sums.add(reply.value.sum);
          if (i === 0) continue;
          times.push(ms);
          encodeMs.push(encoded);
          receiverMs.push(reply.value.ms as number);
          holdKiB = Math.max(holdKiB, reply.value.rssKiB as number);
        }
        return times;
      });
      rows.push({ mode, mib: size / 2 ** 20, medianMs: median(times), gbPerS: size / median(times) / 1e6,
        encodeMs: median(encodeMs), receiverMs: median(receiverMs), receiverHoldMiB: mib(holdKiB),
        senderRssMiB: mib(before[0]?.rss), senderPeakMiB: mib(peaks[0]),
        receiverRssMiB: mib(before[1]?.rss), receiverPeakMiB: mib(peaks[1]) });
    }
    if (sums.size !== 1) throw new Error(`frames and shm delivered different bytes (sums ${[...sums].join(", ")})`);
    await peer.send({ v: PROTOCOL_VERSION, type: "shutdown", id: "bench-bye" });
  } finally {
    registry.close();
    setTimeout(() => child.kill("SIGKILL"), 2000).unref();
    await broker.close();
  }
  return rows;
}

const f = (v: number | null, d = 1) => (v === null ? "n/a" : v.toFixed(d));

/** A table plus the ratios that matter, measured in this one run. */
export function formatShmRows(rows: ShmBenchRow[], addonPath?: string): string {
  const b = shmBackend(addonPath);
  const lines = [
    `shared memory vs frames, ${rows[0]?.mib ?? 0} MiB float32 tensor, Node → Python (shm backend: ${b.kind}${b.reason ? `; ${b.reason}` : ""})`,
    "mode               median ms    GB/s  send ms  recv ms   sender RSS→peak MiB  receiver RSS→peak, holding MiB",
    ...rows.map((r) => `${r.mode.padEnd(18)} ${f(r.medianMs, 2).padStart(9)} ${f(r.gbPerS, 2).padStart(7)} ${f(r.encodeMs, 1).padStart(8)} ${f(r.receiverMs, 1).padStart(8)}   ${`${f(r.senderRssMiB)} → ${f(r.senderPeakMiB)}`.padEnd(19)}  ${r.receiverRssMiB === null ? "—" : `${f(r.receiverRssMiB)} → ${f(r.receiverPeakMiB)}, ${f(r.receiverHoldMiB)}`}`),
    "(median ms: send → answer, round trip; send ms: building the message incl. the copy into shm; recv ms: the receiver's decode + read of every byte)",
  ];
  const by = (m: ShmBenchRow["mode"]) => rows.find((r) => r.mode === m);
  const fr = by("frames"), sh = by("shm"), cp = by("in-process copy"), once = by("shm (written once)");
  if (fr && sh) lines.push(`shm / frames throughput: ${(sh.gbPerS / fr.gbPerS).toFixed(2)}× (a fresh segment per tensor: page allocation is most of it)`);
  if (fr && once) lines.push(`shm written once / frames throughput: ${(once.gbPerS / fr.gbPerS).toFixed(2)}×`);
  if (cp && sh) lines.push(`shm / in-process copy throughput: ${(sh.gbPerS / cp.gbPerS).toFixed(2)}×`);
  return lines.join("\n");
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const addonPath = process.env.MEMLANE_ADDON;
  runShmBench({ addonPath }).then(
    (rows) => console.log(formatShmRows(rows, addonPath)),
    (err) => { console.error(err); process.exitCode = 1; },
  );
}
