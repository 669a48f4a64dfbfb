/**
 * `memlane run` on a pipeline module kept outside this repository: a folder with no
 * package.json (.ts), a CommonJS project (`npm init`'s "type": "commonjs", .ts and .mjs),
 * and a project that installed memlane with npm from the packed tarball, run with `npx`.
 * Each imports "memlane" by name. The pipeline is small on purpose: an ONNX model written
 * here and the node-ort runtime (no Python worker), so each run takes a few seconds.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { Report } from "../../src/report/schema.ts";
import { init, modelBytes, node } from "../unit/compiler-onnx-builder.ts";
import { ROOT } from "./pipeline-helpers.ts";

const base = mkdtempSync(path.join(os.tmpdir(), "memlane-anywhere-"));
afterAll(() => rmSync(base, { recursive: true, force: true }));

const onnx = path.join(base, "gemm.onnx");
writeFileSync(onnx, modelBytes({
  inputs: [["x", ["N", 4]]], outputs: ["y"],
  inits: [init("w", [4, 3], Array.from({ length: 12 }, (_, i) => i / 12)), init("b", [3], [1, 2, 3])],
  nodes: [node("Gemm", ["x", "w", "b"], ["y"])],
}));

const pipelineSource = (name: string): string => `import { pipeline } from "memlane";

export default pipeline(${JSON.stringify(name)}, { batchSizes: [1, 4], iterations: 3, warmup: 1, concurrency: 1 })
  .export({ onnx: ${JSON.stringify(onnx)}, evalSamples: 8 })
  .benchmark("node-ort");
`;

function run(command: string, args: string[], cwd: string, env: Record<string, string> = {}): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { cwd, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (out += d.toString()));
    child.on("exit", (code) => resolve({ code, out }));
  });
}

function reportOf(dir: string): Report {
  const runs = path.join(dir, "runs");
  const ids = readdirSync(runs);
  expect(ids).toHaveLength(1);
  return JSON.parse(readFileSync(path.join(runs, ids[0]!, "report.json"), "utf8")) as Report;
}

function project(name: string, packageJson?: object): string {
  const dir = path.join(base, name);
  mkdirSync(dir);
  if (packageJson) writeFileSync(path.join(dir, "package.json"), JSON.stringify(packageJson));
  return dir;
}

const memlane = path.join(ROOT, "bin", "memlane.mjs");

describe("memlane run on a pipeline outside the repository, importing \"memlane\"", () => {
  it("a .ts module in a folder with no package.json", async () => {
    const dir = project("bare");
    writeFileSync(path.join(dir, "p.ts"), pipelineSource("bare"));
    const { code, out } = await run(process.execPath, [memlane, "run", "p.ts", "-q"], dir);
    expect(code, out).toBe(0);
    const r = reportOf(dir);
    expect(r.pipeline).toBe("bare");
    expect(r.runtimes.map((x) => x.name)).toEqual(["node-ort"]);
    expect(r.outcome).toBe("complete");
  });

  it(".ts and .mjs modules in a CommonJS project (npm init's package.json)", async () => {
    const dir = project("cjs", { name: "cjs", version: "1.0.0", type: "commonjs" });
    writeFileSync(path.join(dir, "p.ts"), pipelineSource("cjs-ts"));
    writeFileSync(path.join(dir, "p.mjs"), pipelineSource("cjs-mjs"));
    for (const file of ["p.ts", "p.mjs"]) {
      const { code, out } = await run(process.execPath, [memlane, "run", file, "-q", "-o", `runs-${file}`], dir);
      expect(code, `${file}:\n${out}`).toBe(0);
    }
    expect(readdirSync(path.join(dir, "runs-p.ts"))).toHaveLength(1);
    expect(readdirSync(path.join(dir, "runs-p.mjs"))).toHaveLength(1);
  });

  // npm pack of this repository, installed with npm into a fresh project, run with npx. The
  // tarball's dependencies (onnxruntime-node alone is ~290 MiB) are not fetched again: the
  // unpacked package links this checkout's node_modules, .venv and native build, as
  // `npm run bootstrap` inside it would make them, and npm installs it from that folder.
  it("a project that installed the packed package with npm, run with npx", async () => {
    const pack = await run("npm", ["pack", ROOT, "--pack-destination", base, "--silent"], base);
    expect(pack.code, pack.out).toBe(0);
    const tgz = path.join(base, pack.out.trim().split("\n").at(-1)!.trim());
    expect(existsSync(tgz), pack.out).toBe(true);
    const unpacked = path.join(base, "unpacked");
    mkdirSync(unpacked);
    const untar = await run("tar", ["-xzf", tgz, "-C", unpacked], base);
    expect(untar.code, untar.out).toBe(0);
    const pkg = path.join(unpacked, "package");
    for (const [link, target] of [["node_modules", "node_modules"], [".venv", ".venv"], ["native/build", "native/build"]] as const)
      if (existsSync(path.join(ROOT, target))) symlinkSync(path.join(ROOT, target), path.join(pkg, link));
    const dir = project("installed", { name: "installed", version: "1.0.0", private: true });
    const install = await run("npm", ["install", "--offline", "--ignore-scripts", "--no-audit", "--no-fund", pkg], dir);
    expect(install.code, install.out).toBe(0);
    writeFileSync(path.join(dir, "p.ts"), pipelineSource("installed"));
    const { code, out } = await run("npx", ["--offline", "memlane", "run", "p.ts", "-q"], dir);
    expect(code, out).toBe(0);
    expect(reportOf(dir).pipeline).toBe("installed");
  });
});
