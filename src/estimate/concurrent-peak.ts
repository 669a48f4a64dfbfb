/**
 * The highest host RAM a pipeline's stages can hold together under the scheduler's rules
 * (src/pipeline/scheduler.ts): at most `concurrency` stages at once, an exclusive stage
 * alone, stages only once every stage they come after has finished (so a stage never
 * overlaps its ancestors or descendants), and stages with a prediction together only while
 * their predictions sum within the memory budget. Durations are unknown before a run, so
 * this is the worst set the rules allow, not the set a run will meet.
 */
export interface PeakInput {
  stage: string;
  after: string[];
  exclusive: boolean;
  peakMiB: number | null;
}

export interface ConcurrentPeak {
  /** Sum of the predicted peaks of the worst set; 0 when nothing is predicted. */
  peakMiB: number;
  stages: string[];
  /** Stages with no prediction that the rules let run beside that set (their memory comes on top). */
  unestimatedBeside: string[];
  /**
   * True when the search gave up after SEARCH_LIMIT sets (a wide pipeline at a high -j has
   * C(n, j) of them): peakMiB is then a safe upper bound, not a set the rules allow, and
   * `stages` names the worst set found so far.
   */
  upperBound: boolean;
}

/** Sets tried before the exact search gives up for an upper bound; keeps `memlane estimate` well under a second. */
export const SEARCH_LIMIT = 200_000;

function ancestors(stages: readonly PeakInput[]): Map<string, Set<string>> {
  const by = new Map(stages.map((s) => [s.stage, s]));
  const memo = new Map<string, Set<string>>();
  const walk = (name: string): Set<string> => {
    if (memo.has(name)) return memo.get(name)!;
    const out = new Set<string>();
    memo.set(name, out);
    for (const d of by.get(name)?.after ?? []) {
      out.add(d);
      for (const a of walk(d)) out.add(a);
    }
    return out;
  };
  for (const s of stages) walk(s.stage);
  return memo;
}

export function concurrentPeak(stages: readonly PeakInput[], concurrency: number, budgetMiB: number): ConcurrentPeak {
  const anc = ancestors(stages);
  const independent = (a: PeakInput, b: PeakInput) => !anc.get(a.stage)!.has(b.stage) && !anc.get(b.stage)!.has(a.stage);
  const peak = (s: PeakInput) => s.peakMiB ?? 0;
  let best: { sum: number; set: PeakInput[] } = { sum: 0, set: [] };
  // Largest predictions first, so a good set is met early and the bound below prunes the rest.
  const shared = stages.filter((s) => !s.exclusive).sort((a, b) => peak(b) - peak(a));
  const consider = (set: PeakInput[], sum: number) => {
    if (sum > best.sum) best = { sum, set: [...set] };
  };
  for (const s of stages) consider([s], peak(s)); // every stage, exclusive ones included, can run alone
  let tried = 0;
  let gaveUp = false;
  const grow = (start: number, set: PeakInput[], sum: number) => {
    if (set.length > 1) consider(set, sum);
    if (set.length >= concurrency || gaveUp) return;
    // Sorted descending, so the next `room` stages are the most any extension can add.
    let bound = sum;
    for (let i = start; i < Math.min(shared.length, start + concurrency - set.length); i++) bound += peak(shared[i]!);
    if (bound <= best.sum) return;
    for (let i = start; i < shared.length; i++) {
      if (++tried > SEARCH_LIMIT) { gaveUp = true; return; }
      const s = shared[i]!;
      const next = sum + peak(s);
      if (s.peakMiB !== null && next > budgetMiB && set.length > 0) continue; // the scheduler would hold it back
      if (!set.every((x) => independent(x, s))) continue;
      set.push(s);
      grow(i + 1, set, next);
      set.pop();
      if (gaveUp) return;
    }
  };
  grow(0, [], 0);
  const order = new Map(stages.map((s, i) => [s.stage, i]));
  best.set.sort((a, b) => order.get(a.stage)! - order.get(b.stage)!);
  const inSet = new Set(best.set.map((s) => s.stage));
  const beside = best.set.some((s) => s.exclusive) || best.set.length >= concurrency ? [] : shared
    .filter((s) => s.peakMiB === null && !inSet.has(s.stage) && best.set.every((x) => independent(x, s)))
    .sort((a, b) => order.get(a.stage)! - order.get(b.stage)!)
    .map((s) => s.stage);
  if (!gaveUp) return { peakMiB: best.sum, stages: best.set.map((s) => s.stage), unestimatedBeside: beside, upperBound: false };
  // No set of two or more can pass the budget check unless its first stage alone is over it,
  // and none holds more than the `concurrency` largest predictions.
  const topK = shared.slice(0, concurrency).reduce((a, s) => a + peak(s), 0);
  const single = Math.max(0, ...stages.map(peak));
  const bound = Math.max(best.sum, Math.min(topK, Math.max(budgetMiB, single)));
  return { peakMiB: bound, stages: best.set.map((s) => s.stage), unestimatedBeside: beside, upperBound: true };
}
