// The shared-memory transport silently falls back to plain file calls on /dev/shm when the
// addon lacks its SharedMemory class (one more copy per read). That fallback once hid an
// addon build that compiled no SharedMemory at all; bootstrap always builds the addon, so
// here the zero-copy path must be the one in use.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { shmBackend } from "../../src/transport/shm.ts";
import { REPO_ROOT } from "../../src/workers/specs.ts";

const addon = join(REPO_ROOT, "native/build/addon/memlane.node");

describe("shared-memory backend", () => {
  it("uses the addon's SharedMemory mapping, not the file fallback", () => {
    expect(existsSync(addon), `${addon} missing: run \`npm run bootstrap\``).toBe(true);
    expect(shmBackend()).toEqual({ kind: "addon" });
  });
});
