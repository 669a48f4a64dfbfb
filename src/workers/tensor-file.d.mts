// Types of tensor-file.mjs (plain JavaScript: the node-ort child imports it under no loader).
export type TypedTensor = Float32Array | Uint16Array | BigInt64Array | Int32Array | Uint8Array;
export interface TensorFileRef {
  type: string;
  /** Bytes from the file's start, a multiple of 64. */
  offset: number;
  /** Elements. */
  length: number;
}
export declare const TYPED: Record<string, new (n: number) => TypedTensor>;
export declare function writeTensorsSync(file: string, tensors: readonly TypedTensor[]): TensorFileRef[];
export declare function readTensorsSync(file: string, refs: readonly unknown[]): TypedTensor[];
