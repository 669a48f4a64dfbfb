/**
 * ONNX Runtime in Node: inference in a child Node process of its own (node-ort-process.mjs),
 * measured like the Python worker's infer.ort. Its figures are that process's: a Node process
 * running onnxruntime-node, as a user deploys it, and nothing of the orchestrator's (until
 * 2026-12-02 it ran on a worker_thread of the orchestrator, whose heap moved its figures by
 * ±7 %: docs/memory.md, "node-ort in a process of its own").
 */
import { fork } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { ErrorCode } from "../transport/protocol.ts";
import { register } from "./cleanup.ts";
import { readTensorsSync, type TensorFileRef, writeTensorsSync } from "./tensor-file.mjs";
import { describeExit, WorkerError } from "./worker-error.ts";
import type { MemoryReading, SmapsSummary } from "../transport/protocol.ts";
import { parseSmaps } from "../memory/smaps.ts";
import { addonPathInUse, loadAddon } from "../memory/gpu-addon.ts";
import type { LatencyTable } from "../report/schema.ts";
import type { ModelIo } from "../pipeline/inputs/shapes.ts";
import type { OutputTensor } from "../pipeline/stages.ts";
import type { TensorData } from "../transport/codec.ts";
import type { DType } from "../transport/protocol.ts";

export interface NodeOrtTask {
  model: string;
  /** Eval inputs, [n, ...sample shape] float32. Handed to the child through a file. */
  inputs: Float32Array;
  shape: number[];
  batchSizes: number[];
  iterations: number;
  warmup: number;
  threads: number;
  /**
   * The multi-input form (docs/worker-tasks.md, "Several inputs and outputs"): every graph
   * input's spec and its eval tensor (batch first, `feeds`); then `inputs`/`shape` are unused
   * and the result carries every output in `outputSet`.
   */
  io?: ModelIo;
  feeds?: Array<{ name: string; dtype: DType; shape: number[]; data: TensorData }>;
  /** Per-op profile after the timed calls (docs/profiling.md): ORT's profiler at this batch, this many calls. */
  profile?: { batch: number; iterations: number };
  /**
   * The load probe (src/estimate/ort-load.ts): the child stops after model-load and sends, as its
   * result, what malloc holds and has out after the load, and the held blocks it can hand out.
   */
  loadProbe?: boolean;
  ort?: {
    cpuMemArena?: boolean;
    memPattern?: boolean;
    graphOptimizationLevel?: "disable" | "basic" | "extended" | "all";
  };
}

export interface NodeOrtPhase {
  name: string;
  mark: "start" | "end";
  tMs: number;
  memory: MemoryReading;
  /** The child's /proc/self/smaps summary, read at the mark (end marks and the first start). */
  smaps?: SmapsSummary;
}

export interface NodeOrtResult {
  /** The child's pid and command line. */
  pid: number;
  command: string[];
  device: string;
  versions: Record<string, string>;
  latencyMs: LatencyTable;
  throughputPerS: number;
  /** Outputs over the whole eval set. */
  outputs: Float32Array;
  outputShape: number[];
  /** Every graph output, batch first (multi-input form only). */
  outputSet?: OutputTensor[];
  /** The per-op profile as the child took it (task.profile only). */
  profile?: unknown;
}

const CHILD = fileURLToPath(new URL("./node-ort-process.mjs", import.meta.url));
/** How much of the child's stderr a failure quotes. */
const STDERR_TAIL_BYTES = 4096;
/** How long a child that sent its result may take to exit once disconnected, before SIGKILL. */
const EXIT_GRACE_MS = 5000;

/**
 * The addon's path where it can read mallinfo2, for the child's readings and the load probe's
 * free blocks (it loads the addon itself); undefined without it, and node-ort's malloc figures
 * are then absent, as a process's that cannot read them.
 */
function addonPath(): string | undefined {
  try {
    return typeof loadAddon().mallocInfo === "function" ? addonPathInUse() : undefined;
  } catch {
    return undefined;
  }
}

/** Where each tensor lies in the tensor file: its element type, byte offset and length in elements. */
/**
 * The task's tensors in one file (tensor-file.mjs) in a 0700 folder of its own in TMPDIR (the
 * run's scratch directory in a pipeline), for the child to read in one piece; the caller removes it.
 */
function writeTensorFile(tensors: TensorData[]): { file: string; refs: TensorFileRef[] } {
  const dir = mkdtempSync(join(tmpdir(), "memlane-node-ort-"));
  const file = join(dir, "tensors.bin");
  try {
    return { file, refs: writeTensorsSync(file, tensors) };
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });  // a full disk leaves no half-written file behind
    throw err;
  }
}

type ChildOptions = { onPhase?: (p: NodeOrtPhase) => void; signal?: AbortSignal; onProcess?: (p: { pid: number; exited: Promise<unknown> }) => void };
/** The child's environment (default: this process's, whose TMPDIR a pipeline sets to the run's scratch: process-tmpdir.ts). */
type ChildEnv = { env?: NodeJS.ProcessEnv };

/**
 * Runs one node-ort benchmark in a child Node process of its own; `signal` kills it.
 * `onProcess` hears of the child once it runs (the pipeline samples it like a worker).
 */
export function runNodeOrt(task: NodeOrtTask, opts: ChildOptions = {}): Promise<NodeOrtResult> {
  return runChild<Omit<NodeOrtResult, "pid" | "command">>(task, opts);
}

/**
 * node-ort's load probe: a child as a benchmark's, which stops after model-load (`loadProbe`)
 * and answers what its malloc holds and has out after the load and which held blocks it can
 * hand out. The answer is unchecked here: ort-load.ts checks it as it checks a Python worker's.
 */
export async function runNodeOrtLoadProbe(model: string, threads: number, opts: ChildOptions = {}): Promise<unknown> {
  // onnxruntime-node's telemetry writes mat-debug-<pid>.log into TMPDIR as the session is made:
  // a scratch directory of the probe's own, removed once the child has exited (runChild
  // settles after that), so no estimate leaves one in the user's TMPDIR.
  const scratch = mkdtempSync(join(tmpdir(), "memlane-node-ort-probe-"));
  try {
    const task = { model, inputs: new Float32Array(0), shape: [0], batchSizes: [1], iterations: 0, warmup: 0, threads, loadProbe: true };
    const { pid: _pid, command: _command, ...value } = await runChild<Record<string, unknown>>(task, { ...opts, env: { ...process.env, TMPDIR: scratch } });
    return value;
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

/**
 * A result's outputs read back from the child's outputs file (`refs`: the child's refs for
 * `outputs` and each of `outputSet`'s data); a result without refs (the load probe's) as it is.
 */
function withOutputs<Value>(value: Record<string, unknown>, refs: { outputs: unknown; outputSet?: unknown[] } | undefined, file: string): Value {
  if (!refs) return value as Value;
  const set = (value.outputSet as Array<Record<string, unknown>> | undefined) ?? [];
  if ((refs.outputSet?.length ?? 0) !== set.length) throw new Error(`${refs.outputSet?.length ?? 0} output refs for ${set.length} outputs`);
  const [outputs, ...data] = readTensorsSync(file, [refs.outputs, ...(refs.outputSet ?? [])]);
  return { ...value, outputs, ...(refs.outputSet ? { outputSet: set.map((o, k) => ({ ...o, data: data[k] })) } : {}) } as Value;
}

function runChild<Value>(task: NodeOrtTask, opts: ChildOptions & ChildEnv): Promise<{ pid: number; command: string[] } & Value> {
  return new Promise((resolve, reject) => {
    if (opts.signal?.aborted) return reject(opts.signal.reason ?? new Error("aborted"));
    const { inputs, feeds, ...rest } = task;
    // The multi-input form reads `feeds` alone: its `inputs` (the same eval set, as the
    // single-input form has it) would be held a second time in the child.
    const single = task.io ? new Float32Array(0) : inputs;
    let written: { file: string; refs: TensorFileRef[] };
    try {
      written = writeTensorFile([single, ...(feeds ?? []).map((f) => f.data)]);
    } catch (err) {
      return reject(new Error(`node-ort: could not write its input tensors to ${tmpdir()}: ${(err as Error).message}`));
    }
    const [inputsRef, ...feedRefs] = written.refs;
    // Where the child writes its outputs (tensor-file.mjs), in the folder removed after it exits.
    const outputsFile = join(dirname(written.file), "outputs.bin");
    const removeFile = (): void => rmSync(dirname(written.file), { recursive: true, force: true });
    // execArgv: --expose-gc alone — the child is plain JavaScript; no loader flags needed in it,
    // and it collects before each phase's end reading (node-ort-process.mjs `phase`). `--name`,
    // which it ignores, names it in ps as the workers' does (the fault suite finds it so).
    const args = ["--name", "node-ort"];
    const child = fork(CHILD, args, { execArgv: ["--expose-gc"], serialization: "advanced", stdio: ["ignore", "ignore", "pipe", "ipc"], ...(opts.env ? { env: opts.env } : {}) });
    const command = [process.execPath, CHILD, ...args];
    let stderr = "";
    child.stderr?.on("data", (d: Buffer) => void (stderr = (stderr + d.toString()).slice(-STDERR_TAIL_BYTES)));
    // "exit", not "close": "close" never comes for a child the parent disconnected. The child
    // lives until it is disconnected (its IPC channel holds it), so an exit before its last
    // message means it died. One that never started ("error" alone) counts as exited.
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((res) => {
      child.once("exit", (code, signal) => res({ code, signal }));
      child.once("error", () => { if (child.pid === undefined) res({ code: null, signal: null }); });
    });
    const kill = (): void => void child.kill("SIGKILL");
    // Ctrl-C and the orchestrator's exit kill it too, as they do a worker.
    const unregister = register({ stop: async () => { kill(); await exited; }, killNow: kill });
    const cleaned = exited.then(() => {
      unregister();
      removeFile();
    });
    if (child.pid !== undefined) opts.onProcess?.({ pid: child.pid, exited });
    // Settles once the child has exited and its tensor file is gone: a disconnected child
    // exits by itself (node-ort-process.mjs); one that does not within the grace is killed.
    let settled = false;
    const finish = (fn: () => void): void => {
      if (settled) return;
      settled = true;
      opts.signal?.removeEventListener("abort", onAbort);
      if (child.connected) child.disconnect();
      const timer = setTimeout(kill, EXIT_GRACE_MS);
      void cleaned.then(() => {
        clearTimeout(timer);
        fn();
      });
    };
    const onAbort = (): void => {
      kill();
      finish(() => reject(opts.signal?.reason ?? new Error("node-ort: aborted")));
    };
    opts.signal?.addEventListener("abort", onAbort, { once: true });
    child.on("message", (m: { type: string } & Record<string, any>) => {
      if (settled) return;  // aborted: what was in flight is not this run's any more
      if (m.type === "phase") {
        const { smapsText, ...mark } = m as unknown as NodeOrtPhase & { smapsText?: string };
        opts.onPhase?.(smapsText === undefined ? mark : { ...mark, smaps: parseSmaps(smapsText) });
      }
      else if (m.type === "result") {
        let value: Value;
        try {
          value = withOutputs(m.value, m.outputRefs, outputsFile);
        } catch (err) {
          finish(() => reject(new Error(`node-ort: could not read its outputs back from ${outputsFile}: ${(err as Error).message}`)));
          return;
        }
        finish(() => resolve({ pid: child.pid!, command, ...value }));
      }
      else if (m.type === "error")
        finish(() => reject(Object.assign(new Error(`node-ort: ${m.message}`), { stack: m.stack, ...(typeof m.code === "number" ? { code: m.code } : {}) })));
    });
    child.on("error", (err) => finish(() => reject(new Error(`node-ort: could not run ${CHILD}: ${err.message}`))));
    void exited.then(({ code, signal }) =>
      finish(() => reject(new WorkerError(
        `node-ort: its process (pid ${child.pid}) ${describeExit(code ?? undefined, signal ?? undefined)} before its result${stderr.trim() ? `; stderr ends: ${stderr.trim().split("\n").slice(-5).join(" | ")}` : ""}`,
        { code: ErrorCode.WORKER_DIED, worker: { name: "node-ort", pid: child.pid }, ...(code !== null ? { exitCode: code } : {}), ...(signal !== null ? { signal } : {}), stderrTail: stderr },
      ))),
    );
    child.send({ ...rest, tensorFile: written.file, outputsFile, inputs: inputsRef, ...(feeds ? { feeds: feeds.map((f, k) => ({ ...f, data: feedRefs[k] })) } : {}), addon: addonPath() });
  });
}
