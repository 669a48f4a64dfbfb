/**
 * The report's "where the RAM goes": a phase's per-mapping summaries (src/memory/phases.ts)
 * grouped by kind (src/memory/breakdown.ts) in MiB, and the one-line texts the markdown and
 * terminal renderers share ("import +188.15 MiB: torch libs +141.02 (USS +139.00), ...").
 */
import { groupByKind, growthByKind, totalOf, type KindTotals } from "../memory/breakdown.ts";
import type { PhaseSmaps } from "../memory/phases.ts";
import type { SmapsSummary } from "../transport/protocol.ts";
import type { MemoryBreakdown, MemoryKindFile, MemoryKindReport, PhaseReport, RuntimeReport } from "./schema.ts";
import { Phase } from "../transport/protocol.ts";

/** Files listed under each kind in report.json; the rest are summed into one `(N more)` entry. */
export const MAX_KIND_FILES = 6;

const mib = (kib: number): number => Math.round((kib / 1024) * 100) / 100;

function filesOf(k: KindTotals, base: SmapsSummary | null): MemoryKindFile[] {
  const shown = k.files.filter((f) => f.rssKiB > 0 || (base?.[f.path]?.[0] ?? 0) > 0);
  const head = shown.slice(0, MAX_KIND_FILES).map((f) => ({
    path: f.path,
    rssMiB: mib(f.rssKiB),
    ussMiB: mib(f.ussKiB),
    deltaRssMiB: base === null ? null : mib(f.rssKiB - (base[f.path]?.[0] ?? 0)),
  }));
  const rest = shown.slice(MAX_KIND_FILES);
  if (rest.length > 0)
    head.push({
      path: `(${rest.length} more)`,
      rssMiB: mib(rest.reduce((a, f) => a + f.rssKiB, 0)),
      ussMiB: mib(rest.reduce((a, f) => a + f.ussKiB, 0)),
      deltaRssMiB: base === null ? null : mib(rest.reduce((a, f) => a + f.rssKiB - (base[f.path]?.[0] ?? 0), 0)),
    });
  return head;
}

/** A phase's breakdown; null when its end mark carried no summary. */
export function breakdownReport(s: PhaseSmaps): MemoryBreakdown | null {
  if (s.end === null) return null;
  const end = groupByKind(s.end);
  const base = s.base === null ? null : groupByKind(s.base);
  const growth = new Map(base === null ? [] : growthByKind(base, end).map((g) => [g.kind, g] as const));
  const endKinds = new Set(end.map((k) => k.kind));
  // A kind that was there at the base and is gone at the end still grew (negatively).
  const gone: KindTotals[] = (base ?? []).filter((k) => !endKinds.has(k.kind)).map((k) => ({ ...k, rssKiB: 0, pssKiB: 0, ussKiB: 0, privateDirtyKiB: 0, swapKiB: 0, files: [] }));
  const kinds: MemoryKindReport[] = [...end, ...gone]
    .map((k) => {
      const g = growth.get(k.kind);
      return {
        kind: k.kind,
        label: k.label,
        rssMiB: mib(k.rssKiB),
        pssMiB: mib(k.pssKiB),
        ussMiB: mib(k.ussKiB),
        privateDirtyMiB: mib(k.privateDirtyKiB),
        swapMiB: mib(k.swapKiB),
        deltaRssMiB: g ? mib(g.deltaRssKiB) : null,
        deltaUssMiB: g ? mib(g.deltaUssKiB) : null,
        deltaPssMiB: g ? mib(g.deltaPssKiB) : null,
        files: filesOf(k, s.base),
      };
    })
    .filter((k) => k.rssMiB > 0 || (k.deltaRssMiB ?? 0) !== 0);
  const total = totalOf(end);
  return {
    kinds,
    totalRssMiB: mib(total.rssKiB),
    totalPssMiB: mib(total.pssKiB),
    totalUssMiB: mib(total.ussKiB),
    growthFrom: base === null ? null : s.baseFrom,
  };
}

const fmt = (x: number): string => x.toFixed(2);
const signedFmt = (x: number): string => (x > 0 ? `+${fmt(x)}` : Number(fmt(x)) === 0 ? fmt(0) : fmt(x));

/**
 * "import +188.15 MiB: torch libs +141.02 (USS +139.00), heap +22.10, anonymous +18.00, rest +7.03":
 * the phase's Δ RSS and its `top` kinds by |Δ RSS| (the first with its Δ USS), the rest summed.
 * null when the phase has no breakdown with growth.
 */
export function growthLine(p: PhaseReport, top = 4): string | null {
  const b = p.breakdown;
  if (!b || b.growthFrom === null) return null;
  const grew = b.kinds.filter((k) => k.deltaRssMiB !== null && Math.abs(k.deltaRssMiB) >= 0.005)
    .sort((x, y) => Math.abs(y.deltaRssMiB!) - Math.abs(x.deltaRssMiB!));
  const parts = grew.slice(0, top).map((k, i) => `${k.label} ${signedFmt(k.deltaRssMiB!)}${i === 0 ? ` (USS ${signedFmt(k.deltaUssMiB ?? 0)})` : ""}`);
  const rest = grew.slice(top).reduce((a, k) => a + k.deltaRssMiB!, 0);
  if (grew.length > top) parts.push(`rest ${signedFmt(rest)}`);
  return `${p.name} ${signedFmt(p.deltaRssMiB)} MiB: ${parts.length > 0 ? parts.join(", ") : "no kind changed"}`;
}

/** The breakdown at the steady state: end of steady-inference, else of the last phase that has one. */
export function steadyBreakdown(r: RuntimeReport): MemoryBreakdown | null {
  const steady = r.phases.find((p) => p.name === Phase.STEADY_INFERENCE)?.breakdown;
  if (steady) return steady;
  for (let i = r.phases.length - 1; i >= 0; i--) if (r.phases[i]!.breakdown) return r.phases[i]!.breakdown!;
  return null;
}

/** "torch libs 141.02 (USS 139.00)": a kind's RSS at the reading, with its USS. */
export const kindCell = (k: MemoryKindReport): string => `${k.label} ${fmt(k.rssMiB)} (USS ${fmt(k.ussMiB)})`;

/** Short name of a file under a kind: its basename, or the pseudo-name itself. */
export const fileName = (path: string): string => (path.startsWith("[") || path.startsWith("(") ? path : path.slice(path.lastIndexOf("/") + 1));
