// AVX-512 kernels for the transformer ops, picked at run time (the library is built for
// x86-64-v3; these functions carry their own target attribute). Callers check have_avx512()
// and keep their portable path otherwise. Everything here works on raw row-major pointers.
#pragma once

#include <cstdint>

#include "cpu/conv_act.h"

namespace memlane::cpu::simd {

// True on an x86-64 CPU with AVX-512F (and MEMLANE_CPU_NO_AVX512 unset: a switch for tests and
// for timing the portable path).
bool have_avx512();

// C[M x N] = A[M x K] x B[K x N] (+ bias[N] on every row, when not null), row-major with
// leading dims lda, ldb, ldc, any sizes, no packing: for the small per-head products of
// attention and batched MatMul, where B fits in L1/L2 and OpenBLAS's per-call setup and
// packing cost more than the product. Needs have_avx512().
void sgemm_nn(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
              int64_t ldc, const float* bias = nullptr);

// sgemm_nn (no column bias) with each row of C finished in registers before its store:
// + row_bias[i] (when not null), then the activation: a pointwise conv's product (rows =
// output channels, columns = pixels) with its bias and folded activation, no pass after.
void sgemm_nn_rows(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
                   int64_t ldc, const float* row_bias, const ConvAct& act);

// One attention score row in place: s = s * scale + mask (mask may be null; element j at
// mask[j * mask_col]), then s = exp(s - max(s)). Returns the sum of the exponentials.
float softmax_row_unnormalised(float* s, int64_t n, float scale, const float* mask, int64_t mask_col);

// y[i] *= k over n floats.
void scale_row(float* y, int64_t n, float k);

// y = gelu(x) (erf form) and y = gelu_tanh(x), the same formulas as vmath.h, 16 lanes.
void gelu(const float* x, float* y, int64_t n);
void gelu_tanh(const float* x, float* y, int64_t n);

// LayerNorm over `rows` rows of n: two passes for mean and variance (as layernorm.cc), one
// for scale and shift. bias may be null.
void layernorm_rows(const float* x, float* y, int64_t rows, int64_t n, const float* scale, const float* bias,
                    float eps);

// out[r] = scale * (the sum of x[r * n .. r * n + n)) for r < rows: GlobalAveragePool over
// NCHW planes (SE blocks' 7x7-28x28 maps), four independent 16-lane sums a plane, a masked
// tail and one tree reduction.
void row_means(const float* x, int64_t rows, int64_t n, float scale, float* out);

// out[i] = max(b[2i], b[2i+1], b[2i+2]) for i < n (a 3-wide, stride-2 max pool row); reads
// b[0 .. 2n] only (the last n % 16 outputs by masked loads).
void max3_stride2(const float* b, float* out, int64_t n);

// A 3-wide, stride-2 max pool of one H x W plane into OH x OW (kh rows a window, row stride
// sh, row dilation dh, pads pt / pl; ceil mode's last windows by OH / OW): each output row is
// the max over its window's rows (inside the map) then over its columns, where columns
// outside [0, W) count as -FLT_MAX, all in registers (a scratch row between the two maxima
// cost a failed store-to-load forward a vector: the taps' odd-offset loads span two stores).
void max3_stride2_pool(const float* x, int64_t H, int64_t W, int64_t OH, int64_t OW, int64_t kh, int64_t sh,
                       int64_t dh, int64_t pt, int64_t pl, float* y);

}  // namespace memlane::cpu::simd
