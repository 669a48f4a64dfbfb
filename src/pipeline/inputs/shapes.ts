/**
 * From an ONNX model's inputs and outputs to the IoSpecs of the infer tasks
 * (docs/worker-tasks.md, "Several inputs and outputs"): which axis of each input is
 * the batch, and a number for every other dimension.
 *
 * The batch axis of an input is, in order: a symbolic dim named like a batch (`batch`,
 * `batch_size`, `N`, `B`, `bs`, `s0`); else dim 0 when it is symbolic; else dim 0 when it is a
 * static 1 (a model exported for batch 1: it runs batch 1 only); else its first symbolic dim.
 * A fully static input is batch-first with its static batch when no input of the model has a
 * free batch, and has no batch (batchAxis -1, fed as is) when another input has one.
 * Every other symbolic dim takes its value from `--shape` (also through another input that
 * shares the dim's name), else the sequence length `seq` (default 128).
 */
import type { DType } from "../../transport/protocol.ts";
import type { OnnxIo, OnnxValue } from "./onnx-io.ts";

/** One graph input or output of an infer task (IO-CONTRACT: `args.io`). */
export interface IoSpec {
  name: string;
  dtype: DType;
  /** The model's shape, every dim resolved, -1 at the batch axis (outputs: 0 for a dim unknown before running). */
  shape: number[];
  /** Index of the -1 in `shape`; -1 when the tensor has no batch. */
  batchAxis: number;
}

export interface ModelIo {
  inputs: IoSpec[];
  outputs: IoSpec[];
}

/** `--shape` entries: input name → full shape, "N" (or any number, ignored) at the batch axis. */
export type ShapeOverrides = Record<string, Array<number | "N">>;

export const DEFAULT_SEQ = 128;

/** A bad `--shape`, `--seq` or model input: names the option or the input. */
export class InputSpecError extends Error {
  override readonly name = "InputSpecError";
  constructor(message: string, readonly option?: string) {
    super(message);
  }
}

/** Parses `name=1x128,other=1x3x224x224` (trtexec's `--shapes`); `N` marks the batch. */
export function parseShapeFlag(raw: string, flag = "--shape"): ShapeOverrides {
  const out: ShapeOverrides = {};
  for (const part of raw.split(",").filter((p) => p !== "")) {
    const eq = part.lastIndexOf("=");
    const name = eq > 0 ? part.slice(0, eq) : "";
    const dims = eq > 0 ? part.slice(eq + 1).split("x") : [];
    if (name === "" || dims.length === 0 || dims.some((d) => !/^(\d+|N)$/.test(d) || d === "0"))
      throw new InputSpecError(`${flag}: expected name=DIMxDIM... (e.g. input_ids=1x128; positive integers, N for the batch), received ${JSON.stringify(part)}`, flag);
    if (name in out) throw new InputSpecError(`${flag}: input "${name}" given more than once`, flag);
    out[name] = dims.map((d) => (d === "N" ? "N" : Number(d)));
  }
  if (Object.keys(out).length === 0) throw new InputSpecError(`${flag}: expected name=DIMxDIM..., received ${JSON.stringify(raw)}`, flag);
  return out;
}

const BATCH_NAME = /batch|^(n|b|bs|s0)$/i;
const isSym = (d: number | string | undefined): d is string | undefined => typeof d !== "number";

function batchAxisOf(dims: (number | string | undefined)[]): number | null {
  const named = dims.findIndex((d) => typeof d === "string" && BATCH_NAME.test(d));
  if (named >= 0) return named;
  if (dims.length > 0 && (isSym(dims[0]) || dims[0] === 1)) return 0;
  const first = dims.findIndex(isSym);
  return first >= 0 ? first : null;
}

const fmt = (dims: readonly (number | string | undefined)[]): string => `[${dims.map((d) => (d === undefined ? "?" : String(d))).join(", ")}]`;

/** Resolves every input and output; `fromFile` (shapes of `--inputs` arrays) fixes dims like `--shape` does. */
export function resolveModelIo(
  io: OnnxIo,
  opts: { shapes?: ShapeOverrides; seq?: number; fromFile?: Record<string, number[]> } = {},
): ModelIo & { staticBatch: number | null } {
  const shapes = opts.shapes ?? {};
  const seq = opts.seq ?? DEFAULT_SEQ;
  const names = io.inputs.map((i) => i.name);
  for (const n of Object.keys(shapes))
    if (!names.includes(n)) throw new InputSpecError(`--shape: the model has no input "${n}" (its inputs: ${names.join(", ")})`, "--shape");
  for (const i of io.inputs) {
    if (i.dtype === null)
      throw new InputSpecError(`${io.file}: input "${i.name}" has element type ${i.elemTypeName}; memlane feeds float32, float16, int64, int32, bool and uint8`);
    if (i.dims === null && !shapes[i.name] && !opts.fromFile?.[i.name])
      throw new InputSpecError(`${io.file}: input "${i.name}" has no shape in the model; give it with --shape ${i.name}=DIMxDIM...`, "--shape");
  }
  const dimsOf = (i: OnnxValue) => i.dims ?? (shapes[i.name] ?? opts.fromFile![i.name]!).map(() => undefined);
  const axes = new Map(io.inputs.map((i) => [i.name, batchAxisOf(dimsOf(i))]));
  const freeBatch = io.inputs.some((i) => {
    const a = axes.get(i.name);
    return a !== null && a !== undefined && isSym(dimsOf(i)[a]);
  });
  const bound = new Map<string, { value: number; from: string }>(); // symbolic dim name → value
  const given = new Map<string, number[]>(); // input → dims fixed by --shape or the file (batch axis 0 there)
  const bind = (input: OnnxValue, dims: readonly (number | "N")[], option: string): void => {
    const model = dimsOf(input);
    if (dims.length !== model.length)
      throw new InputSpecError(`${option}: input "${input.name}" has rank ${model.length} ${fmt(model)}, received ${dims.length} dims [${dims.join("x")}]`, option);
    const axis = axes.get(input.name);
    const fixed: number[] = [];
    dims.forEach((d, k) => {
      const m = model[k];
      if (k === axis && (isSym(m) || d === "N")) return void fixed.push(0);
      if (d === "N") throw new InputSpecError(`${option}: input "${input.name}" dim ${k} is not its batch axis (${axis ?? "none"}); give a number there`, option);
      if (typeof m === "number" && m !== d)
        throw new InputSpecError(`${option}: input "${input.name}" dim ${k} is fixed at ${m} by the model ${fmt(model)}, received ${d}`, option);
      if (typeof m === "string") {
        const b = bound.get(m);
        if (b && b.value !== d) throw new InputSpecError(`${option}: dim "${m}" of input "${input.name}" is ${d}, but ${b.from} makes it ${b.value}`, option);
        bound.set(m, { value: d, from: `input "${b ? b.from : input.name}"` });
      }
      fixed.push(d);
    });
    given.set(input.name, fixed);
  };
  for (const i of io.inputs) if (shapes[i.name]) bind(i, shapes[i.name]!, "--shape");
  for (const i of io.inputs) if (opts.fromFile?.[i.name] && !given.has(i.name)) bind(i, opts.fromFile[i.name]!, "--inputs");

  let staticBatch: number | null = null;
  const inputs: IoSpec[] = io.inputs.map((i) => {
    const dims = dimsOf(i);
    let axis = axes.get(i.name) ?? null;
    if (axis !== null && !isSym(dims[axis]) && freeBatch && dims.every((d) => !isSym(d))) axis = null; // a fully static side input
    if (axis === null && !freeBatch && dims.length > 0) axis = 0;
    if (axis !== null && typeof dims[axis] === "number") {
      const b = dims[axis] as number;
      if (staticBatch !== null && staticBatch !== b)
        throw new InputSpecError(`${io.file}: inputs disagree on the static batch (${staticBatch} and ${b} for "${i.name}" ${fmt(dims)})`);
      staticBatch = b;
    }
    const shape = dims.map((d, k) => {
      if (k === axis) return -1;
      const g = given.get(i.name)?.[k];
      if (g !== undefined) return g;
      if (typeof d === "number") return d;
      const value = (d !== undefined ? bound.get(d)?.value : undefined) ?? seq;
      if (d !== undefined && !bound.has(d)) bound.set(d, { value, from: "--seq" }); // outputs sharing the name follow
      return value;
    });
    return { name: i.name, dtype: i.dtype!, shape, batchAxis: axis ?? -1 };
  });

  const batchNames = new Set(io.inputs.flatMap((i) => {
    const a = axes.get(i.name);
    const d = a !== null && a !== undefined ? dimsOf(i)[a] : undefined;
    return typeof d === "string" ? [d] : [];
  }));
  const outputs: IoSpec[] = io.outputs.map((o) => {
    const dims = o.dims ?? [];
    let axis = dims.findIndex((d) => typeof d === "string" && batchNames.has(d));
    if (axis < 0) axis = o.dims === null || dims.length === 0 ? (o.dims === null ? 0 : -1) : (batchAxisOf(dims) ?? (freeBatch ? -1 : 0));
    const shape = dims.map((d, k) => (k === axis ? -1 : typeof d === "number" ? d : (d !== undefined ? bound.get(d)?.value : undefined) ?? 0));
    return { name: o.name, dtype: o.dtype ?? "float32", shape, batchAxis: axis };
  });
  return { inputs, outputs, staticBatch };
}

/** The full shape of an input at batch `n` (`--shape` style, for the compiler and messages). */
export function shapeAt(spec: IoSpec, n: number): number[] {
  return spec.shape.map((d, k) => (k === spec.batchAxis ? n : d));
}
