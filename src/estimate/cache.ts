/**
 * Where calibrations live and what makes one stale. The key names everything the fixed costs
 * depend on: the CPU, the kernel, Node, the ONNX Runtime builds of Node and of the venv, the
 * memlane-rt binary and the probe set; a change in any of them means a new calibration.
 * Directory: $MEMLANE_CACHE_DIR, else $XDG_CACHE_HOME/memlane, else ~/.cache/memlane.
 */
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { cpus, homedir, release } from "node:os";
import { join } from "node:path";
import { REPO_ROOT } from "../workers/specs.ts";
import { CALIBRATION_FORMAT, type Calibration, PROBE_RUN } from "./calibration.ts";
import { PROBES } from "./probe-models.ts";

export function cacheDir(): string {
  if (process.env.MEMLANE_CACHE_DIR) return process.env.MEMLANE_CACHE_DIR;
  const base = process.env.XDG_CACHE_HOME || join(homedir(), ".cache");
  return join(base, "memlane");
}

function packageVersion(name: string): string {
  try {
    const req = createRequire(join(REPO_ROOT, "package.json"));
    return (JSON.parse(readFileSync(req.resolve(`${name}/package.json`), "utf8")) as { version: string }).version;
  } catch {
    return "absent";
  }
}

/** The venv's onnxruntime version from its dist-info directory name (no Python start-up). */
export function venvDistVersion(dist: string): string {
  const lib = join(REPO_ROOT, ".venv", "lib");
  if (!existsSync(lib)) return "absent";
  for (const py of readdirSync(lib)) {
    const site = join(lib, py, "site-packages");
    if (!existsSync(site)) continue;
    const hit = readdirSync(site).find((d) => d.startsWith(`${dist}-`) && d.endsWith(".dist-info"));
    if (hit) return hit.slice(dist.length + 1, -".dist-info".length);
  }
  return "absent";
}

function fileStamp(path: string): string {
  try {
    const st = statSync(path);
    return `${st.size}-${Math.round(st.mtimeMs)}`;
  } catch {
    return "absent";
  }
}

export function calibrationKey(): Record<string, string> {
  const rt = [join(REPO_ROOT, "native/build/runtime/memlane-rt"), join(REPO_ROOT, "native/build/memlane-rt")].find(existsSync);
  return {
    format: String(CALIBRATION_FORMAT),
    cpu: cpus()[0]?.model.trim() ?? "unknown",
    kernel: release(),
    node: process.version,
    onnxruntimeNode: packageVersion("onnxruntime-node"),
    onnxruntimePython: venvDistVersion("onnxruntime"),
    memlaneRt: rt ? fileStamp(rt) : "absent",
    probes: PROBES.map((p) => `${p.name}:${p.evalSamples}`).join(",") + `|${PROBE_RUN.batchSizes.join("x")}`,
  };
}

const keyHash = (key: Record<string, string>) => createHash("sha256").update(JSON.stringify(key)).digest("hex").slice(0, 16);

export function calibrationPath(key: Record<string, string> = calibrationKey()): string {
  return join(cacheDir(), `calibration-${keyHash(key)}.json`);
}

/** The cached calibration for this machine and these libraries, or null. */
export function loadCalibration(key: Record<string, string> = calibrationKey()): Calibration | null {
  const path = calibrationPath(key);
  if (!existsSync(path)) return null;
  try {
    const c = JSON.parse(readFileSync(path, "utf8")) as Calibration;
    return c.format === CALIBRATION_FORMAT && JSON.stringify(c.key) === JSON.stringify(key) ? c : null;
  } catch {
    return null; // a torn or foreign file: recalibrate rather than trust it
  }
}

/**
 * Why no cached calibration fits `key`, for the message that sends the user to `--calibrate`:
 * the fields in which the newest cached one (of this format) differs, e.g. a memlane-rt binary
 * rebuilt since, which a bench running while the native build changes hits half-way. Null
 * where none of this format is cached (the plain "none cached" is then the whole story).
 */
export function calibrationMismatch(key: Record<string, string> = calibrationKey()): string | null {
  let newest: { key: Record<string, string>; at: number } | null = null;
  try {
    for (const f of readdirSync(cacheDir())) {
      if (!/^calibration-[0-9a-f]{16}\.json$/.test(f)) continue;
      const path = join(cacheDir(), f);
      try {
        const c = JSON.parse(readFileSync(path, "utf8")) as Partial<Calibration>;
        if (c.format !== CALIBRATION_FORMAT || !c.key) continue;
        const at = statSync(path).mtimeMs;
        if (!newest || at > newest.at) newest = { key: c.key, at };
      } catch {
        continue; // a torn or foreign file says nothing about why
      }
    }
  } catch {
    return null; // no cache directory
  }
  if (!newest) return null;
  const cached = newest.key;
  const differ = Object.keys(key).filter((k) => cached[k] !== key[k]);
  if (differ.length === 0) return null;
  const when = new Date(newest.at).toISOString().slice(0, 16).replace("T", " ");
  const label: Record<string, string> = { memlaneRt: "memlane-rt build (bytes-mtime)", onnxruntimeNode: "onnxruntime-node", onnxruntimePython: "Python onnxruntime", probes: "probe set" };
  return `the newest cached calibration, of ${when} UTC, was made with another ${differ.map((k) => `${label[k] ?? k} (${cached[k] ?? "none"}, now ${key[k]})`).join(", ")}`;
}

/** Atomic: a reader sees the old calibration or the new one, never half of one. */
/**
 * Writes `value` as JSON to `path` through a temp file and a rename, so a reader (or a second
 * process) never sees half a file; the temp file is removed when the write or rename fails.
 */
export function writeJsonAtomic(path: string, value: unknown): void {
  const tmp = `${path}.${process.pid}.tmp`;
  try {
    writeFileSync(tmp, JSON.stringify(value, null, 1));
    renameSync(tmp, path);
  } catch (e) {
    rmSync(tmp, { force: true });
    throw e;
  }
}

export function saveCalibration(c: Calibration): string {
  const path = calibrationPath(c.key);
  mkdirSync(cacheDir(), { recursive: true });
  writeJsonAtomic(path, c);
  return path;
}
