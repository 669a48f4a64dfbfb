/**
 * The addon the shm tests use: the project's build when it has SharedMemory, else a build of
 * the addon's module entry + class registry + native/addon/src/shared_memory.cc made here with
 * g++ (until the CMake glob picks up native/addon/src/). null when neither can be had: the
 * tests then run on the /dev/shm file fallback and say so.
 */
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { loadAddon } from "../../src/memory/gpu-addon.ts";

const root = resolve(import.meta.dirname, "..", "..");
const SOURCES = ["native/addon/addon.cc", "native/addon/class_registry.cc", "native/addon/src/shared_memory.cc"];
const HEADERS = ["native/addon/class_registry.h", "native/addon/src/shared_memory.h"];

let cached: { path: string | undefined; note: string } | null | undefined;

/** `{path}`: undefined means the default addon; `note` says which one, for the test log. */
export function shmAddon(): { path: string | undefined; note: string } | null {
  if (cached !== undefined) return cached;
  try {
    if (loadAddon().SharedMemory) return (cached = { path: undefined, note: "project addon (native/build/addon)" });
  } catch {
    // not built, or built without SharedMemory: build our own below
  }
  try {
    const hash = createHash("sha256");
    for (const f of [...SOURCES, ...HEADERS]) hash.update(readFileSync(join(root, f)));
    const dir = join(tmpdir(), `memlane-shm-addon-${hash.digest("hex").slice(0, 12)}`);
    const out = join(dir, "memlane.node");
    if (!existsSync(out)) {
      mkdirSync(dir, { recursive: true });
      execFileSync("g++", [
        "-shared", "-fPIC", "-std=c++17", "-O2", "-fexceptions", "-fvisibility=hidden",
        "-I/usr/include/node", `-I${join(root, "node_modules/node-addon-api")}`, `-I${join(root, "native/addon")}`,
        "-DNAPI_VERSION=8", "-DNAPI_CPP_EXCEPTIONS", "-DNODE_ADDON_API_DISABLE_DEPRECATED",
        ...SOURCES.map((s) => join(root, s)), "-o", `${out}.tmp`,
      ], { stdio: "pipe" });
      execFileSync("mv", [`${out}.tmp`, out]);
    }
    if (!loadAddon(out).SharedMemory) throw new Error("built addon lacks SharedMemory");
    return (cached = { path: out, note: `test build ${out} (the project addon lacks SharedMemory)` });
  } catch (err) {
    console.log(`[shm] addon unavailable, using the /dev/shm file fallback: ${(err as Error).message.split("\n")[0]}`);
    return (cached = null);
  }
}

/** An addon path that cannot load: forces the file fallback. */
export const NO_ADDON = join(tmpdir(), "memlane-no-such-addon.node");
