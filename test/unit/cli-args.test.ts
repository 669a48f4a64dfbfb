import { describe, expect, it } from "vitest";
import { type CommandSpec, parseArgs, UsageError, usage } from "../../src/cli/args.ts";
import { main } from "../../src/cli/main.ts";
import type { Io } from "../../src/cli/io.ts";

const spec: CommandSpec = {
  name: "compare",
  summary: "compare",
  positionals: [{ name: "model.onnx", description: "an ONNX model file" }],
  flags: {
    runtimes: { type: "list", choices: ["python-ort", "node-ort", "native"], description: "runtimes", default: ["python-ort"] },
    batch: { type: "intList", description: "batch sizes", default: [1, 64] },
    threads: { type: "int", description: "threads", default: 1 },
    out: { type: "string", short: "o", description: "out dir", default: "runs" },
  },
};

function fails(argv: string[]): UsageError {
  try {
    parseArgs(spec, argv);
  } catch (e) {
    expect(e).toBeInstanceOf(UsageError);
    return e as UsageError;
  }
  throw new Error("expected a UsageError");
}

function capture(): Io & { outText: string[]; errText: string[] } {
  const outText: string[] = [];
  const errText: string[] = [];
  return { outText, errText, out: (l) => outText.push(l), err: (l) => errText.push(l), isTTY: false, redraw: () => {}, columns: 80 };
}

describe("CLI option parsing", () => {
  it("parses values, defaults, = and short forms; result is frozen", () => {
    const a = parseArgs(spec, ["m.onnx", "--runtimes", "native,node-ort", "--batch=1,8", "-o", "/tmp/x"]);
    expect(a.positionals).toEqual({ "model.onnx": "m.onnx" });
    expect(a.flags).toEqual({ runtimes: ["native", "node-ort"], batch: [1, 8], threads: 1, out: "/tmp/x" });
    expect(Object.isFrozen(a.flags)).toBe(true);
  });

  it("names an unknown flag and lists the known ones", () => {
    expect(fails(["m.onnx", "--thread", "2"]).message).toMatch(/unknown option --thread for "memlane compare" \(expected one of --runtimes, --batch, --threads, --out, --help\)/);
  });

  it("names the option, what was expected and what was received", () => {
    expect(fails(["m.onnx", "--batch", "1,x"]).message).toBe(
      '--batch: expected a comma-separated list of positive integers (e.g. 1,64), received "1,x"',
    );
    expect(fails(["m.onnx", "--threads", "0"]).message).toBe('--threads: expected a positive integer, received "0"');
    expect(fails(["m.onnx", "--runtimes", "tensorrt"]).message).toBe(
      '--runtimes: expected a comma-separated list of python-ort, node-ort, native, received "tensorrt"',
    );
    expect(fails(["m.onnx", "--threads"]).message).toMatch(/--threads: expected a value .*received nothing/);
    expect(fails([]).message).toBe("missing <model.onnx>: expected an ONNX model file, received nothing");
    expect(fails(["a", "b"]).message).toMatch(/unexpected argument "b"/);
  });

  it("--help needs no positionals and usage lists every option", () => {
    expect(parseArgs(spec, ["--help"]).help).toBe(true);
    const u = usage(spec);
    for (const f of ["--runtimes", "--batch", "--threads", "-o, --out", "--help"]) expect(u).toContain(f);
  });

  it("main: exit 2 on usage errors, with the message on stderr", async () => {
    const io = capture();
    expect(await main(["frobnicate"], io)).toBe(2);
    expect(io.errText.join("\n")).toMatch(/unknown command "frobnicate"/);
    const io2 = capture();
    expect(await main(["run", "x.ts", "--bogus"], io2)).toBe(2);
    expect(io2.errText.join("\n")).toMatch(/memlane run: unknown option --bogus/);
    const io3 = capture();
    expect(await main(["compare", "m.onnx", "--batch", "0"], io3)).toBe(2);
    expect(io3.errText.join("\n")).toMatch(/--batch: expected .*received "0"/);
    const io4 = capture();
    expect(await main(["--help"], io4)).toBe(0);
    expect(io4.outText.join("\n")).toMatch(/Commands:[\s\S]*run[\s\S]*compare[\s\S]*compile[\s\S]*report/);
  });
});

describe("failure output", () => {
  it("names the stage, the worker, its pid, the signal and shows the stderr tail", async () => {
    const { formatFailure } = await import("../../src/cli/failure.ts");
    const { StageError } = await import("../../src/pipeline/scheduler.ts");
    const { WorkerError } = await import("../../src/workers/worker-error.ts");
    const cause = new WorkerError('worker "python-ort" (pid 42) was killed by SIGKILL during task infer.ort', {
      code: 9,
      worker: { name: "python-ort", pid: 42 },
      task: "infer.ort",
      signal: "SIGKILL",
      stderrTail: "line 1\nline 2\n",
    });
    const text = formatFailure("run", new StageError("bench:python-ort", cause));
    expect(text).toMatch(/^memlane run: stage "bench:python-ort" failed/);
    expect(text).toContain("worker: python-ort (pid 42)");
    expect(text).toContain("signal: SIGKILL");
    expect(text).toContain("code: WORKER_DIED");
    expect(text).toMatch(/stderr \(last lines\):\n {4}line 1\n {4}line 2/);
  });
});
