// The 2-D core of a Transpose whose last output axis is strided in the input: y[a * ys + b] =
// x[a + b * xs] for a < A, b < B. Gathering each output row element by element reads one
// float a cache line (segformer's [3136, 128] -> [128, 3136] token <-> channel transpose: 0.72
// ms, 2.3 GB/s); this reads and writes in 8x8 tiles, transposed in registers on AVX2.
#pragma once

#include <cstdint>

namespace memlane::cpu {

// Tiles of 8 x 8 on AVX2 (-march=x86-64-v3 builds), the ragged edges and other builds element
// by element.
void transpose_tiles(const float* x, int64_t xs, float* y, int64_t ys, int64_t A, int64_t B);

}  // namespace memlane::cpu
