/**
 * `memlane report <runDir>`: re-renders <runDir>/report.html from <runDir>/report.json.
 * `argv` is what follows the command name. Exit codes: 0 written, 1 the run directory or its
 * report.json is unusable, 2 bad usage.
 */
import { readFile, stat } from "node:fs/promises";
import { join, resolve } from "node:path";
import { writeHtmlReport } from "../../report/html/index.ts";
import { REPORT_SCHEMA_VERSION } from "../../report/schema.ts";

export const USAGE = "usage: memlane report <runDir>\n  Re-renders <runDir>/report.html from <runDir>/report.json.";

export interface ReportIo {
  out: (line: string) => void;
  err: (line: string) => void;
}

const defaultIo: ReportIo = {
  out: (l) => process.stdout.write(`${l}\n`),
  err: (l) => process.stderr.write(`${l}\n`),
};

/** Top-level fields renderHtmlReport reads; named with what was expected and received. */
const REQUIRED: Array<[field: string, kind: "array" | "object" | "string" | "number"]> = [
  ["schemaVersion", "number"], ["pipeline", "string"], ["runId", "string"], ["createdAt", "string"],
  ["host", "object"], ["runtimes", "array"], ["checkpointLoad", "array"], ["comparison", "object"],
  ["numerics", "object"], ["gpu", "object"], ["stages", "array"], ["timeline", "array"],
];

function kindOf(v: unknown): string {
  if (v === null) return "null";
  return Array.isArray(v) ? "array" : typeof v;
}

/** Returns a message naming the first problem, or null when the report looks renderable. */
export function checkReportShape(value: unknown): string | null {
  if (kindOf(value) !== "object") return `expected a JSON object at the top level, received ${kindOf(value)}`;
  const obj = value as Record<string, unknown>;
  for (const [field, kind] of REQUIRED) {
    const got = kindOf(obj[field]);
    if (got !== kind) return `field "${field}": expected ${kind}, received ${obj[field] === undefined ? "nothing" : got}`;
  }
  if (obj.schemaVersion !== REPORT_SCHEMA_VERSION)
    return `field "schemaVersion": expected ${REPORT_SCHEMA_VERSION}, received ${String(obj.schemaVersion)}`;
  return null;
}

export async function run(argv: string[], io: ReportIo = defaultIo): Promise<number> {
  if (argv.includes("-h") || argv.includes("--help")) {
    io.out(USAGE);
    return 0;
  }
  const positional = argv.filter((a) => !a.startsWith("-"));
  const unknown = argv.filter((a) => a.startsWith("-"));
  if (unknown.length) {
    io.err(`memlane report: unknown option ${unknown[0]}\n${USAGE}`);
    return 2;
  }
  if (positional.length !== 1) {
    io.err(`memlane report: expected one run directory, received ${positional.length}\n${USAGE}`);
    return 2;
  }
  const runDir = resolve(positional[0]!);
  const st = await stat(runDir).catch(() => null);
  if (!st) {
    io.err(`memlane report: run directory not found: ${runDir}`);
    return 1;
  }
  if (!st.isDirectory()) {
    io.err(`memlane report: not a directory: ${runDir} (pass the run directory, e.g. runs/<runId>)`);
    return 1;
  }
  const jsonPath = join(runDir, "report.json");
  let text: string;
  try {
    text = await readFile(jsonPath, "utf8");
  } catch {
    io.err(`memlane report: no report.json in ${runDir} (was the run finished?)`);
    return 1;
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    io.err(`memlane report: invalid JSON in ${jsonPath}: ${(err as Error).message}`);
    return 1;
  }
  const problem = checkReportShape(parsed);
  if (problem) {
    io.err(`memlane report: ${jsonPath} is not a memlane report: ${problem}`);
    return 1;
  }
  try {
    io.out(await writeHtmlReport(runDir));
    return 0;
  } catch (err) {
    io.err(`memlane report: could not render ${jsonPath}: ${(err as Error).message}`);
    return 1;
  }
}
