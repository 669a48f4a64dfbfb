/** How `run` and `compare` end: the table, then every file the run wrote. */
import path from "node:path";
import type { RunOutcome } from "../pipeline/run.ts";
import type { Io } from "./io.ts";

/** A path relative to the cwd when it lies below it, else absolute. */
export const shown = (p: string): string => {
  const rel = path.relative(process.cwd(), p);
  return rel && !rel.startsWith("..") ? rel : p;
};

/** Prints the table and the files; returns the exit code: 1 when a declared budget was exceeded. */
export function printOutcome(outcome: RunOutcome, io: Io): number {
  io.out(outcome.table);
  io.out("");
  io.out(`report: ${shown(outcome.reportJson)}`);
  for (const f of outcome.otherFiles) io.out(`        ${shown(f)}`);
  if (outcome.budgetFailures.length === 0) return 0;
  for (const b of outcome.budgetFailures) io.err(`memlane: budget exceeded: ${b.message}`);
  return 1;
}
