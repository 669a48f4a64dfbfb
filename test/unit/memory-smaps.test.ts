// Parsing and classifying /proc/<pid>/smaps: on the smaps of live processes started here (a
// Python interpreter that imported numpy, this Node process), checked against the same
// moment's smaps_rollup, and against the Python worker's own parser on the same text.
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { groupByKind, growthByKind, totalOf } from "../../src/memory/breakdown.ts";
import { classifyMapping } from "../../src/memory/mapping-kinds.ts";
import { parseSmapsRollup } from "../../src/memory/proc.ts";
import { ANON, ANON_ARENA, ANON_GUARDED, decodeSmapsSummary, parseSmaps, readSmaps, sumSmaps } from "../../src/memory/smaps.ts";

const ROOT = resolve(import.meta.dirname, "../..");
const PYTHON = join(ROOT, ".venv/bin/python");

/**
 * smaps and smaps_rollup of an idle process. The two files are separate reads, and even an
 * idle interpreter can move a few hundred KiB between them (a CI run once saw glibc give back
 * 448 KiB in between), so this reads rollup, smaps, rollup and keeps the first triple whose
 * two rollups are identical: then nothing moved while smaps was read.
 */
function readBoth(pid: number): { smaps: string; rollup: string } {
  const rollupOf = () => readFileSync(`/proc/${pid}/smaps_rollup`, "utf8");
  for (let attempt = 0; attempt < 20; attempt++) {
    const before = rollupOf();
    const smaps = readFileSync(`/proc/${pid}/smaps`, "utf8");
    if (rollupOf() === before) return { smaps, rollup: before };
  }
  throw new Error(`/proc/${pid}/smaps_rollup changed across every one of 20 reads of smaps: the process never went idle`);
}

const within1pct = (a: number, b: number) => Math.abs(a - b) <= Math.max(0.01 * b, 4);

describe("parseSmaps on a live Python process (numpy imported, one extra thread that allocated)", () => {
  let child: ChildProcess;
  let text: { smaps: string; rollup: string };
  const dir = mkdtempSync(join(tmpdir(), "memlane-smaps-"));

  beforeAll(async () => {
    // A second thread gives a pthread stack (guard page + stack) and, allocating 20 MiB in
    // 2 KiB objects (malloc, not Python's small-object arenas), a glibc arena of its own.
    const code = "import numpy, threading, sys, time\nkeep = []\n" +
      "done = threading.Event()\n" +
      "def work():\n    keep.extend(bytes(2048) for _ in range(10000))\n    done.set()\n    time.sleep(60)\n" +
      "t = threading.Thread(target=work, daemon=True); t.start()\ndone.wait()\n" +
      "print('ready', flush=True); sys.stdin.read()";
    child = spawn(PYTHON, ["-c", code], { stdio: ["pipe", "pipe", "inherit"] });
    await new Promise<void>((ok, fail) => {
      child.stdout!.once("data", () => ok());
      child.once("exit", (c) => fail(new Error(`python exited ${c} before ready`)));
    });
    text = readBoth(child.pid!);
  }, 30_000);
  afterAll(() => {
    child?.kill();
    rmSync(dir, { recursive: true, force: true });
  });

  it("sums per path to the rollup (RSS, PSS, USS, swap)", () => {
    const summary = parseSmaps(text.smaps);
    const [rss, pss, pc, pd, , swap] = sumSmaps(summary);
    const roll = parseSmapsRollup(text.rollup)!;
    expect(rss).toBe(roll.rssKiB);
    expect(within1pct(pss, roll.pssKiB)).toBe(true);
    expect(pc + pd).toBe(roll.ussKiB);
    expect(swap).toBe(roll.swapKiB);
  });

  it("classifies numpy, the interpreter, the heap and the thread's stack, and the kinds add up to the rollup", () => {
    const kinds = groupByKind(parseSmaps(text.smaps));
    const ids = kinds.map((k) => k.kind);
    for (const want of ["lib:numpy", "lib:python", "lib:system", "heap", "stacks", "anonymous", "arenas"]) expect(ids).toContain(want);
    const arenas = kinds.find((k) => k.kind === "arenas")!;
    expect(arenas.rssKiB).toBeGreaterThan(19 * 1024); // the thread's 20 MiB of 2 KiB objects
    const numpy = kinds.find((k) => k.kind === "lib:numpy")!;
    expect(numpy.files.some((f) => f.path.includes("_multiarray_umath"))).toBe(true);
    expect(numpy.rssKiB).toBeGreaterThan(1024);
    const stacks = kinds.find((k) => k.kind === "stacks")!;
    expect(stacks.files.map((f) => f.path)).toEqual(expect.arrayContaining(["[stack]", ANON_GUARDED]));
    const total = totalOf(kinds);
    const roll = parseSmapsRollup(text.rollup)!;
    expect(total.rssKiB).toBe(roll.rssKiB);
    expect(total.ussKiB).toBe(roll.ussKiB);
    expect(within1pct(total.pssKiB, roll.pssKiB)).toBe(true);
    // ordered biggest RSS first
    expect(kinds.map((k) => k.rssKiB)).toEqual([...kinds.map((k) => k.rssKiB)].sort((a, b) => b - a));
  });

  it("gives exactly the Python worker's summary for the same text", () => {
    const saved = join(dir, "smaps.txt");
    writeFileSync(saved, text.smaps);
    const py = JSON.parse(execFileSync(PYTHON, ["-c", `import json, sys; from memlane_worker import memory; print(json.dumps(memory.smaps_summary(sys.argv[1])))`, saved],
      { env: { ...process.env, PYTHONPATH: join(ROOT, "python") }, encoding: "utf8" }));
    expect(py).toEqual(parseSmaps(text.smaps));
  });
});

describe("readSmaps on this Node process", () => {
  it("finds node itself, and sums within 1 % of the rollup read right after", async () => {
    // This process has other threads (V8's collector, libuv's pool) that may fault pages in
    // between the two reads: a real mismatch fails every try, such a race not all five.
    let last = "";
    for (let attempt = 0; attempt < 5; attempt++) {
      const summary = (await readSmaps("self"))!;
      const roll = parseSmapsRollup(readFileSync("/proc/self/smaps_rollup", "utf8"))!;
      expect(groupByKind(summary).map((k) => k.kind)).toContain("lib:node");
      if (within1pct(sumSmaps(summary)[0], roll.rssKiB)) return;
      last = `smaps ${sumSmaps(summary)[0]} KiB vs rollup ${roll.rssKiB} KiB`;
    }
    expect.fail(`smaps never summed to the rollup within 1 % in 5 tries (last: ${last})`);
  });
  it("is null for a process that is gone", async () => {
    expect(await readSmaps(2 ** 22 + 12345)).toBeNull();
  });
});

describe("parseSmaps edge cases", () => {
  const hdr = (lo: string, hi: string, perms: string, path = "") => `${lo}-${hi} ${perms} 00000000 00:00 0${path ? `                          ${path}` : ""}`;
  const fields = (rss: number) => `Size: ${rss} kB\nRss: ${rss} kB\nPss: ${rss} kB\nPrivate_Clean: 0 kB\nPrivate_Dirty: ${rss} kB\nAnonymous: ${rss} kB\nSwap: 0 kB\nVmFlags: rd wr mr mw me ac`;
  it("names [anon guarded] above a small guard, [anon arena] a 64 MiB-aligned arena, else [anon]", () => {
    const text = [
      hdr("7f0000000000", "7f0000001000", "---p"), fields(0),
      hdr("7f0000001000", "7f0000801000", "rw-p"), fields(40), // stack over its guard page
      hdr("7f0000900000", "7f0004900000", "---p"), fields(0),
      hdr("7f0004900000", "7f0004a00000", "rw-p"), fields(100), // above a big reservation: not a stack
      hdr("7f0008000000", "7f0008300000", "rw-p"), fields(30), // arena: aligned, with its reserved rest
      hdr("7f0008300000", "7f000c000000", "---p"), fields(0),
      hdr("7f0010000000", "7f0014000000", "rw-p"), fields(20), // a full arena: aligned, 64 MiB
      hdr("7f0016000000", "7f0016300000", "rw-p"), fields(5), // aligned to 32 MiB only: plain
      hdr("7f0016300000", "7f001a000000", "---p"), fields(0),
      hdr("7f001c000000", "7f001c001000", "r--p", "/dev/shm/memlane-1-run-0 (deleted)"), fields(4),
      "",
    ].join("\n");
    const s = parseSmaps(text);
    expect(s[ANON_GUARDED]).toEqual([40, 40, 0, 40, 40, 0]);
    expect(s[ANON]).toEqual([105, 105, 0, 105, 105, 0]);
    expect(s[ANON_ARENA]).toEqual([50, 50, 0, 50, 50, 0]);
    expect(classifyMapping("/dev/shm/memlane-1-run-0 (deleted)").kind).toBe("shm");
  });
  it("refuses text that is not smaps, naming the line", () => {
    expect(() => parseSmaps("Rss: 4 kB\n")).toThrow(/line 1: a Rss field before any mapping header/);
    expect(() => parseSmaps("deadbeef not a header\n")).toThrow(/line 1: expected a mapping header/);
  });
  it("decodeSmapsSummary names the bad entry", () => {
    expect(decodeSmapsSummary({ "[heap]": [1, 1, 0, 1, 1, 0] }, "w")).toEqual({ "[heap]": [1, 1, 0, 1, 1, 0] });
    expect(() => decodeSmapsSummary({ "[heap]": [1, 2] }, "phase import end mark: smaps")).toThrow(/phase import end mark: smaps\["\[heap\]"\]: expected 6 non-negative integers/);
    expect(() => decodeSmapsSummary([1], "x")).toThrow(/x: expected a map/);
  });
});

describe("classifyMapping", () => {
  const cases: Array<[string, string]> = [
    ["/v/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so", "lib:torch"],
    ["/v/lib/python3.11/site-packages/torch/lib/libgomp.so.1", "lib:torch"],
    ["/v/lib/python3.11/site-packages/onnxruntime/capi/onnxruntime_pybind11_state.cpython-311-x86_64-linux-gnu.so", "lib:onnxruntime"],
    ["/v/lib/python3.11/site-packages/numpy.libs/libscipy_openblas64_-32a4b2a6.so", "lib:numpy"],
    ["/v/lib/python3.11/site-packages/nvidia/cublas/lib/libcublasLt.so.12", "lib:CUDA"],
    ["/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15", "lib:CUDA"],
    ["/usr/local/cuda-12.4/targets/x86_64-linux/lib/libcudart.so.12.4.99", "lib:CUDA"],
    ["/usr/lib/x86_64-linux-gnu/libcudnn_ops.so.9", "lib:CUDA"],
    ["/v/lib/python3.11/site-packages/zmq/backend/cython/_zmq.abi3.so", "lib:zmq"],
    ["/v/lib/python3.11/site-packages/pyzmq.libs/libzmq-a430b4ce.so.5.2.5", "lib:zmq"],
    ["/root/.pyenv/versions/3.11.7/bin/python3.11", "lib:python"],
    ["/root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0", "lib:python"],
    ["/root/.pyenv/versions/3.11.7/lib/python3.11/lib-dynload/_json.cpython-311-x86_64-linux-gnu.so", "lib:python"],
    ["/usr/bin/node", "lib:node"],
    ["/work/x/node_modules/onnxruntime-node/bin/napi-v6/linux/x64/libonnxruntime.so.1", "lib:onnxruntime"],
    ["/work/x/node_modules/zeromq/build/Release/addon.node", "lib:zmq"],
    ["/work/x/native/build/runtime/memlane-rt", "lib:memlane"],
    ["/usr/lib/x86_64-linux-gnu/libopenblas.so.0", "lib:OpenBLAS"],
    ["/usr/lib/x86_64-linux-gnu/libzmq.so.5.2.5", "lib:zmq"],
    ["/usr/lib/x86_64-linux-gnu/libc.so.6", "lib:system"],
    ["/work/runs/r1/digits-cnn.mlplan", "model-files"],
    ["/work/runs/r1/digits-cnn.onnx", "model-files"],
    ["/tmp/ckpt/model.safetensors", "model-files"],
    ["/dev/shm/memlane-123-r1-0", "shm"],
    ["/dev/nvidiactl", "gpu-driver"],
    ["/dev/nvidia-uvm", "gpu-driver"],
    ["[heap]", "heap"],
    ["[stack]", "stacks"],
    [ANON_GUARDED, "stacks"],
    [ANON, "anonymous"],
    [ANON_ARENA, "arenas"],
    ["[anon:v8]", "anonymous"],
    ["/memfd:doublemapper (deleted)", "anonymous"],
    ["/dev/zero (deleted)", "anonymous"],
    ["/SYSV0000162e (deleted)", "shm"],
    ["[vdso]", "other"],
    ["/usr/lib/locale/C.utf8/LC_CTYPE", "other"],
  ];
  it.each(cases)("%s is %s", (path, kind) => expect(classifyMapping(path).kind).toBe(kind));
  it("labels library kinds by package", () => expect(classifyMapping(cases[0]![0]).label).toBe("torch libs"));
});

describe("growthByKind", () => {
  it("is end minus start per kind, a kind missing on one side counting 0", () => {
    const start = groupByKind({ "[heap]": [100, 100, 0, 100, 100, 0], "/x/libc.so.6": [50, 10, 0, 0, 0, 0] });
    const end = groupByKind({ "[heap]": [300, 300, 0, 300, 300, 0], "/m/a.mlplan": [40, 40, 40, 0, 0, 0] });
    const g = Object.fromEntries(growthByKind(start, end).map((x) => [x.kind, x.deltaRssKiB]));
    expect(g).toEqual({ heap: 200, "lib:system": -50, "model-files": 40 });
  });
});
