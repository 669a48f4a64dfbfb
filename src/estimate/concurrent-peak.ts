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
}

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
  let best: { sum: number; set: PeakInput[] } = { sum: 0, set: [] };
  const shared = stages.filter((s) => !s.exclusive);
  const consider = (set: PeakInput[]) => {
    const sum = set.reduce((a, s) => a + (s.peakMiB ?? 0), 0);
    if (sum > best.sum) best = { sum, set: [...set] };
  };
  for (const s of stages) consider([s]); // every stage, exclusive ones included, can run alone
  const grow = (start: number, set: PeakInput[], sum: number) => {
    if (set.length > 1) consider(set);
    if (set.length >= concurrency) return;
    for (let i = start; i < shared.length; i++) {
      const s = shared[i]!;
      const next = sum + (s.peakMiB ?? 0);
      if (s.peakMiB !== null && next > budgetMiB && set.length > 0) continue; // the scheduler would hold it back
      if (!set.every((x) => independent(x, s))) continue;
      set.push(s);
      grow(i + 1, set, next);
      set.pop();
    }
  };
  grow(0, [], 0);
  const inSet = new Set(best.set.map((s) => s.stage));
  const beside = best.set.some((s) => s.exclusive) || best.set.length >= concurrency ? [] : shared
    .filter((s) => s.peakMiB === null && !inSet.has(s.stage) && best.set.every((x) => independent(x, s)))
    .map((s) => s.stage);
  return { peakMiB: best.sum, stages: best.set.map((s) => s.stage), unestimatedBeside: beside };
}
