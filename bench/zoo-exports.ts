/**
 * The real-zoo exports bench:zoo measures, at benchmark size (224 px images; text models keep
 * their dynamic sequence and are fed seq 128 by compare), cached across runs outside the
 * repository: <cacheDir>/zoo-exports/<key>/NAME.EXPORTER.onnx plus index.json. The key hashes
 * what an export depends on (the realzoo sources, torch/torchvision/transformers/onnx
 * versions, the seed), so a changed model definition or library exports afresh. The zoo suite
 * itself exports into a temp dir per run (64 px), so there is no shared cache to reuse.
 */
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import { cacheDir, writeJsonAtomic } from "../src/estimate/cache.ts";
import { REPO_ROOT } from "../src/workers/specs.ts";
import type { ZooExport } from "../test/zoo/rows.ts";

const PYTHON = join(REPO_ROOT, ".venv/bin/python");
const REALZOO = join(REPO_ROOT, "python/memlane_worker/realzoo");
const DEPS = ["torch", "torchvision", "transformers", "onnx", "onnxscript"];

export const pyEnv = (): NodeJS.ProcessEnv => ({ ...process.env, PYTHONPATH: join(REPO_ROOT, "python"), HF_HUB_OFFLINE: "1" });

function venvVersions(): string[] {
  const lib = join(REPO_ROOT, ".venv", "lib");
  if (!existsSync(lib)) return ["no venv"];
  const out: string[] = [];
  for (const py of readdirSync(lib)) {
    const site = join(lib, py, "site-packages");
    if (!existsSync(site)) continue;
    for (const d of readdirSync(site))
      if (d.endsWith(".dist-info") && DEPS.some((p) => d.toLowerCase().startsWith(`${p}-`))) out.push(d);
  }
  return out.sort();
}

/** The cache folder for this machine's realzoo sources and libraries. */
export function exportsDir(seed: number): string {
  const h = createHash("sha256");
  for (const f of readdirSync(REALZOO).filter((f) => f.endsWith(".py")).sort()) h.update(f).update(readFileSync(join(REALZOO, f)));
  h.update(venvVersions().join(",")).update(`seed=${seed};full-size`);
  return join(cacheDir(), "zoo-exports", h.digest("hex").slice(0, 16));
}

const key = (e: { name: string; exporter: string }): string => `${e.name}.${e.exporter}`;

function readIndex(dir: string): Map<string, ZooExport> {
  const f = join(dir, "index.json");
  if (!existsSync(f)) return new Map();
  const list = JSON.parse(readFileSync(f, "utf8")) as ZooExport[];
  // An entry whose file went missing is exported again.
  return new Map(list.filter((e) => e.error || (e.onnx && existsSync(e.onnx))).map((e) => [key(e), e]));
}

/** The list of realzoo model names (imports no torch). */
export async function zooModels(): Promise<string[]> {
  const out = await runPython(["-m", "memlane_worker.realzoo", "list"]);
  return out.trim().split("\n").filter(Boolean);
}

function runPython(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(PYTHON, args, { cwd: REPO_ROOT, env: pyEnv(), stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => void (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => void (stderr = (stderr + d.toString()).slice(-8000)));
    child.on("error", reject);
    child.on("exit", (code) => (code === 0 ? resolve(stdout) : reject(new Error(`${PYTHON} ${args.join(" ")} exited ${code}:\n${stderr}`))));
  });
}

/**
 * Every asked-for export, from the cache or exported now (all missing ones in one Python
 * process, into a temp folder inside the cache dir, then moved in). A failed export is a
 * record with `error` (cached too: the same sources fail the same way).
 */
export async function zooExports(names: string[], exporters: string[], seed: number, log: (l: string) => void): Promise<Map<string, ZooExport>> {
  const dir = exportsDir(seed);
  mkdirSync(dir, { recursive: true });
  const index = readIndex(dir);
  const missing = names.filter((n) => exporters.some((e) => !index.has(`${n}.${e}`)));
  if (missing.length) {
    log(`bench:zoo: exporting ${missing.join(", ")} (${exporters.join(", ")}) into ${dir}`);
    const tmp = mkdtempSync(join(dir, "tmp-"));
    try {
      const ex = exporters.length === 2 ? "both" : exporters[0]!;
      await runPython(["-m", "memlane_worker.realzoo", "export", ...missing, "--dir", tmp, "--exporter", ex, "--full-size", "--seed", String(seed), "--keep-going"]).catch((e: Error) => {
        if (!existsSync(join(tmp, "manifest.json"))) throw e; // --keep-going exits 1 with a manifest when one failed
      });
      for (const rec of JSON.parse(readFileSync(join(tmp, "manifest.json"), "utf8")) as ZooExport[]) {
        if (rec.onnx) {
          const dest = join(dir, `${key(rec)}.onnx`);
          renameSync(rec.onnx, dest);
          rec.onnx = dest;
        }
        index.set(key(rec), rec);
      }
      writeJsonAtomic(join(dir, "index.json"), [...index.values()]); // a killed run leaves the old index, not half a new one
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  }
  return index;
}
