/**
 * The eval set the benchmarks feed every runtime: deterministic float32 values in [-1, 1)
 * (an LCG, seed 12345), `rows` rows of the model's per-sample shape. The timed batches are
 * its first N rows, so every runtime times the very same inputs.
 */
export interface BenchInputs {
  dtype: "float32";
  shape: number[];
  data: Float32Array;
}

export function benchInputs(rows: number, sampleShape: readonly number[]): BenchInputs {
  const dims = [rows, ...sampleShape];
  const data = new Float32Array(dims.reduce((a, b) => a * b, 1));
  let s = 12345;
  for (let i = 0; i < data.length; i++) data[i] = ((s = (s * 1103515245 + 12345) % 2147483648) / 2147483648) * 2 - 1;
  return { dtype: "float32", shape: dims, data };
}
