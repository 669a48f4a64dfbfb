/**
 * Worker SIGKILLs across every stage type (train, export, python, and each benchmark runtime:
 * python-torch, python-ort, node-ort's child Node process, memlane-rt), at seeded random
 * moments. With retries the run completes and says which attempts died; without, it fails
 * with exit 1 and a report marked failed. Every trial ends with the clean-up checks.
 */
import { afterAll, describe, expect, it } from "vitest";
import { announce, rng, scaled, Tally } from "./fault-env.ts";
import { expectClean, expectReportSound, isAlive, removeTrial, reportOf, sleep, startTrial, TINY, type Trial, workers } from "./lifecycle-helpers.ts";

announce("lifecycle-kill");
const tally = new Tally();
afterAll(() => tally.print("lifecycle-kill"));
const random = rng("lifecycle-kill");

/** Worker name (its --name) → the stage it runs in the tiny pipeline. */
const STAGE_OF: Record<string, string> = {
  train: "train",
  export: "export",
  "python-torch": "bench:python-torch",
  "python-ort": "bench:python-ort",
  "node-ort": "bench:node-ort",
  native: "bench:native",
  "python-bridge": "stats",
};

/**
 * Kills the first process of each worker name that `choose` accepts, `delay()` ms after it
 * is seen (if it still lives then); resolves with the names killed once the CLI has exited.
 */
async function killer(trial: Trial, choose: (name: string) => boolean, delay: (name: string) => number): Promise<Map<string, number>> {
  const seen = new Set<string>();
  const killed = new Map<string, number>();
  const pending: Promise<void>[] = [];
  let exited = false;
  void trial.cli.exit.then(() => (exited = true));
  while (!exited) {
    for (const w of workers(trial)) {
      if (seen.has(w.name)) continue;
      seen.add(w.name);
      if (!choose(w.name)) continue;
      const wait = delay(w.name);
      pending.push(
        sleep(wait).then(() => {
          if (!isAlive(w.pid)) return void tally.add(`SIGKILL ${w.name}`, "exited before the kill");
          process.kill(w.pid, "SIGKILL");
          killed.set(w.name, w.pid);
        }),
      );
    }
    await sleep(30);
  }
  await Promise.all(pending);
  return killed;
}

describe("worker SIGKILLs", () => {
  it(`with retries 1 on every stage, the first worker of each stage killed: every stage retried, the run completes (${scaled(1)} run(s))`, async () => {
    for (let i = 0; i < scaled(1); i++) {
      const trial = startTrial(TINY, { MEMLANE_FAULT_RETRIES: "1" }, ["-q"]);
      try {
        // memlane-rt finishes the tiny model in milliseconds: its kill comes at once or never.
        const killed = await killer(trial, () => true, (name) => random.int(0, name === "native" ? 20 : 700));
        const { code, signal } = await trial.cli.exit;
        const label = `run ${i}, killed ${[...killed.keys()].join(", ")}`;
        expect(signal, label).toBeNull();
        expect(code, `${label}\n${trial.cli.stderr().slice(-3000)}`).toBe(0);
        const report = reportOf(trial);
        expect(expectReportSound(report, label)).toBe("complete");
        for (const [name, pid] of killed) {
          const stage = report!.stages.find((s) => s.name === STAGE_OF[name])!;
          expect(stage, `${label}: stage of worker ${name}`).toBeDefined();
          const attempts = stage.attempts!;
          if (attempts.length === 1) {
            // Killed while stopping after its result: the stage had succeeded already.
            expect(attempts[0]!.status, `${label}: ${stage.name}`).toBe("ok");
            tally.add(`SIGKILL ${name}`, "after its result (no retry needed)");
            continue;
          }
          expect(attempts.map((a) => a.status), `${label}: ${stage.name}`).toEqual(["failed", "ok"]);
          expect(attempts[0]!.exit, `${label}: ${stage.name} (pid ${pid})`).toBe("SIGKILL");
          expect(report!.notes!.join("\n"), label).toContain(`stage "${stage.name}" was retried`);
          // A retried benchmark's figures are its second attempt's, never a mix.
          const runtime = report!.runtimes.find((r) => `bench:${r.name}` === stage.name);
          if (runtime) expect(runtime.pid, `${label}: ${stage.name}`).toBe(attempts[1]!.pid);
          tally.add(`SIGKILL ${name}`, "retried, run completed (exit 0)");
        }
        await expectClean(trial, label);
      } finally {
        removeTrial(trial);
      }
    }
  });

  it(`with default retries, a benchmark worker killed: exit 1 naming the stage, a report marked failed (${scaled(1)} run(s))`, async () => {
    for (let i = 0; i < scaled(1); i++) {
      const target = random.pick(["python-torch", "python-ort", "node-ort", "native"] as const);
      const trial = startTrial(TINY, {}, ["-q"]);
      try {
        const killed = await killer(trial, (name) => name === target, (name) => random.int(0, name === "native" ? 20 : 400));
        const { code, signal } = await trial.cli.exit;
        const label = `run ${i}, target ${target}`;
        expect(signal, label).toBeNull();
        const report = reportOf(trial);
        const sound = expectReportSound(report, label);
        if (!killed.has(target)) {
          expect(code, label).toBe(0); // it ended before the kill: nothing to see
          await expectClean(trial, label);
          continue;
        }
        const stage = report?.stages.find((s) => s.name === STAGE_OF[target]);
        if (code === 0) {
          expect(stage?.attempts?.[0]?.status, label).toBe("ok"); // killed while stopping, after its result
          tally.add(`SIGKILL ${target} (no retry)`, "after its result (exit 0)");
        } else {
          expect(code, `${label}\n${trial.cli.stderr().slice(-3000)}`).toBe(1);
          expect(trial.cli.stderr(), label).toMatch(new RegExp(`stage "${STAGE_OF[target]}" failed`));
          expect(trial.cli.stderr(), label).toMatch(/SIGKILL/);
          expect(sound, label).toBe("failed");
          expect(stage?.status, label).toBe("failed");
          expect(stage?.attempts?.map((a) => a.exit), label).toEqual(["SIGKILL"]);
          tally.add(`SIGKILL ${target} (no retry)`, "stage failed, exit 1, report marked failed");
        }
        await expectClean(trial, label);
      } finally {
        removeTrial(trial);
      }
    }
  });
});
