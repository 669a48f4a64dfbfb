/**
 * Reads a report.json for the commands that judge finished runs (`check`, `diff`): a run
 * directory or the file itself, parsed and validated, or an Error naming the path and what
 * was wrong with it.
 */
import { readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import type { Report } from "./schema.ts";
import { validateReport } from "./validate.ts";

export async function loadReport(dirOrFile: string): Promise<{ report: Report; path: string }> {
  const st = await stat(dirOrFile).catch(() => null);
  if (!st) throw new Error(`${dirOrFile}: no such run directory or report.json`);
  const path = st.isDirectory() ? join(dirOrFile, "report.json") : dirOrFile;
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch {
    throw new Error(`${path}: cannot be read (is the run finished? a run directory holds report.json)`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new Error(`${path}: not valid JSON (${(err as Error).message})`);
  }
  const problems = validateReport(parsed);
  if (problems.length > 0) throw new Error(`${path}: not a memlane report: ${problems.slice(0, 3).join("; ")}`);
  return { report: parsed as Report, path };
}
