/**
 * Fresh processes that see different address layouts. What glibc's malloc holds after ORT's
 * session creation depends on where the process's allocations land, and the size of its
 * environment moves that: Qwen2's held bytes after python-ort's load were 10.4, 13.9, 14.9,
 * 17.9 or 22.0 MiB in fresh workers that differed only in TMPDIR's length, while workers of one
 * environment agreed within 0.01 MiB (docs/memory.md, "Two coins, a message and a tail"). A benchmark
 * worker's TMPDIR is its run's scratch folder, whose length the output folder decides, so its
 * level is a draw the estimate cannot foresee. So each load probe run gets an environment of
 * another size, the probe's range spans levels a worker may land on, and the estimate takes its
 * middle (ort-load.ts heldEstimateMiB) instead of one level's figure. The PyTorch probe's draws
 * of a short run (torch-terms.ts) do the same: tiny-gpt's infer run grew 24.6 MiB in both of two
 * workers of one environment, 28.3 in both of two of another.
 */

/** The variable whose length differs from draw to draw; no library reads it. */
export const LAYOUT_DRAW_VAR = "MEMLANE_LAYOUT_DRAW";

/** Lengths of LAYOUT_DRAW_VAR's value, draw by draw (none for the first: a plain worker's environment). */
const LENGTHS = [-1, 17, 41, 70, 103];

/** The Python load probe's runs: one a length. */
export const LAYOUT_DRAWS = LENGTHS.length;

/** The environment of draw `i` (0, 1, ...). */
export function layoutDrawEnv(i: number): Record<string, string> {
  const n = LENGTHS[i % LENGTHS.length]! + 128 * Math.floor(i / LENGTHS.length);
  return n < 0 ? {} : { [LAYOUT_DRAW_VAR]: "x".repeat(n) };
}
