/**
 * A smaps summary grouped by kind (mapping-kinds.ts): per kind RSS, PSS, USS (Private_Clean +
 * Private_Dirty), private dirty and swap, with the files under it; and the growth of each kind
 * between two readings. KiB throughout; the report converts (src/report/breakdown.ts).
 */
import type { SmapsSummary } from "../transport/protocol.ts";
import { classifyMapping, type MappingKind } from "./mapping-kinds.ts";

export interface KindCounts {
  rssKiB: number;
  pssKiB: number;
  ussKiB: number;
  privateDirtyKiB: number;
  swapKiB: number;
}

export interface KindFile extends KindCounts {
  path: string;
}

export interface KindTotals extends KindCounts {
  kind: MappingKind;
  label: string;
  /** Paths under the kind, biggest RSS first (pseudo-names like "[anon]" included). */
  files: KindFile[];
}

const empty = (): KindCounts => ({ rssKiB: 0, pssKiB: 0, ussKiB: 0, privateDirtyKiB: 0, swapKiB: 0 });

function add(into: KindCounts, c: KindCounts): void {
  into.rssKiB += c.rssKiB;
  into.pssKiB += c.pssKiB;
  into.ussKiB += c.ussKiB;
  into.privateDirtyKiB += c.privateDirtyKiB;
  into.swapKiB += c.swapKiB;
}

/** Groups a summary by kind; kinds ordered by RSS, biggest first (ties by name, so the order is stable). */
export function groupByKind(summary: SmapsSummary): KindTotals[] {
  const kinds = new Map<MappingKind, KindTotals>();
  for (const [path, [rss, pss, privateClean, privateDirty, , swap]] of Object.entries(summary)) {
    const { kind, label } = classifyMapping(path);
    let k = kinds.get(kind);
    if (k === undefined) kinds.set(kind, (k = { kind, label, ...empty(), files: [] }));
    const file: KindFile = { path, rssKiB: rss, pssKiB: pss, ussKiB: privateClean + privateDirty, privateDirtyKiB: privateDirty, swapKiB: swap };
    add(k, file);
    k.files.push(file);
  }
  const byRss = <T extends { rssKiB: number }>(key: (x: T) => string) => (a: T, b: T) => b.rssKiB - a.rssKiB || key(a).localeCompare(key(b));
  for (const k of kinds.values()) k.files.sort(byRss((f: KindFile) => f.path));
  return [...kinds.values()].sort(byRss((k: KindTotals) => k.kind));
}

/** Totals over every kind: what smaps_rollup reports for the same moment. */
export function totalOf(kinds: readonly KindCounts[]): KindCounts {
  const t = empty();
  for (const k of kinds) add(t, k);
  return t;
}

export interface KindGrowth {
  kind: MappingKind;
  label: string;
  deltaRssKiB: number;
  deltaUssKiB: number;
  deltaPssKiB: number;
}

/** end − start per kind (a kind absent on one side counts 0 there); biggest |Δ RSS| first. */
export function growthByKind(start: readonly KindTotals[], end: readonly KindTotals[]): KindGrowth[] {
  const out = new Map<MappingKind, KindGrowth>();
  const put = (k: KindTotals, sign: 1 | -1) => {
    let g = out.get(k.kind);
    if (g === undefined) out.set(k.kind, (g = { kind: k.kind, label: k.label, deltaRssKiB: 0, deltaUssKiB: 0, deltaPssKiB: 0 }));
    g.deltaRssKiB += sign * k.rssKiB;
    g.deltaUssKiB += sign * k.ussKiB;
    g.deltaPssKiB += sign * k.pssKiB;
  };
  for (const k of end) put(k, 1);
  for (const k of start) put(k, -1);
  return [...out.values()].sort((a, b) => Math.abs(b.deltaRssKiB) - Math.abs(a.deltaRssKiB) || a.kind.localeCompare(b.kind));
}
