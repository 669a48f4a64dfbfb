/**
 * `memlane check <report.json|runDir> --max-rss python-ort=80MiB,native=10MiB ...`: a CI gate
 * on a finished run. Exit 0 when every limit holds, 1 when one is exceeded or cannot be
 * checked (a runtime the report lacks, a figure never measured — unless --allow-unmeasured),
 * 2 on bad usage. Every limit gets one line naming runtime, phase, figure and limit.
 */
import { type CommandSpec, parseArgs, UsageError, usage } from "../args.ts";
import type { Io } from "../io.ts";
import { parseSizeMiB } from "../../memory/size.ts";
import { checkLimits, type LimitFigure, type MemoryLimit } from "../../report/limits.ts";
import { loadReport } from "../../report/load.ts";

const FLAG_FIGURE: ReadonlyArray<[flag: string, figure: LimitFigure, what: string]> = [
  ["max-rss", "rss", "RSS at any phase end"],
  ["max-uss", "uss", "USS at any phase end"],
  ["max-pss", "pss", "PSS at any phase end"],
  ["max-peak", "peak", "peak RSS of any phase"],
  ["max-gpu", "gpu", "GPU memory at any phase end"],
];

export const spec: CommandSpec = {
  name: "check",
  summary: "Gate a finished run on memory limits per runtime; exits 1 naming runtime, phase, figure and limit when one is exceeded.",
  positionals: [{ name: "report", description: "a run directory or its report.json" }],
  flags: {
    ...Object.fromEntries(
      FLAG_FIGURE.map(([flag, , what]) => [flag, { type: "string" as const, placeholder: "RT=SIZE,...", description: `${what}, per runtime (RT: a runtime, "training" or "*")` }]),
    ),
    "allow-unmeasured": { type: "boolean", description: "pass limits whose figure was not measured (GPU figures without a GPU)" },
  },
};

/** "python-ort=80MiB,native=10MiB" → limits; UsageError naming the flag and the bad item. */
export function parseLimitList(flag: string, figure: LimitFigure, text: string): MemoryLimit[] {
  return text.split(",").filter((s) => s.trim() !== "").map((item) => {
    const eq = item.indexOf("=");
    if (eq <= 0) throw UsageError.bad(`--${flag}`, "RUNTIME=SIZE items, e.g. native=10MiB", item);
    const runtime = item.slice(0, eq).trim();
    let limitMiB: number;
    try {
      limitMiB = parseSizeMiB(item.slice(eq + 1));
    } catch (err) {
      throw new UsageError(`--${flag}: ${runtime}: ${(err as Error).message}`, `--${flag}`);
    }
    return { runtime, figure, limitMiB, source: `--${flag} ${runtime}` };
  });
}

export async function execute(argv: readonly string[], io: Io): Promise<number> {
  const args = parseArgs(spec, argv);
  if (args.help) {
    io.out(usage(spec));
    return 0;
  }
  const limits = FLAG_FIGURE.flatMap(([flag, figure]) =>
    typeof args.flags[flag] === "string" ? parseLimitList(flag, figure, args.flags[flag] as string) : [],
  );
  if (limits.length === 0) throw new UsageError(`no limit given (expected at least one of ${FLAG_FIGURE.map(([f]) => `--${f}`).join(", ")})`);
  let loaded;
  try {
    loaded = await loadReport(args.positionals.report!);
  } catch (err) {
    io.err(`memlane check: ${(err as Error).message}`);
    return 1;
  }
  const allowUnmeasured = args.flags["allow-unmeasured"] === true;
  const checks = checkLimits(loaded.report, limits);
  let failed = 0;
  for (const c of checks) {
    const bad = c.status === "exceeded" || (c.status === "unmeasured" && !allowUnmeasured);
    if (bad) failed++;
    (bad ? io.err : io.out)(`${c.status === "ok" ? "ok      " : c.status === "exceeded" ? "EXCEEDED" : "UNCHECKED"} ${c.message}`);
  }
  io.out(`memlane check: ${checks.length - failed} of ${checks.length} limit(s) hold in ${loaded.path}`);
  return failed > 0 ? 1 : 0;
}
