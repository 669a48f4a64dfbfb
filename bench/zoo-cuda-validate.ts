/**
 * The CUDA backend's load-time validator over the real-zoo models, without a GPU:
 *   node --import tsx bench/zoo-cuda-validate.ts [EXPORTS_DIR]
 * compiles every cached export of bench:zoo (EXPORTS_DIR, default bench/zoo-exports.ts's
 * exportsDir(0); nothing is exported here) into a temp folder, sequence dims fixed at 16,
 * then runs `memlane_cuda_test --host-only` (ctest cuda_host_checks) with
 * MEMLANE_TEST_PLANS on it: every plan must be accepted as the CPU backend accepts it.
 * Exits 1 on a compile or validation failure; the temp folder is removed.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { compileOnnx } from "../src/compiler/index.ts";
import { REPO_ROOT } from "../src/workers/specs.ts";
import { exportsDir } from "./zoo-exports.ts";

interface IndexEntry {
  name: string;
  exporter: string;
  onnx?: string;
  error?: string;
  inputs?: Array<{ name: string; exported: Array<number | string> }>;
}

const SEQ = 16;
const dir = process.argv[2] ?? exportsDir(0);
const test = join(REPO_ROOT, "native/build/runtime/src/cuda/memlane_cuda_test");
if (!existsSync(join(dir, "index.json"))) {
  console.log(`no zoo exports in ${dir} (run npm run bench:zoo once, or pass a folder holding index.json)`);
  process.exit(0);
}
if (!existsSync(test)) {
  console.log(`${test} is missing: memlane-rt was built without nvcc`);
  process.exit(0);
}
const entries = (JSON.parse(readFileSync(join(dir, "index.json"), "utf8")) as IndexEntry[]).filter((e) => !e.error && e.onnx && existsSync(e.onnx));
const out = mkdtempSync(join(tmpdir(), "memlane-zoo-plans-"));
let failed = 0;
try {
  for (const e of entries) {
    // Only the batch may stay symbolic in a plan: the sequence is fixed (docs/plan-format.md).
    const inputShapes: Record<string, number[]> = {};
    for (const i of e.inputs ?? []) inputShapes[i.name] = i.exported.map((d) => (d === "batch" ? -1 : typeof d === "number" ? d : SEQ));
    try {
      const s = await compileOnnx(e.onnx!, join(out, `${e.name}.${e.exporter}.mlplan`), { inputShapes });
      console.log(`compiled ${e.name}.${e.exporter}: ${s.ops} ops`);
    } catch (err) {
      failed++;
      console.log(`FAIL compile ${e.name}.${e.exporter}: ${String(err).slice(0, 300)}`);
    }
  }
  const r = spawnSync(test, ["--host-only"], { env: { ...process.env, MEMLANE_TEST_PLANS: out }, encoding: "utf8" });
  const lines = `${r.stdout}${r.stderr}`.split("\n").filter((l) => l.startsWith("FAIL") || l.startsWith("validated") || l.startsWith("host checks"));
  console.log(lines.join("\n"));
  if (r.status !== 0) failed++;
} finally {
  rmSync(out, { recursive: true, force: true });
}
console.log(failed ? `${failed} failure(s)` : `all ${entries.length} zoo plans accepted by the CUDA validator`);
process.exit(failed ? 1 : 0);
