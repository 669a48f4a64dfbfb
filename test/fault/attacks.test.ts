// Attacks on the transport, as a local process that can reach the endpoint would make them
// (issue 10): the hijack replay, a hello flood for memlane-rt's slot, fuzzed frames to the
// broker and to memlane-rt, and oversized messages. Seeded (MEMLANE_FAULT_SEED), counts scaled
// by MEMLANE_FAULT_SCALE (npm run fuzz: 100). Every attack ends with no orphans and nothing
// left in TMPDIR or /dev/shm. Each prints one `[attack]` line: attack, tries, outcomes.
import { spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import * as zmq from "zeromq";
import { helloAuth, newWorkerKey } from "../../src/transport/auth.ts";
import { decodeRaw, encodeEnvelope } from "../../src/transport/codec.ts";
import { ErrorCode, PROTOCOL_VERSION, type Message } from "../../src/transport/protocol.ts";
import { pipeline } from "../../src/pipeline/builder.ts";
import { runPipeline } from "../../src/pipeline/run.ts";
import type { Report } from "../../src/report/schema.ts";
import { WorkerError } from "../../src/workers/worker-error.ts";
import { ensureModels } from "../fixtures/onnx/models.ts";
import { memlaneRtBinary, workerSpecs } from "../../src/workers/specs.ts";
import { Supervisor } from "../../src/workers/supervisor.ts";
import { fixture, pidAlive, rejection, waitUntil } from "../integration/supervisor-helpers.ts";
import {
  forgedHello, fuzzMessage, orphans, privateTmp, rng, scaled, SCALE, SEED, shmLeftovers, stolenArgs, streamFrame, type Scratch,
} from "./attack-helpers.ts";

const rtBinary = ((): string | undefined => {
  try {
    return memlaneRtBinary();
  } catch {
    return undefined;
  }
})();
if (!rtBinary) console.log("[attack] memlane-rt attacks skipped: memlane-rt is not built (npm run bootstrap)");

// Made before any test points TMPDIR at its private directory: the models are a shared cache.
const digitsOnnx = ((): string | undefined => {
  try {
    const { dir, manifest } = ensureModels();
    return manifest["digits-cnn"] ? join(dir, manifest["digits-cnn"].onnx) : undefined;
  } catch (err) {
    console.log(`[attack] the pipeline-run attack is skipped: no ONNX fixture models (${(err as Error).message.split("\n")[0]})`);
    return undefined;
  }
})();

let scratch: Scratch;
const pids: number[] = [];
const cleanups: (() => Promise<unknown> | void)[] = [];
const log: string[] = [];

beforeEach(() => {
  scratch = privateTmp();
  pids.length = 0;
  log.length = 0;
});

/**
 * Leftovers of onnxruntime that a pipeline run leaves in TMPDIR today (issue 10, item 5: helper
 * `lifecycle` removes them); tolerated here, and only in the pipeline-run attack, until then.
 */
let tolerated: RegExp[] = [];

afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  expect(await orphans(pids), "worker processes outlived the attack").toEqual([]);
  const left = scratch.leftovers();
  if (left.length > 0 && tolerated.length > 0) console.log(`[attack] TMPDIR leftovers tolerated (not the transport's): ${left.join(", ")}`);
  expect(left.filter((f) => !tolerated.some((t) => t.test(f))), "files left in TMPDIR").toEqual([]);
  tolerated = [];
  expect(shmLeftovers(), "segments left in /dev/shm").toEqual([]);
});

async function supervisor(options: Parameters<typeof Supervisor.start>[0] = {}): Promise<Supervisor> {
  const sup = await Supervisor.start({
    log: (l) => log.push(l),
    ...options,
    spawn: { onProcess: (p) => pids.push(p.pid), ...(options.spawn ?? {}) },
  });
  cleanups.push(() => sup.close());
  return sup;
}

function dealer(endpoint: string): zmq.Dealer {
  const d = new zmq.Dealer({ linger: 0, sendHighWaterMark: 100_000, sendTimeout: 2000 });
  d.connect(endpoint);
  cleanups.push(() => d.close());
  return d;
}

/** Reads everything a socket receives until it closes: what the attacker obtained. */
function drain(d: zmq.Dealer | zmq.Router, into: Buffer[][]): void {
  void (async () => {
    try {
      for await (const parts of d) into.push(parts);
    } catch {
      // closed
    }
  })();
}

const types = (got: Buffer[][], skip = 0): string[] =>
  got.map((p) => (decodeRaw(p[skip]!) as Message).type);

/** Per-test limit: generous at scale 1 (each attack takes seconds), and grown with the counts. */
const LIMIT_MS = 120_000 * SCALE;

const report = (line: string): void => console.log(`[attack] ${line} (seed ${SEED}, scale ${SCALE})`);

describe("the hijack replay", () => {
  it("a hello with the real worker's pid and name, read from /proc/<pid>/cmdline, obtains no task", async () => {
    const r = rng(SEED);
    const sup = await supervisor();
    const spawning = sup.spawn(workerSpecs.python({ name: "python-ort" }));
    // The attacker starts as soon as the worker exists: its hello is still seconds away.
    await waitUntil(() => pids.length > 0 && existsSync(`/proc/${pids[0]}/cmdline`) && stolenArgs(pids[0]!).endpoint !== "");
    const pid = pids[0]!;
    const { endpoint, name } = stolenArgs(pid);
    expect(endpoint).toBe(sup.endpoint);
    const got: Buffer[][] = [];
    const attackers = Array.from({ length: 4 }, () => dealer(endpoint));
    for (const a of attackers) drain(a, got);
    let tries = 0;
    let claimed = false;
    void spawning.finally(() => (claimed = true)).catch(() => {});
    const forge = async (until: () => boolean, max: number): Promise<void> => {
      for (let i = 0; !until() && i < max; i++) {
        // The ids a real hello would carry (python: "<name>-<pid>-1"), and the bare name.
        const id = pick3(r, [`${name}-${pid}-1`, name, `${name}-hello`]);
        await attackers[i % attackers.length]!.send(forgedHello(r, id, pid));
        tries++;
        if (i % 20 === 19) await new Promise((res) => setTimeout(res, 5));
      }
    };
    await forge(() => claimed, scaled(2000));
    const beforeClaim = sup.broker.refused().byReason["bad-auth"] ?? 0;
    const w = await spawning;
    expect(w.pid).toBe(pid);
    expect(beforeClaim, "no forged hello reached the broker before the real one: the replay proved nothing").toBeGreaterThan(0);

    // Slot claimed: forge hellos again, and results for the task ids the orchestrator will use.
    const running = w.run("worker.info", {});
    await forge(() => false, scaled(200));
    let forgedResults = 0;
    for (let t = 1; t <= 5; t++, forgedResults++) {
      await attackers[t % attackers.length]!.send(encodeEnvelope({ v: PROTOCOL_VERSION, type: "result", id: `${name}-${pid}-t${t}`, value: { pid: 1, forged: true } }));
    }
    const result = await running;
    expect(result.value["pid"]).toBe(pid);
    expect(result.value["forged"]).toBeUndefined();
    await waitUntil(() => sup.broker.refused().total >= tries + forgedResults, 10_000);
    const refused = sup.broker.refused();
    expect(refused.byReason["bad-auth"]).toBe(tries);
    expect(refused.byReason["unknown-peer"]).toBe(forgedResults);
    await new Promise((res) => setTimeout(res, 100));
    expect(types(got).filter((t) => t !== "error"), "the attacker received something other than refusals").toEqual([]);
    expect(got.every((p) => (decodeRaw(p[0]!) as { code: number }).code !== ErrorCode.VERSION_MISMATCH)).toBe(true);
    expect(log.some((l) => l.includes("refused (bad-auth)"))).toBe(true);
    report(`hijack replay on python-ort: ${tries} forged hellos (${beforeClaim} before the real one), ${forgedResults} forged results; ` +
      `0 tasks obtained, ${refused.byReason["bad-auth"]} refused bad-auth, ${refused.byReason["unknown-peer"]} refused unknown-peer, the real worker's result kept`);
  }, LIMIT_MS);

  it.skipIf(!rtBinary)("a flood of hello{id:\"native\"} does not win memlane-rt's slot", async () => {
    const r = rng(SEED + 1);
    const sup = await supervisor();
    const attackers = Array.from({ length: 8 }, () => dealer(sup.endpoint));
    const got: Buffer[][] = [];
    for (const a of attackers) drain(a, got);
    let tries = 0;
    let claimed = false;
    // The flood runs from before the spawn until well after memlane-rt's hello.
    const flood = (async () => {
      const target = scaled(5000);
      for (let i = 0; tries < target; i++) {
        const pid = pids[0] ?? process.pid + 1 + (i % 50);
        await attackers[i % attackers.length]!.send(forgedHello(r, pick3(r, ["native", `native-${pid}`, "memlane-rt"]), pid));
        tries++;
        if (i % 50 === 49) await new Promise((res) => setTimeout(res, claimed ? 0 : 2));
      }
    })();
    await new Promise((res) => setTimeout(res, 50));
    const w = await sup.spawn(workerSpecs.memlaneRt({ name: "native", args: ["--threads", "1"] }));
    claimed = true;
    const duringSpawn = sup.broker.refused().byReason["bad-auth"] ?? 0;
    expect(duringSpawn, "no forged hello reached the broker before memlane-rt's: the flood proved nothing").toBeGreaterThan(0);
    expect(w.hello.worker).toBe("memlane-rt");
    expect(w.hello.pid).toBe(w.pid);
    // memlane-rt overwrote its key where /proc/<pid>/environ shows it.
    const environ = readFileSync(`/proc/${w.pid}/environ`, "latin1").split("\0");
    expect(environ).toContain(`MEMLANE_WORKER_KEY=${"x".repeat(64)}`);
    // The slot answers as memlane-rt does: `run` with no model loaded is its own refusal.
    const err = await rejection<WorkerError>(w.run("run", {}));
    expect(err.worker?.pid).toBe(w.pid);
    await flood;
    await waitUntil(() => (sup.broker.refused().byReason["bad-auth"] ?? 0) >= tries, 10_000);
    expect(sup.broker.refused().byReason["bad-auth"]).toBe(tries);
    expect(types(got).filter((t) => t !== "error")).toEqual([]);
    expect(w.alive).toBe(true);
    report(`hello flood on memlane-rt's slot: ${tries} forged hellos from 8 connections (${duringSpawn} before its hello), 0 slots won, ` +
      `${sup.broker.refused().byReason["bad-auth"]} refused bad-auth, ${got.length} error replies (at most 100 a connection)`);
  }, LIMIT_MS);
});

describe("fuzzed frames", () => {
  it(`${scaled(10_000)} fuzzed messages from strangers and ${scaled(2000)} from an admitted peer do not stop the broker`, async () => {
    const r = rng(SEED + 2);
    const sup = await supervisor();
    const echo = await sup.spawn(fixture("echo"));
    const key = newWorkerKey();
    let delivered = 0;
    sup.broker.expect({ key, name: "fuzz", onHello: () => ({ onMessage: () => void delivered++ }), onRefused: () => {} });
    const admitted = dealer(sup.endpoint);
    await admitted.send(encodeEnvelope({ v: PROTOCOL_VERSION, type: "hello", id: "fz", pid: process.pid, worker: "fuzz", capabilities: [], versions: {}, auth: helloAuth(key, "fz", process.pid) }));
    const strangers = Array.from({ length: 4 }, () => dealer(sup.endpoint));
    const got: Buffer[][] = [];
    for (const d of [admitted, ...strangers]) drain(d, got);
    const t0 = Date.now();
    const nStrange = scaled(10_000);
    const nAdmitted = scaled(2000);
    for (let i = 0; i < nStrange + nAdmitted; i++) {
      const msg = fuzzMessage(r);
      await (i < nAdmitted ? admitted : strangers[i % strangers.length]!).send(msg);
      if (i % 1000 === 999) expect((await echo.run("echo", { i })).value["args"]).toEqual({ i });
    }
    const settled = (): number => sup.broker.refused().total + delivered;
    await waitUntil(() => settled() >= nStrange + nAdmitted, 30_000);
    const refused = sup.broker.refused();
    expect(settled()).toBe(nStrange + nAdmitted); // each refused once or delivered once: nothing lost, nothing twice
    expect(Object.values(refused.byReason).reduce((a, b) => a + b, 0)).toBe(refused.total);
    expect((await echo.run("echo", { after: true })).value["args"]).toEqual({ after: true });
    expect(echo.alive).toBe(true);
    report(`fuzzed frames to the broker: ${nStrange} from 4 strangers + ${nAdmitted} from an admitted peer in ${Date.now() - t0} ms; ` +
      `${refused.total} refused (${JSON.stringify(refused.byReason)}), ${delivered} delivered to the admitted peer's handler, ` +
      `${got.length} error replies; broker and echo worker kept serving`);
  }, LIMIT_MS);

  it.skipIf(!rtBinary)(`${scaled(10_000)} fuzzed messages over memlane-rt's real socket: it keeps serving and never crashes`, async () => {
    const r = rng(SEED + 3);
    const router = new zmq.Router({ linger: 0, sendHighWaterMark: 100_000 });
    await router.bind("tcp://127.0.0.1:0");
    cleanups.push(() => router.close());
    const child = spawn(rtBinary!, ["--connect", router.lastEndpoint!, "--name", "rt-fuzz", "--heartbeat-timeout", "0", "--threads", "1"], {
      stdio: ["ignore", "ignore", "ignore"],
    });
    pids.push(child.pid!);
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((res) => child.once("exit", (code, signal) => res({ code, signal })));
    cleanups.push(() => void child.kill("SIGKILL"));
    const heard = new Map<string, number>();
    const answered = new Map<string, Message>();
    let replies = 0;
    let identity: Buffer | undefined;
    void (async () => {
      try {
        for await (const [id, env] of router) {
          identity ??= id;
          replies++;
          const m = decodeRaw(env!) as Message;
          if (m.type === "heartbeat") heard.set(m.id, Date.now());
          else answered.set(m.id, m);
        }
      } catch {
        // closed
      }
    })();
    expect(await waitUntil(() => identity !== undefined, 10_000), "memlane-rt sent no hello").toBe(true);
    const n = scaled(10_000);
    const t0 = Date.now();
    for (let i = 0; i < n; i++) {
      await router.send([identity!, ...fuzzMessage(r, true)]);
      if (i % 500 === 499) {
        // Still serving: a heartbeat comes back (and the fuzzer waits for it, so queues stay short).
        const id = `alive-${i}`;
        await router.send([identity!, encodeEnvelope({ v: PROTOCOL_VERSION, type: "heartbeat", id })]);
        expect(await waitUntil(() => heard.has(id), 15_000), `memlane-rt stopped answering after ${i + 1} fuzzed messages`).toBe(true);
      }
    }
    expect(pidAlive(child.pid)).toBe(true);
    await router.send([identity!, encodeEnvelope({ v: PROTOCOL_VERSION, type: "shutdown", id: "end" })]);
    const end = await exited;
    expect(end, "memlane-rt must exit 0 on shutdown after the fuzz (a crash shows as a signal)").toEqual({ code: 0, signal: null });

    // A frame over its limit: libzmq drops that connection before allocating; memlane-rt lives on.
    const small = spawn(rtBinary!, ["--connect", router.lastEndpoint!, "--name", "rt-big", "--heartbeat-timeout", "0", "--threads", "1"], {
      stdio: ["ignore", "ignore", "ignore"], env: { ...process.env, MEMLANE_MAX_MESSAGE_BYTES: String(2 ** 20) },
    });
    pids.push(small.pid!);
    const smallExit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((res) => small.once("exit", (code, signal) => res({ code, signal })));
    cleanups.push(() => void small.kill("SIGKILL"));
    identity = undefined;
    expect(await waitUntil(() => identity !== undefined, 10_000), "the second memlane-rt sent no hello").toBe(true);
    // Its own reply over the limit (an unknown type of 0.6 MiB is quoted twice) becomes a small TASK_FAILED.
    await router.send([identity!, encodeEnvelope({ v: PROTOCOL_VERSION, type: "x".repeat(600_000), id: "echoed" })]);
    expect(await waitUntil(() => answered.has("echoed"), 10_000), "no answer to the unknown type").toBe(true);
    const echoed = answered.get("echoed") as Message & { code: number; message: string };
    expect(echoed.code).toBe(ErrorCode.TASK_FAILED);
    expect(echoed.message).toMatch(/^message of \d+ bytes exceeds the limit of 1048576 bytes/);
    await router.send([identity!, encodeEnvelope({ v: PROTOCOL_VERSION, type: "task", id: "big", task: "run", args: {} }), Buffer.alloc(2 ** 21)]);
    await router.send([identity!, encodeEnvelope({ v: PROTOCOL_VERSION, type: "task", id: "small", task: "run", args: {} }), Buffer.alloc(16)]);
    await new Promise((res) => setTimeout(res, 300));
    expect(pidAlive(small.pid), "memlane-rt died of a frame over its limit").toBe(true);
    expect(answered.has("big"), "memlane-rt read a frame over its limit").toBe(false);
    expect(answered.has("small"), "the connection was not dropped: the message after the big one was answered").toBe(false);
    small.kill("SIGTERM");
    expect(await smallExit).toEqual({ code: null, signal: "SIGTERM" });
    report(`fuzzed frames to memlane-rt: ${n} messages over its DEALER in ${Date.now() - t0} ms, ${replies} replies, ` +
      `${heard.size} liveness heartbeats answered, 0 crashes, exit 0 on shutdown; its own 1.2 MB reply became a TASK_FAILED, a 2 MiB frame over a 1 MiB limit dropped its connection, the process lived on`);
  }, LIMIT_MS);
});

describe("oversized messages", () => {
  it("a 1 GiB frame from a stranger is refused from its header, while a task runs to completion", async () => {
    const sup = await supervisor();
    const echo = await sup.spawn(fixture("echo"));
    const rssBefore = process.memoryUsage().rss;
    const task = echo.run("sleep", { ms: 1500 });
    const t0 = Date.now();
    const attack = await streamFrame(sup.endpoint, 2 ** 30);
    const rssAfter = process.memoryUsage().rss;
    expect(attack.closedEarly, "the broker read the whole 1 GiB frame").toBe(true);
    expect(attack.written).toBeLessThan(2 ** 30);
    expect((rssAfter - rssBefore) / 2 ** 20, "orchestrator RSS grew by the frame").toBeLessThan(64);
    expect((await task).value).toEqual({ slept: 1500 });
    expect((await echo.run("echo", { after: 1 })).value["args"]).toEqual({ after: 1 });
    report(`1 GiB frame from a stranger: connection closed by the broker after ${(attack.written / 2 ** 20).toFixed(0)} MiB written ` +
      `(${Date.now() - t0} ms), orchestrator RSS ${((rssAfter - rssBefore) / 2 ** 20).toFixed(1)} MiB higher, the running task completed`);
  }, LIMIT_MS);

  it("an admitted worker's frame over the limit, or frames over it together, drop that worker at once, never the run", async () => {
    const limit = 2 ** 20;
    const sup = await supervisor({ maxMessageBytes: limit });
    const [big, split, bystander] = await Promise.all([
      sup.spawn(fixture("echo", "big")), sup.spawn(fixture("echo", "split")), sup.spawn(fixture("echo", "bystander")),
    ]);
    const t0 = Date.now();
    const e1 = await rejection<WorkerError>(big.run("blob", { bytes: 2 * limit, frames: 1 }));
    const t1 = Date.now() - t0;
    const e2 = await rejection<WorkerError>(split.run("blob", { bytes: 0.6 * limit, frames: 2 }));
    expect(e1.code).toBe(ErrorCode.WORKER_DIED);
    expect(e1.message).toMatch(/was dropped by the broker: its connection is gone/);
    expect(e2.code).toBe(ErrorCode.WORKER_DIED);
    expect(e2.message).toMatch(/was dropped by the broker: it sent a message of \d+ bytes in 3 frames exceeds the limit of 1048576 bytes/);
    expect(t1, "dropped at the heartbeat timeout instead of at its next heartbeat").toBeLessThan(5000);
    const refused = sup.broker.refused();
    expect(refused.byReason).toMatchObject({ dropped: 1, oversized: 1 });
    // A task whose own tensors exceed the limit is refused before it is sent.
    const e3 = await rejection<WorkerError>(bystander.run("echo", {}, { tensors: { x: { dtype: "uint8", shape: [limit], data: new Uint8Array(limit) } } }));
    expect(e3.code).toBe(ErrorCode.INVALID_ARGUMENT);
    expect(e3.message).toMatch(/over the message limit of 1048576 bytes; raise maxMessageBytes/);
    expect((await bystander.run("echo", { ok: 1 })).value["args"]).toEqual({ ok: 1 });
    report(`oversized from admitted workers (limit 1 MiB): a 2 MiB frame dropped its worker in ${t1} ms, 2 x 0.6 MiB frames refused as oversized ` +
      `and dropped, a 1 MiB task refused before sending; the bystander kept serving`);
  }, LIMIT_MS);
});

describe("a pipeline run under attack", () => {
  it.skipIf(!digitsOnnx)("completes with the real worker's figures, and its report's notes count what was refused", async () => {
    const r = rng(SEED + 4);
    tolerated = [/^\.ses$/, /^mat-debug-\d+\.log$/];
    const outDir = join(scratch.dir, "runs");
    cleanups.push(() => rmSync(outDir, { recursive: true, force: true }));
    // The attacker watches for the run's workers, reads each one's endpoint and name from its
    // cmdline, forges its hello, and streams a 1 GiB frame at the broker.
    let done = false;
    let forged = 0;
    const frames: Array<Promise<{ written: number; closedEarly: boolean }>> = [];
    const got: Buffer[][] = [];
    const seen = new Set<number>();
    const attacker = (async () => {
      while (!done) {
        for (const pid of childWorkers()) {
          if (seen.has(pid)) continue;
          seen.add(pid);
          pids.push(pid);
          const { endpoint, name } = stolenArgs(pid);
          const d = dealer(endpoint);
          drain(d, got);
          frames.push(streamFrame(endpoint, 2 ** 30));
          for (let i = 0; i < scaled(200); i++, forged++) await d.send(forgedHello(r, `${name}-${pid}-1`, pid));
        }
        await new Promise((res) => setTimeout(res, 10));
      }
    })();
    const lines: string[] = [];
    const io = { out: (l: string) => void lines.push(l), err: (l: string) => void lines.push(l), isTTY: false, redraw: () => {}, columns: 120 };
    const p = pipeline("attacked", { batchSizes: [1], iterations: 3, warmup: 1, concurrency: 1 })
      .export({ name: "model", onnx: digitsOnnx! })
      .benchmark("python-ort");
    const outcome = await runPipeline(p, { outDir, io, quiet: true });
    done = true;
    await attacker;
    const streamed = await Promise.all(frames);
    expect(seen.size, "the attacker never saw a worker").toBeGreaterThan(0);
    expect(streamed.every((f) => f.closedEarly), "a 1 GiB frame was read whole").toBe(true);
    const rep = JSON.parse(readFileSync(outcome.reportJson, "utf8")) as Report;
    const ort = rep.runtimes.find((x) => x.name === "python-ort")!;
    expect(seen.has(ort.pid), "the report's python-ort is not the process the run spawned").toBe(true);
    expect(ort.latencyMs["batch1"]!.p50).toBeGreaterThan(0);
    expect(rep.transport?.refused.byReason["bad-auth"]).toBe(forged);
    expect(rep.notes?.some((n) => n.startsWith(`transport: ${rep.transport!.refused.total} message(s) refused`) && n.includes(`${forged} bad-auth`))).toBe(true);
    expect(readFileSync(outcome.reportJson.replace(/report\.json$/, "report.md"), "utf8")).toMatch(/## Notes\n\n(- .*\n)*- transport: \d+ message\(s\) refused/);
    expect(types(got).filter((t) => t !== "error")).toEqual([]);
    report(`a pipeline run (export + python-ort benchmark) under attack: ${seen.size} worker(s) found through /proc, ${forged} forged hellos, ` +
      `${frames.length} x 1 GiB frames (closed after ${streamed.map((f) => (f.written / 2 ** 20).toFixed(0)).join(", ")} MiB); run exit ok, ` +
      `report notes: "${rep.notes?.[0]}"`);
  }, LIMIT_MS);
});

/** This process's children that are workers (their argv names an endpoint). */
function childWorkers(): number[] {
  const out: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === process.pid && readFileSync(`/proc/${name}/cmdline`, "utf8").includes("--connect")) out.push(Number(name));
    } catch {
      // gone
    }
  }
  return out;
}

function pick3<T>(r: () => number, xs: readonly T[]): T {
  return xs[Math.floor(r() * xs.length)]!;
}
