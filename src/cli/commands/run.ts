/** `memlane run <pipeline.ts> [--out DIR] [-j N] [--device D] [--rdzv-endpoint H:P]`: imports a pipeline module and runs it. */
import { existsSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { type CommandSpec, parseArgs, UsageError, usage } from "../args.ts";
import type { Io } from "../io.ts";
import { Pipeline } from "../../pipeline/builder.ts";
import { printOutcome } from "../outcome.ts";
import { parseSizeMiB } from "../../memory/size.ts";
import type { RemoteRunOptions } from "../../pipeline/remote-hosts.ts";
import { brokerPortProblem, parseHostPort } from "../../workers/join-protocol.ts";

export const spec: CommandSpec = {
  name: "run",
  summary: "Run a pipeline module (its default export, built with pipeline()) and write runs/<runId>/report.{json,md}.",
  positionals: [{ name: "pipeline.ts", description: "a pipeline module, e.g. pipelines/digits.ts" }],
  flags: {
    out: { type: "string", short: "o", placeholder: "DIR", description: "directory for run directories", default: "runs" },
    concurrency: { type: "int", short: "j", placeholder: "N", description: "stages at once (overrides the pipeline's)" },
    device: { type: "string", short: "d", placeholder: "cpu|cuda|auto", choices: ["cpu", "cuda", "auto"], description: "device of training and runtimes (overrides the pipeline's; auto = CUDA where a GPU is found)" },
    quiet: { type: "boolean", short: "q", description: "no progress output, only the final table" },
    "rdzv-endpoint": { type: "string", placeholder: "HOST:PORT", description: "ranks on other hosts: the c10d rendezvous endpoint this host serves for stages with distributed.nnodes > 1; each other host runs `memlane join --key FILE HOST:PORT` (docs/distributed.md)" },
    "join-key": { type: "string", placeholder: "FILE", description: "with --rdzv-endpoint: the join key file, created (mode 600) when missing, else reused (default: <out>/memlane-join-key.json)" },
    "broker-port": { type: "int", placeholder: "PORT", description: "with --rdzv-endpoint: the port of the broker the remote ranks reach (default: the rendezvous port + 1)" },
    "memory-budget": { type: "string", placeholder: "SIZE", description: "host RAM the stages may take together, e.g. 2GiB (default: available memory); stages with a predicted peak run together only when they fit" },
  },
};

export async function loadPipeline(file: string): Promise<Pipeline> {
  const abs = path.resolve(file);
  if (!existsSync(abs)) throw UsageError.bad("<pipeline.ts>", "an existing pipeline module", file);
  const mod = (await import(pathToFileURL(abs).href)) as { default?: unknown };
  const p = mod.default;
  if (!(p instanceof Pipeline) && !(p && typeof p === "object" && (p as { constructor?: { name?: string } }).constructor?.name === "Pipeline"))
    throw UsageError.bad("<pipeline.ts>", "a module whose default export is pipeline(...)", `${file} (default export: ${typeof p})`);
  return p as Pipeline;
}

function budgetFlag(text: string): number {
  try {
    return parseSizeMiB(text);
  } catch (err) {
    throw new UsageError(`--memory-budget: ${(err as Error).message}`, "--memory-budget");
  }
}

function remoteFlags(flags: Record<string, unknown>): { remote?: RemoteRunOptions } {
  const rdzv = flags["rdzv-endpoint"] as string | undefined;
  const keyFile = flags["join-key"] as string | undefined;
  const port = flags["broker-port"] as number | undefined;
  if (rdzv === undefined) {
    if (keyFile !== undefined || port !== undefined) throw new UsageError(`--${keyFile !== undefined ? "join-key" : "broker-port"}: only with --rdzv-endpoint`, "--rdzv-endpoint");
    return {};
  }
  try {
    parseHostPort(rdzv, "--rdzv-endpoint");
  } catch (err) {
    throw new UsageError((err as Error).message, "--rdzv-endpoint");
  }
  const bad = brokerPortProblem(port, parseHostPort(rdzv, "--rdzv-endpoint").port);
  if (bad) throw UsageError.bad(bad.option, bad.expected, bad.received);
  return { remote: { rdzvEndpoint: rdzv, ...(keyFile !== undefined ? { joinKeyFile: keyFile } : {}), ...(port !== undefined ? { brokerPort: port } : {}) } };
}

export async function execute(argv: readonly string[], io: Io): Promise<number> {
  const args = parseArgs(spec, argv);
  if (args.help) {
    io.out(usage(spec));
    return 0;
  }
  const pipe = await loadPipeline(args.positionals["pipeline.ts"]!);
  const { runPipeline } = await import("../../pipeline/run.ts");
  const outcome = await runPipeline(pipe, {
    outDir: args.flags.out as string,
    concurrency: args.flags.concurrency as number | undefined,
    device: args.flags.device as "cpu" | "cuda" | "auto" | undefined,
    io,
    quiet: args.flags.quiet === true,
    ...(typeof args.flags["memory-budget"] === "string" ? { memoryBudgetMiB: budgetFlag(args.flags["memory-budget"]) } : {}),
    ...remoteFlags(args.flags),
  });
  return printOutcome(outcome, io);
}
