/**
 * The DAG scheduler: runs stages once their dependencies are done, at most `concurrency`
 * at a time, and fails fast: the first failing stage aborts the shared signal (which stops
 * the workers of the stages still running), the scheduler waits for them to settle, and
 * rejects with a StageError naming the failed stage.
 */

export interface DagNode<T = unknown> {
  name: string;
  after: readonly string[];
  /** Runs alone: nothing else starts while it runs, and it waits for running stages to end. */
  exclusive?: boolean;
  run: (signal: AbortSignal) => Promise<T>;
  /**
   * The stage's predicted peak host RAM, asked once when it becomes ready (its inputs exist
   * then); null when nothing predicts it. Used only with DagOptions.memory.
   */
  predictPeak?: () => Promise<PeakPrediction | null>;
}

export interface PeakPrediction {
  peakMiB: number;
  /** How the prediction breaks down, for the message of a stage refused for it. */
  parts: string;
}

/** A stage predicted above the whole budget: refused before it starts. */
export class MemoryBudgetError extends Error {
  override readonly name = "MemoryBudgetError";
}

export interface DagOptions {
  concurrency: number;
  signal?: AbortSignal;
  onStart?: (name: string) => void;
  onEnd?: (name: string, error?: unknown) => void;
  /**
   * A host-RAM budget: stages with a predicted peak start together only while their
   * predictions sum to at most `budgetMiB`, and a stage predicted above it fails before it
   * starts. Stages without a prediction are scheduled by `concurrency` alone.
   */
  memory?: { budgetMiB: number };
}

/** A stage failed; `cause` is what it threw (a WorkerError for a worker that died). */
export class StageError extends Error {
  override readonly name = "StageError";
  constructor(
    readonly stage: string,
    override readonly cause: unknown,
  ) {
    super(`stage "${stage}" failed: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
  }
}

/** The stage graph is invalid (unknown dependency, duplicate name, cycle). */
export class PipelineDefinitionError extends Error {
  override readonly name = "PipelineDefinitionError";
}

/** Checks names and dependencies; returns a topological order or throws naming the stages. */
export function validateDag(nodes: readonly Pick<DagNode, "name" | "after">[]): string[] {
  const byName = new Map<string, Pick<DagNode, "name" | "after">>();
  for (const n of nodes) {
    if (byName.has(n.name)) throw new PipelineDefinitionError(`duplicate stage name "${n.name}"`);
    byName.set(n.name, n);
  }
  for (const n of nodes)
    for (const dep of n.after)
      if (!byName.has(dep))
        throw new PipelineDefinitionError(
          `stage "${n.name}" depends on "${dep}", which is not a stage of this pipeline (stages: ${[...byName.keys()].join(", ")})`,
        );
  // Depth-first search with colours; a grey node reached again closes a cycle.
  const colour = new Map<string, 0 | 1 | 2>();
  const order: string[] = [];
  const stack: string[] = [];
  const visit = (name: string): void => {
    const c = colour.get(name) ?? 0;
    if (c === 2) return;
    if (c === 1) {
      const cycle = [...stack.slice(stack.indexOf(name)), name];
      throw new PipelineDefinitionError(`dependency cycle between stages: ${cycle.join(" -> ")}`);
    }
    colour.set(name, 1);
    stack.push(name);
    for (const dep of byName.get(name)!.after) visit(dep);
    stack.pop();
    colour.set(name, 2);
    order.push(name);
  };
  for (const n of nodes) visit(n.name);
  return order;
}

/** Runs the graph; resolves with every stage's result by name. */
export async function runDag<T>(nodes: readonly DagNode<T>[], opts: DagOptions): Promise<Map<string, T>> {
  validateDag(nodes);
  if (!Number.isInteger(opts.concurrency) || opts.concurrency < 1)
    throw new RangeError(`concurrency: expected an integer >= 1, received ${String(opts.concurrency)}`);
  const results = new Map<string, T>();
  const pending = new Map(nodes.map((n) => [n.name, n]));
  const running = new Map<string, { node: DagNode<T>; done: Promise<void> }>();
  const abort = new AbortController();
  const onOuterAbort = (): void => abort.abort(opts.signal?.reason);
  opts.signal?.addEventListener("abort", onOuterAbort, { once: true });
  let failure: StageError | undefined;

  const ready = (n: DagNode<T>): boolean => n.after.every((d) => results.has(d));
  const predicted = new Map<string, PeakPrediction | null>();
  const fitsBudget = (n: DagNode<T>): boolean => {
    const mine = predicted.get(n.name);
    if (!opts.memory || !mine) return true;
    let used = 0;
    for (const name of running.keys()) used += predicted.get(name)?.peakMiB ?? 0;
    return used + mine.peakMiB <= opts.memory.budgetMiB;
  };
  const startable = (n: DagNode<T>): boolean => {
    if (running.size >= opts.concurrency) return false;
    if (!fitsBudget(n)) return false;
    if (n.exclusive) return running.size === 0;
    return ![...running.values()].some((r) => r.node.exclusive);
  };
  /** Predicts every ready stage not yet predicted; a stage above the whole budget fails here. */
  const predictReady = async (): Promise<void> => {
    if (!opts.memory) return;
    for (const n of pending.values()) {
      if (!ready(n) || predicted.has(n.name)) continue;
      const got = n.predictPeak ? await n.predictPeak().catch(() => null) : null;
      // A prediction that is not a finite number is no prediction (NaN would never fit).
      const p = got && Number.isFinite(got.peakMiB) ? got : null;
      predicted.set(n.name, p);
      if (p && p.peakMiB > opts.memory.budgetMiB && !failure) {
        pending.delete(n.name);
        const err = new MemoryBudgetError(
          `predicted peak ${p.peakMiB.toFixed(1)} MiB exceeds the memory budget of ${opts.memory.budgetMiB.toFixed(1)} MiB (${p.parts}); ` +
            "raise --memory-budget or shrink the stage (batch sizes, eval samples)",
        );
        opts.onEnd?.(n.name, err);
        failure = new StageError(n.name, err);
        abort.abort(failure);
      }
    }
  };

  try {
    if (opts.signal?.aborted) throw new StageError("(none)", opts.signal.reason ?? new Error("aborted"));
    while (pending.size > 0 || running.size > 0) {
      if (!failure && !abort.signal.aborted) await predictReady();
      if (!failure && !abort.signal.aborted) {
        for (const n of [...pending.values()]) {
          if (!ready(n) || !startable(n)) continue;
          pending.delete(n.name);
          opts.onStart?.(n.name);
          const done = (async () => {
            try {
              const value = await n.run(abort.signal);
              results.set(n.name, value);
              opts.onEnd?.(n.name);
            } catch (err) {
              opts.onEnd?.(n.name, err);
              if (!failure) {
                failure = err instanceof StageError ? err : new StageError(n.name, err);
                abort.abort(failure);
              }
            } finally {
              running.delete(n.name);
            }
          })();
          running.set(n.name, { node: n, done });
        }
      }
      if (running.size === 0) {
        if (failure || abort.signal.aborted) break;
        if (pending.size > 0)
          // Unreachable after validateDag; kept so a bug cannot spin forever.
          throw new PipelineDefinitionError(`stages can never start: ${[...pending.keys()].join(", ")}`);
        break;
      }
      await Promise.race([...running.values()].map((r) => r.done));
    }
    if (failure) throw failure;
    if (abort.signal.aborted) {
      const reason: unknown = abort.signal.reason;
      throw reason instanceof StageError ? reason : new StageError("(interrupted)", reason ?? new Error("aborted"));
    }
    return results;
  } finally {
    opts.signal?.removeEventListener("abort", onOuterAbort);
  }
}
