/**
 * The per-op profile in report.html (docs/profiling.md): the top ops of every profiled runtime
 * side by side (rank by rank), then the time per op type with one column per runtime, so that
 * "memlane-rt spends 70 % in Conv, ORT 55 % in FusedConv" reads across one row.
 */
import { opLabel, profileCaption, TOP_OPS } from "../profile.ts";
import type { Report } from "../schema.ts";
import { esc } from "./tables.ts";

const ms = (x: number): string => (x >= 10 ? x.toFixed(1) : x >= 0.1 ? x.toFixed(2) : x.toFixed(3));

export function profileTables(report: Report): string {
  const rts = report.runtimes.filter((r) => r.profile);
  if (!rts.length) return "";
  const ok = rts.filter((r) => !r.profile!.unavailable);
  const captions = `<ul class="note">${rts.map((r) => `<li>${esc(profileCaption(r.name, r.profile!))}</li>`).join("")}</ul>`;
  if (!ok.length) return captions;
  const rows = Math.min(TOP_OPS, Math.max(...ok.map((r) => r.profile!.ops.length)));
  const head = `<tr><th rowspan="2">#</th>${ok.map((r) => `<th colspan="4">${esc(r.name)}</th>`).join("")}</tr>` +
    `<tr>${ok.map(() => "<th>op (type)</th><th>ms</th><th>%</th><th>min ms</th>").join("")}</tr>`;
  const body: string[] = [];
  for (let i = 0; i < rows; i++)
    body.push(`<tr><td>${i + 1}</td>${ok.map((r) => {
      const o = r.profile!.ops[i];
      return o ? `<td>${esc(o.name)} <em>(${esc(opLabel(o))}${o.kernel ? `, ${esc(o.kernel)}` : ""})</em></td><td>${ms(o.msPerRun)}</td><td>${o.pct.toFixed(1)}</td><td>${o.minMsPerRun === null ? "—" : ms(o.minMsPerRun)}</td>` : "<td></td><td></td><td></td><td></td>";
    }).join("")}</tr>`);
  const top = `<table id="profile-top-ops"><caption>Slowest ops of each runtime: mean ms per call, % of the sum of its ops, and min ms (the op's fastest kernel call × its calls per call: a floor that preemption on a busy machine does not move).</caption><thead>${head}</thead><tbody>\n${body.join("\n")}\n</tbody></table>`;
  const types = [...new Set(ok.flatMap((r) => r.profile!.byType.map((t) => t.opType)))];
  const total = (t: string): number => ok.reduce((a, r) => a + (r.profile!.byType.find((x) => x.opType === t)?.msPerRun ?? 0), 0);
  types.sort((a, b) => total(b) - total(a));
  const typeRows = types.map((t) => `<tr><td>${esc(t)}</td>${ok.map((r) => {
    const x = r.profile!.byType.find((y) => y.opType === t);
    return x ? `<td>${ms(x.msPerRun)} ms · ${x.pct.toFixed(1)} % · ${x.nodes}</td>` : "<td>—</td>";
  }).join("")}</tr>`);
  const byType = `<table id="profile-op-types"><caption>Time per op type: ms per call · % of the runtime's ops · nodes. Op types are each runtime's own (ORT's after its fusions).</caption>` +
    `<thead><tr><th>op type</th>${ok.map((r) => `<th>${esc(r.name)}</th>`).join("")}</tr></thead><tbody>\n${typeRows.join("\n")}\n</tbody></table>`;
  return captions + top + byType;
}
