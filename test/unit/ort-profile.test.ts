// node-ort's per-op profile helper (src/workers/ort-profile.mjs) on a real ONNX model and the
// real onnxruntime-node: a good profile sums the model's nodes; a call that fails mid-profile
// still releases the profiling session and removes its temp dir, and its error is reported.
import { readdirSync } from "node:fs";
import os from "node:os";
import { join } from "node:path";
import * as ort from "onnxruntime-node";
import { beforeAll, describe, expect, it } from "vitest";
// @ts-expect-error plain JavaScript module for node-ort's child process, no types
import { profileOrt } from "../../src/workers/ort-profile.mjs";
import { ensureModels } from "../fixtures/onnx/models.ts";
import { ortSession } from "../fixtures/ort-session.ts";

const leftovers = (): string[] => readdirSync(os.tmpdir()).filter((f) => f.startsWith("memlane-node-ort-profile-"));
let model = "";
beforeAll(async () => {
  model = join(ensureModels().dir, "mlp.onnx");
  await (await ortSession(model)).release(); // ORT's first-session telemetry lands in the fixture dir
}, 120_000);

type Session = ort.InferenceSession;
const feed = (s: Session) => s.run({ [s.inputNames[0]!]: new ort.Tensor("float32", new Float32Array(2 * 64), [2, 64]) });

describe("profileOrt", () => {
  it("profiles the model's nodes and leaves no profile dir", async () => {
    const before = new Set(leftovers());
    const p = await profileOrt(ort, model, {}, feed, 2, 3);
    expect(p).toMatchObject({ batch: 2, runs: 3 });
    expect(p.ops.length).toBeGreaterThan(0);
    expect(leftovers().filter((f) => !before.has(f))).toEqual([]);
  });

  it("releases the session and removes its dir when a profiled call fails", async () => {
    const before = new Set(leftovers());
    let seen: Session | null = null;
    let calls = 0;
    const failing = async (s: Session) => {
      seen = s;
      if (++calls === 2) throw new Error("call 2 failed");
      return feed(s);
    };
    await expect(profileOrt(ort, model, {}, failing, 2, 3)).rejects.toThrow("call 2 failed");
    expect(leftovers().filter((f) => !before.has(f))).toEqual([]);
    // A released session refuses further calls.
    await expect(Promise.resolve().then(() => feed(seen!))).rejects.toThrow();
  });
});
