import { execa } from "execa";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { REPO_ROOT } from "../../src/workers/specs.ts";
import { pidAlive, waitUntil } from "./supervisor-helpers.ts";

const script = join(REPO_ROOT, "test", "fixtures", "workers", "orchestrator.ts");

async function startOrchestrator(kinds: string[]) {
  const child = execa("node", ["--import", "tsx", script, ...kinds], { cwd: REPO_ROOT, reject: false, buffer: { stdout: false } });
  const line = await new Promise<string>((resolve, reject) => {
    let out = "";
    child.stdout!.on("data", (d: Buffer) => {
      out += d.toString();
      if (out.includes("\n")) resolve(out.split("\n")[0]!);
    });
    void child.then((r) => reject(new Error(`orchestrator exited early: ${r.stderr}`)));
  });
  const { pids, listeners } = JSON.parse(line) as { pids: number[]; listeners: number };
  return { child, pids, listeners };
}

describe("orchestrator shutdown", () => {
  it("Ctrl-C stops every worker by escalation and exits 130", async () => {
    const { child, pids, listeners } = await startOrchestrator(["echo", "deaf", "stubborn"]);
    expect(listeners).toBe(1);
    expect(pids.every(pidAlive)).toBe(true);
    child.kill("SIGINT");
    const r = await child;
    expect(r.exitCode).toBe(130);
    expect(r.stderr).toContain("SIGINT received, stopping 3 worker(s)");
    expect(pids.filter(pidAlive)).toEqual([]);
  });

  it("SIGTERM does the same and exits 143", async () => {
    const { child, pids } = await startOrchestrator(["echo", "echo"]);
    child.kill("SIGTERM");
    const r = await child;
    expect(r.exitCode).toBe(143);
    expect(pids.filter(pidAlive)).toEqual([]);
  });

  it("a second Ctrl-C kills the workers at once", async () => {
    const { child, pids } = await startOrchestrator(["stubborn"]);
    child.kill("SIGINT");
    await new Promise((r) => setTimeout(r, 100));
    child.kill("SIGINT");
    const r = await child;
    expect(r.exitCode).toBe(130);
    expect(await waitUntil(() => pids.every((p) => !pidAlive(p)), 2000)).toBe(true);
  });

  it("a normal exit without close() leaves no worker running", async () => {
    const { child, pids } = await startOrchestrator(["echo", "stubborn", "--exit-now"]);
    const r = await child;
    expect(r.exitCode).toBe(0);
    expect(await waitUntil(() => pids.every((p) => !pidAlive(p)), 2000)).toBe(true);
  });
});
