// bench:zoo's export cache lives under the one cache root (src/estimate/cache.ts cacheDir):
// $MEMLANE_CACHE_DIR, else $XDG_CACHE_HOME/memlane, else ~/.cache/memlane.
import { homedir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { exportsDir } from "../../bench/zoo-exports.ts";

const saved = { MEMLANE_CACHE_DIR: process.env.MEMLANE_CACHE_DIR, XDG_CACHE_HOME: process.env.XDG_CACHE_HOME };
afterEach(() => {
  for (const [k, v] of Object.entries(saved)) if (v === undefined) delete process.env[k]; else process.env[k] = v;
});

describe("bench:zoo export cache dir", () => {
  it("honours MEMLANE_CACHE_DIR, then XDG_CACHE_HOME, then ~/.cache", () => {
    process.env.MEMLANE_CACHE_DIR = "/x/memlane-cache";
    process.env.XDG_CACHE_HOME = "/x/xdg";
    expect(exportsDir(0)).toMatch(/^\/x\/memlane-cache\/zoo-exports\/[0-9a-f]{16}$/);
    delete process.env.MEMLANE_CACHE_DIR;
    expect(exportsDir(0)).toMatch(/^\/x\/xdg\/memlane\/zoo-exports\/[0-9a-f]{16}$/);
    delete process.env.XDG_CACHE_HOME;
    expect(exportsDir(0).startsWith(join(homedir(), ".cache", "memlane", "zoo-exports"))).toBe(true);
    expect(exportsDir(1)).not.toBe(exportsDir(0)); // the seed is in the key
  });
});
