/**
 * What a multi-profile plan costs in memory (docs/plan-format.md, "Profiles"): a BERT-style
 * encoder (width 256, FFN 1024, vocabulary 8000) compiled for seq 512 alone and for seq
 * 128/256/512 in one plan, each loaded in a fresh memlane-rt worker (CPU, one thread, maxBatch 8)
 * and run once at each of its lengths; then the worker's USS from /proc/<pid>/smaps_rollup.
 * Prints both, their ratio, and the plan's own figures (weights, arena).
 *
 *   node --import tsx bench/profiles.ts
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { compileOnnx } from "../src/compiler/index.ts";
import { readSmapsRollup } from "../src/memory/proc.ts";
import { Supervisor } from "../src/workers/supervisor.ts";
import { REPO_ROOT, venvPython, workerSpecs } from "../src/workers/specs.ts";

const SEQS = [128, 256, 512];
const BATCH = 8;
const dir = mkdtempSync(join(tmpdir(), "memlane-bench-profiles-"));
const mib = (kib: number) => (kib / 1024).toFixed(2);

async function measure(sup: Supervisor, plan: string, seqs: number[]) {
  const rt = await sup.spawn(workerSpecs.memlaneRt({ args: ["--device", "cpu", "--threads", "1"] }));
  try {
    const loaded = await rt.run("load", { model: plan, maxBatch: BATCH, device: "cpu" });
    for (const s of seqs) {
      const t = (v: bigint) => ({ dtype: "int64" as const, shape: [BATCH, s], data: new BigInt64Array(BATCH * s).fill(v) });
      await rt.run("run", {}, { tensors: { "input:ids": t(1n), "input:mask": t(1n) } });
    }
    const uss = (await readSmapsRollup(rt.pid!))!.ussKiB;
    return { uss, arena: loaded.value.arenaBytes as number, weights: loaded.value.weightsBytes as number };
  } finally {
    await rt.stop();
  }
}

try {
  execFileSync(venvPython(), [join(REPO_ROOT, "test/fixtures/onnx/make_seq_model.py"), dir, SEQS.join(","), "256,1024,8000"], { stdio: ["ignore", "ignore", "inherit"], env: { ...process.env, PYTHONWARNINGS: "ignore" } });
  const onnx = join(dir, JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8")).onnx as string);
  const shapes = (s: number) => ({ ids: [-1, s], mask: [-1, s] });
  const one = join(dir, "one.mlplan"), three = join(dir, "three.mlplan");
  const c1 = await compileOnnx(onnx, one, { inputShapes: shapes(512) });
  const c3 = await compileOnnx(onnx, three, { profiles: SEQS.map(shapes) });
  const sup = await Supervisor.start();
  try {
    // Interleaved, twice: USS moves with what else maps the same libraries.
    const rows: { name: string; uss: number; arena: number; weights: number }[] = [];
    for (let r = 0; r < 2; r++) {
      rows.push({ name: "seq 512 only", ...(await measure(sup, one, [512])) });
      rows.push({ name: "3 profiles", ...(await measure(sup, three, SEQS)) });
    }
    console.log(`plan files: one profile ${(c1.planBytes / 2 ** 20).toFixed(2)} MiB, three ${(c3.planBytes / 2 ** 20).toFixed(2)} MiB`);
    console.log(`arena per sample: ${c3.profiles.map((p, i) => `seq ${SEQS[i]} ${(p.arenaBytesPerSample / 1024).toFixed(0)} KiB`).join(", ")}`);
    console.log("plan           USS MiB  arena MiB  weights MiB");
    for (const x of rows) console.log(`${x.name.padEnd(14)} ${mib(x.uss).padStart(7)}  ${mib(x.arena / 1024).padStart(9)}  ${mib(x.weights / 1024).padStart(11)}`);
    const avg = (n: string) => rows.filter((x) => x.name === n).reduce((a, x) => a + x.uss, 0) / 2;
    console.log(`USS 3 profiles / seq 512 only: ${(avg("3 profiles") / avg("seq 512 only")).toFixed(3)} (+${mib(avg("3 profiles") - avg("seq 512 only"))} MiB)`);
  } finally {
    await sup.close();
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
