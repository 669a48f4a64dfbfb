/** Writes runs/<runId>/report.json and report.md atomically (temp file + rename). */
import { mkdir, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { renderMarkdown } from "./markdown.ts";
import type { Report } from "./schema.ts";

/** Writes `text` to `path` through a temp file in the same directory, then renames it. */
export async function writeFileAtomic(path: string, text: string): Promise<void> {
  const tmp = `${path}.${process.pid}.${Date.now()}.tmp`;
  try {
    await writeFile(tmp, text, { mode: 0o644 });
    await rename(tmp, path);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
}

/**
 * JSON with 2-space indentation, except arrays of plain numbers/nulls (timeline samples,
 * shapes) which stay on one line so that a long timeline stays readable and small.
 */
export function stringifyReport(report: Report): string {
  const text = JSON.stringify(report, null, 2);
  const flat = /\[\s+((?:-?\d[\d.eE+-]*|null)(?:,\s+(?:-?\d[\d.eE+-]*|null))*)\s+\]/g;
  return `${text.replace(flat, (_m, inner: string) => `[${inner.replace(/,\s+/g, ", ")}]`)}\n`;
}

export interface WrittenReport {
  dir: string;
  json: string;
  markdown: string;
}

/**
 * Writes report.json and report.md under `<runsDir>/<runId>/` (created if needed).
 * `runsDir` defaults to `runs` relative to the working directory.
 */
export async function writeReport(report: Report, runsDir = "runs"): Promise<WrittenReport> {
  if (!/^[\w.-]+$/.test(report.runId) || report.runId === "." || report.runId === "..")
    throw new Error(`writeReport: report.runId must be a plain directory name ([A-Za-z0-9_.-]), received ${JSON.stringify(report.runId)}`);
  const dir = join(runsDir, report.runId);
  await mkdir(dir, { recursive: true });
  const json = join(dir, "report.json");
  const markdown = join(dir, "report.md");
  await writeFileAtomic(json, stringifyReport(report));
  await writeFileAtomic(markdown, renderMarkdown(report));
  return { dir, json, markdown };
}
