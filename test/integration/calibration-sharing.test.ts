// Other processes that map a runtime library while the calibration runs make its USS and PSS
// fits low (src/estimate/calibration-sharing.ts): a real Python process with onnxruntime
// loaded, outside this process's tree, is found by its maps; one of this process's own
// children is not (a run's own workers).
import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { describeSharing, processesSharingRuntimeLibraries } from "../../src/estimate/calibration-sharing.ts";
import { ROOT } from "./pipeline-helpers.ts";

const PYTHON = join(ROOT, ".venv/bin/python");
const HOLD = "import onnxruntime, sys, time; print('ready', flush=True); time.sleep(60)";
const started: number[] = [];
const children: ChildProcess[] = [];

afterEach(() => {
  for (const pid of started.splice(0)) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
  for (const c of children.splice(0)) c.kill("SIGKILL");
});

/** Starts `python -c HOLD` through a shell that exits at once, so init adopts it; resolves its pid once onnxruntime is loaded. */
function startOutsideOurTree(): Promise<number> {
  return new Promise((resolve, reject) => {
    const sh = spawn("sh", ["-c", `"${PYTHON}" -c "${HOLD}" & echo $!; exit 0`], { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    sh.stdout!.on("data", (d: Buffer) => {
      out += d.toString();
      const lines = out.split("\n");
      const pid = Number(lines[0]);
      if (Number.isInteger(pid) && pid > 0 && !started.includes(pid)) started.push(pid);
      if (lines.some((l) => l.trim() === "ready")) resolve(pid);
    });
    sh.on("error", reject);
    setTimeout(() => reject(new Error(`no ready line from the detached python: ${JSON.stringify(out)}`)), 30_000);
  });
}

describe("processes sharing the runtimes' libraries with the calibration", () => {
  it("finds a process outside this one's tree with onnxruntime loaded, and names it", async () => {
    const pid = await startOutsideOurTree();
    const found = processesSharingRuntimeLibraries().find((p) => p.pid === pid);
    expect(found, `pid ${pid} among ${JSON.stringify(processesSharingRuntimeLibraries().map((p) => p.pid))}`).toBeDefined();
    expect(found!.libraries.some((l) => l.includes("onnxruntime"))).toBe(true);
    expect(describeSharing([found!])).toMatch(new RegExp(`1 other process mapped the runtimes' libraries while it ran: .*pid ${pid}: .*onnxruntime`));
  }, 60_000);

  it("leaves out this process's own children", async () => {
    const child = spawn(PYTHON, ["-c", HOLD], { stdio: ["ignore", "pipe", "inherit"] });
    children.push(child);
    await new Promise<void>((resolve, reject) => {
      child.stdout!.on("data", (d: Buffer) => d.toString().includes("ready") && resolve());
      child.on("exit", (code) => reject(new Error(`python exited ${code}`)));
    });
    expect(processesSharingRuntimeLibraries().map((p) => p.pid)).not.toContain(child.pid);
    // Seen from another process (pid 1 as "self"), the same child is found.
    expect(processesSharingRuntimeLibraries(1).map((p) => p.pid)).toContain(child.pid);
  }, 60_000);
});
