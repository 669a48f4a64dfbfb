// Loads the N-API addon (native/build/addon/memlane.node) and types its GpuProbe class.
// The addon is built by `npm run bootstrap` (CMake); MEMLANE_ADDON overrides the path.
import { createRequire } from "node:module";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import path from "node:path";

const require = createRequire(import.meta.url);
const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");

/** Where the addon is looked for: $MEMLANE_ADDON, else native/build/addon/memlane.node. */
export const DEFAULT_ADDON_PATH = path.join(repoRoot, "native", "build", "addon", "memlane.node");

export interface NativeGpuStatus {
  available: boolean;
  library: string;
  reason?: string;
  detail?: string;
  driverVersion?: string;
  deviceCount?: number;
}
export interface NativeGpuDevice {
  index: number;
  name: string;
  uuid: string;
  totalBytes: number;
  usedBytes: number;
  freeBytes: number;
}
export interface NativeGpuProcess {
  pid: number;
  device: number;
  usedBytes: number | null;
  graphics: boolean;
}
export interface NativeProcessBytes {
  pid: number;
  listed: boolean;
  bytes: number | null;
}
export interface NativeGpuProbe {
  status(): NativeGpuStatus;
  devices(): NativeGpuDevice[];
  processes(): NativeGpuProcess[];
  processUsedBytes(pids: number[]): NativeProcessBytes[];
}
export interface MemlaneAddon {
  classes: string[];
  GpuProbe: new (options?: { library?: string }) => NativeGpuProbe;
  /** mallinfo2's totals in KiB (node-ort's phase readings, src/workers/node-ort-process.mjs); null off glibc; absent in an older build. */
  mallocInfo?: () => { freeKiB: number; inUseKiB: number } | null;
  [other: string]: unknown;
}

const cache = new Map<string, MemlaneAddon>();

/** The addon this process loads: $MEMLANE_ADDON, else the build's. */
export const addonPathInUse = (): string => path.resolve(process.env.MEMLANE_ADDON ?? DEFAULT_ADDON_PATH);

/** Loads the addon once per path; throws an Error naming the path and the fix when missing. */
export function loadAddon(addonPath: string = addonPathInUse()): MemlaneAddon {
  const resolved = path.resolve(addonPath);
  const hit = cache.get(resolved);
  if (hit) return hit;
  if (!existsSync(resolved)) {
    throw new Error(
      `memlane native addon not found at ${resolved}: run \`npm run bootstrap\` to build it ` +
        `(CMake target memlane_addon), or set MEMLANE_ADDON to its path`,
    );
  }
  let addon: MemlaneAddon;
  try {
    addon = require(resolved) as MemlaneAddon;
  } catch (err) {
    throw new Error(
      `memlane native addon at ${resolved} failed to load (${(err as Error).message}): ` +
        "rebuild it with `npm run bootstrap`",
      { cause: err },
    );
  }
  cache.set(resolved, addon);
  return addon;
}
