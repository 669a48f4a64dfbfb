/**
 * Module hooks (node:module register()) that let `memlane run` load a pipeline module from
 * anywhere: a folder with no package.json, or a project that installed memlane.
 *
 * - `import ... from "memlane"` resolves to the copy of memlane that is
 *   running the command, wherever the importing file lives: one Pipeline class, and no
 *   node_modules needed beside a pipeline kept in /tmp.
 * - A TypeScript file (.ts, .tsx, .mts) outside node_modules written with import/export is
 *   loaded as an ES module even when no package.json says "type": "module". Node's own rule
 *   (the nearest package.json's "type", commonjs by default and in `npm init`'s package.json)
 *   would hand it to the CommonJS loader, which fails on Node >= 20.19 with "Cannot require()
 *   ES Module ... in a cycle". This is Node's module-syntax detection for .js, extended to
 *   .ts. Such a module is ESM: `import.meta.dirname`, not `__dirname`. A .cts file, or a .ts
 *   file without import/export, stays CommonJS.
 *
 * Plain JavaScript, because it runs in the loader thread, before tsx's hooks are any use.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

/** memlane's public entry in this checkout (package.json "exports": "."). */
const SELF_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const SELF_ENTRY = pathToFileURL(path.join(SELF_ROOT, "src", "index.ts")).href;

const TS_EXT = /\.(ts|tsx|mts)$/;
// A static import or export at the start of a line: ES module syntax (not `import(`).
const ESM_SYNTAX = /^\s*(import\s*[\w{*"'$]|export\s)/m;

function looksLikeEsm(file) {
  try {
    return ESM_SYNTAX.test(readFileSync(file, "utf8"));
  } catch {
    return false;
  }
}

export async function resolve(specifier, context, nextResolve) {
  // The package's one export ("." in package.json): src/index.ts is the public surface.
  if (specifier === "memlane") return nextResolve(SELF_ENTRY, context);
  const resolved = await nextResolve(specifier, context);
  if (!resolved.url.startsWith("file:") || resolved.format === "module" || resolved.format === "module-typescript") return resolved;
  const file = fileURLToPath(resolved.url);
  if (!TS_EXT.test(file) || file.split(path.sep).includes("node_modules")) return resolved;
  return looksLikeEsm(file) ? { ...resolved, format: "module" } : resolved;
}
