/** Inferred graph + arena -> plan header and weights blob (docs/plan-format.md, "Header"). */
import type { Arena } from "./arena.ts";
import type { Inferred } from "./infer.ts";
import { numel } from "./ir.ts";
import { PLAN_ALIGNMENT, type PlanHeader, type PlanTensor, alignUp } from "./plan-format.ts";

export interface Built {
  header: PlanHeader;
  /** Weights in blob order with their blob offsets. */
  weights: { offset: number; data: Float32Array }[];
  blobBytes: number;
}

/** Ops with an optional trailing input always list it (-1 when absent): a fixed arity. */
const ARITY: Record<string, number> = { Conv: 3, Gemm: 3 };

function withArity(op: string, inputs: string[]): string[] {
  const n = ARITY[op] ?? inputs.length;
  return [...inputs, ...new Array<string>(Math.max(0, n - inputs.length)).fill("")];
}

export function buildPlan(inf: Inferred, arena: Arena, producer: string, source: string): Built {
  const tensors: PlanTensor[] = [];
  const ids = new Map<string, number>();
  const weights: Built["weights"] = [];
  let blob = 0;
  const inputs = new Set(inf.inputs), outputs = new Set(inf.outputs);

  const idOf = (name: string): number => {
    if (!name) return -1;
    const known = ids.get(name);
    if (known !== undefined) return known;
    const c = inf.consts.get(name);
    let t: PlanTensor;
    if (c) {
      const data = c.data instanceof Float32Array ? c.data : Float32Array.from(c.data);
      const bytes = data.length * 4;
      t = { name, dtype: "float32", shape: [...c.dims], kind: "weight", offset: blob, bytes };
      weights.push({ offset: blob, data });
      blob = alignUp(blob + bytes, PLAN_ALIGNMENT);
    } else {
      const shape = inf.shapes.get(name)!;
      const kind = inputs.has(name) ? "input" : outputs.has(name) ? "output" : "activation";
      t = { name: inf.outputNames.get(name) ?? name, dtype: "float32", shape: [...shape], kind, offset: arena.offsets.get(name)!, bytes: numel(shape.slice(1)) * 4 };
    }
    ids.set(name, tensors.length);
    tensors.push(t);
    return tensors.length - 1;
  };

  const inputIds = inf.inputs.map(idOf);
  const ops = inf.nodes.map((n) => ({ op: n.op, name: n.name, inputs: withArity(n.op, n.inputs).map(idOf), outputs: n.outputs.map(idOf), attrs: n.attrs }));
  const outputIds = inf.outputs.map(idOf);
  const header: PlanHeader = {
    producer,
    source,
    tensors,
    inputs: inputIds,
    outputs: outputIds,
    ops,
    arena: { bytesPerSample: arena.bytesPerSample, lowerBoundPerSample: arena.lowerBoundPerSample, alignment: PLAN_ALIGNMENT },
  };
  return { header, weights, blobBytes: blob };
}
