/**
 * `memlane` entry point: dispatches to one module per command (src/cli/commands/), parses
 * options once there, and maps outcomes to exit codes: 0 ok, 1 pipeline failure, 2 usage
 * error, 130 on Ctrl-C (SIGINT), 143 on SIGTERM, 141 when stdout's or stderr's reader has gone
 * (EPIPE, where a C program would die of SIGPIPE; the shutdown handlers of
 * src/workers/cleanup.ts stop every worker first and exit with 128 + the signal number).
 */
import { register } from "node:module";
import { pathToFileURL } from "node:url";
import { UsageError } from "./args.ts";
import { formatFailure } from "./failure.ts";
import type { Io } from "./io.ts";
import { defaultIo } from "./io.ts";
import { SIGNAL_EXIT, shutdownStarted } from "../workers/cleanup.ts";

export const EXIT = Object.freeze({ OK: 0, FAILURE: 1, USAGE: 2, INTERRUPTED: SIGNAL_EXIT.SIGINT, OUTPUT_CLOSED: SIGNAL_EXIT.SIGPIPE, TERMINATED: SIGNAL_EXIT.SIGTERM });

interface CommandModule {
  spec: import("./args.ts").CommandSpec;
  execute(argv: readonly string[], io: Io): Promise<number>;
}

const COMMANDS: Record<string, { summary: string; load: () => Promise<CommandModule> }> = {
  run: { summary: "run a pipeline module (train, export, benchmark...) and write its report", load: () => import("./commands/run.ts") },
  compare: { summary: "compare runtimes on one ONNX model: memory per phase, latency, numerics", load: () => import("./commands/compare.ts") },
  compile: { summary: "compile an ONNX model to a memlane-rt plan and print its arena", load: () => import("./commands/compile.ts") },
  report: { summary: "re-render <runDir>/report.html from its report.json", load: loadReport },
  estimate: { summary: "predict host RAM per runtime and phase for an ONNX model, without running it", load: () => import("./commands/estimate.ts") },
  check: { summary: "gate a finished run on memory limits per runtime (CI): exit 1 when one is exceeded", load: () => import("./commands/check.ts") },
  join: { summary: "start this host's ranks of a multi-host run (memlane run --rdzv-endpoint on the orchestrator's host)", load: () => import("./commands/join.ts") },
  diff: { summary: "per-runtime, per-phase memory and latency deltas between two runs", load: () => import("./commands/diff.ts") },
};

/** engineer H's command has its own signature: run(argv, io) → exit code. */
async function loadReport(): Promise<CommandModule> {
  const spec = { name: "report", summary: COMMANDS.report!.summary, positionals: [{ name: "runDir", description: "a run directory" }], flags: {} };
  let mod: { run?: (argv: string[], io: { out(l: string): void; err(l: string): void }) => Promise<number> };
  try {
    mod = (await import("./commands/" + "report.ts")) as typeof mod;
  } catch (err) {
    return {
      spec,
      async execute(_argv, io) {
        io.err(`memlane report: this build has no report command (src/cli/commands/report.ts failed to load: ${(err as Error).message})`);
        return EXIT.FAILURE;
      },
    };
  }
  return {
    spec,
    execute: (argv, io) => mod.run!([...argv], { out: io.out, err: io.err }),
  };
}

export function mainUsage(): string {
  const lines = ["Usage: memlane <command> [options]", "", "Commands:"];
  for (const [name, c] of Object.entries(COMMANDS)) lines.push(`  ${name.padEnd(10)}${c.summary}`);
  lines.push("", 'Run "memlane <command> --help" for its options.');
  return lines.join("\n");
}

/** Runs the CLI with `argv` (without node and the script); resolves with the exit code. */
export async function main(argv: readonly string[], io: Io = defaultIo()): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === "--help" || command === "-h" || command === "help") {
    (command === undefined ? io.err : io.out)(mainUsage());
    return command === undefined ? EXIT.USAGE : EXIT.OK;
  }
  const entry = COMMANDS[command];
  if (!entry) {
    io.err(`memlane: unknown command ${JSON.stringify(command)} (expected one of ${Object.keys(COMMANDS).join(", ")})`);
    io.err('Run "memlane --help" for usage.');
    return EXIT.USAGE;
  }
  try {
    const mod = await entry.load();
    return await mod.execute(rest, io);
  } catch (err) {
    if (err instanceof UsageError) {
      io.err(`memlane ${command}: ${err.message}`);
      io.err(`Run "memlane ${command} --help" for usage.`);
      return EXIT.USAGE;
    }
    // Interrupted: the signal's own line said so, and its handler exits with 130/143.
    if (shutdownStarted()) return EXIT.FAILURE;
    io.err(formatFailure(command, err));
    return EXIT.FAILURE;
  }
}

let hooksRegistered = false;

/**
 * Lets a pipeline module live anywhere: "memlane" resolves to this copy, and a TypeScript
 * module with import/export loads as ESM without a package.json (src/cli/pipeline-hooks.mjs).
 */
export function registerPipelineHooks(): void {
  if (hooksRegistered) return;
  hooksRegistered = true;
  register("./pipeline-hooks.mjs", import.meta.url);
}

/** The process entry: shutdown handlers, module hooks, main, then exit with its code. */
export async function runCli(argv: readonly string[] = process.argv.slice(2)): Promise<never> {
  const { installShutdownHandlers } = await import("../workers/cleanup.ts");
  installShutdownHandlers();
  registerPipelineHooks();
  const code = await main(argv);
  // A signal's shutdown owns the exit (130/143) once the run has written what it could.
  if (shutdownStarted()) await new Promise<never>(() => {});
  // Workers were stopped by the command; exit explicitly so that a library's stray handle
  // (pythonia's timer, a ZeroMQ context) cannot keep a finished run alive. (A write that met
  // a closed pipe reports it by now: that shutdown then owns the exit, 141.)
  await new Promise<void>((r) => process.stdout.write("", () => r()));
  await new Promise((r) => setImmediate(r));
  if (shutdownStarted()) await new Promise<never>(() => {});
  process.exit(code);
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) await runCli();
