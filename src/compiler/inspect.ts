/** Human-readable plan listing (`memlane inspect`-style output). */
import { fmtDim } from "./ir.ts";
import type { PlanFile } from "./read.ts";
import { sharedWeightBytes } from "./merge-profiles.ts";

function kb(n: number): string {
  return n >= 1 << 20 ? `${(n / (1 << 20)).toFixed(2)} MiB` : n >= 1024 ? `${(n / 1024).toFixed(1)} KiB` : `${n} B`;
}

/** Every profile of the plan; a one-profile plan reads as before. */
export function formatPlan(plan: PlanFile): string {
  if (plan.profiles.length === 1) return formatProfile(plan, plan.header);
  const shared = sharedWeightBytes(plan.profiles);
  return [
    `plan v${plan.version}, ${plan.profiles.length} shape profiles sharing ${kb(shared)} of weights (${kb(plan.blob.length)} blob)`,
    ...plan.profiles.map((h, i) => `profile ${i}:\n` + formatProfile(plan, h).replace(/^/gm, "  ")),
  ].join("\n");
}

function formatProfile(plan: PlanFile, h: PlanFile["header"]): string {
  const t = (id: number) => {
    if (id < 0) return "-";
    const x = h.tensors[id]!;
    return `${x.name}[${x.shape.map(fmtDim).join(",")}]${x.dtype === "float32" ? "" : `:${x.dtype}`}`;
  };
  const weights = h.tensors.filter((x) => x.kind === "weight").reduce((a, x) => a + x.bytes, 0);
  const { bytesPerSample: a, lowerBoundPerSample: lb } = h.arena;
  const lines = [
    `plan ${h.source} (${h.producer}), ${kb(plan.fileLength)}`,
    `  inputs:  ${h.inputs.map(t).join(", ")}`,
    `  outputs: ${h.outputs.map(t).join(", ")}`,
    `  weights: ${kb(weights)} in ${h.tensors.filter((x) => x.kind === "weight").length} tensors`,
    `  arena:   ${kb(a)} per sample (lower bound ${kb(lb)}, ratio ${(lb ? a / lb : 1).toFixed(3)})`,
    `  ops (${h.ops.length}):`,
  ];
  h.ops.forEach((op, i) => {
    const attrs = Object.entries(op.attrs).map(([k, v]) => `${k}=${Array.isArray(v) ? `[${v.join(",")}]` : v}`).join(" ");
    lines.push(`    ${String(i).padStart(3)} ${op.op.padEnd(17)} ${op.inputs.map(t).join(", ")} -> ${op.outputs.map(t).join(", ")}${attrs ? `  {${attrs}}` : ""}`);
  });
  return lines.join("\n");
}
