/** Typed access to ONNX node attributes with their defaults; errors name node and attribute. */
import { CompileError } from "./errors.ts";
import type { ConstTensor, Node } from "./ir.ts";

function bad(n: Node, name: string, expected: string, v: unknown): CompileError {
  return new CompileError(`${n.opType} node "${n.name}": attribute ${name}: expected ${expected}, found ${JSON.stringify(v)}`, "invalid-model", { node: n.name, attribute: name });
}

export function attrInt(n: Node, name: string, def: number): number {
  const v = n.attrs.get(name);
  if (v === undefined) return def;
  if (typeof v !== "number") throw bad(n, name, "an int", v);
  return v;
}

/** Floats and ints are both JS numbers once decoded; the name says what the caller expects. */
export const attrFloat = attrInt;

export function attrInts(n: Node, name: string): number[] | undefined;
export function attrInts(n: Node, name: string, def: number[]): number[];
export function attrInts(n: Node, name: string, def?: number[]): number[] | undefined {
  const v = n.attrs.get(name);
  if (v === undefined) return def;
  if (!Array.isArray(v) || v.some((x) => typeof x !== "number")) throw bad(n, name, "a list of ints", v);
  return v as number[];
}

export function attrString(n: Node, name: string, def: string): string {
  const v = n.attrs.get(name);
  if (v === undefined) return def;
  if (typeof v !== "string") throw bad(n, name, "a string", v);
  return v;
}

export function attrTensor(n: Node, name: string): ConstTensor | undefined {
  const v = n.attrs.get(name);
  if (v === undefined) return undefined;
  if (typeof v !== "object" || Array.isArray(v)) throw bad(n, name, "a tensor", v);
  return v;
}

/** Normalise a possibly negative axis against a rank, or fail naming the node. */
export function normAxis(n: Node, axis: number, rank: number): number {
  const a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) throw new CompileError(`${n.opType} node "${n.name}": axis ${axis} is out of range for rank ${rank}`, "invalid-model", { node: n.name });
  return a;
}
