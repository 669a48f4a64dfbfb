/** How `run` and `compare` end: the table, then every file the run wrote. */
import path from "node:path";
import type { RunOutcome } from "../pipeline/run.ts";
import type { Io } from "./io.ts";

/** A path relative to the cwd when it lies below it, else absolute. */
export const shown = (p: string): string => {
  const rel = path.relative(process.cwd(), p);
  return rel && !rel.startsWith("..") ? rel : p;
};

export function printOutcome(outcome: RunOutcome, io: Io): void {
  io.out(outcome.table);
  io.out("");
  io.out(`report: ${shown(outcome.reportJson)}`);
  for (const f of outcome.otherFiles) io.out(`        ${shown(f)}`);
}
