// The real Python worker (python/memlane_worker, another engineer's) against this
// supervisor: hello, an error reply, a polite stop. Skipped, visibly, where it is absent.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ErrorCode } from "../../src/transport/protocol.ts";
import { REPO_ROOT, workerSpecs } from "../../src/workers/specs.ts";
import { Supervisor } from "../../src/workers/supervisor.ts";
import { WorkerError } from "../../src/workers/worker-error.ts";
import { rejection } from "./supervisor-helpers.ts";

const present = existsSync(join(REPO_ROOT, "python", "memlane_worker", "__main__.py")) && existsSync(join(REPO_ROOT, ".venv", "bin", "python"));
if (!present) console.warn("SKIP supervisor-python-worker: python/memlane_worker/__main__.py or .venv missing (run npm run bootstrap)");

describe.skipIf(!present)("the Python worker under the supervisor", () => {
  it("says hello, answers an unknown task with UNKNOWN_TASK, and exits 0 on shutdown", async () => {
    const sup = await Supervisor.start({ transport: "ipc" });
    try {
      const w = await sup.spawn(workerSpecs.python({ name: "python-probe" }));
      expect(w.hello.pid).toBe(w.pid);
      expect(w.hello.capabilities).toContain("infer.ort");
      const err = await rejection<WorkerError>(w.run("no.such.task"));
      expect(err).toBeInstanceOf(WorkerError);
      expect(err.code).toBe(ErrorCode.UNKNOWN_TASK);
      expect(w.alive).toBe(true);
      expect((await w.stop()).exitCode).toBe(0);
    } finally {
      await sup.close();
    }
  });
});
