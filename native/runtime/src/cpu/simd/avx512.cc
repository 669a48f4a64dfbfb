// AVX-512 kernels (see avx512.h). Each function carries target("avx512f"): the rest of the
// library stays x86-64-v3, and callers only come here after have_avx512().
#include "cpu/simd/avx512.h"

#include <algorithm>
#include <cfloat>
#include <vector>
#include <cmath>
#include <cstdlib>

#include "cpu/cpu_features.h"
#include "cpu/conv_act_avx512.h"
#include "cpu/simd/avx512_math.h"
#include "cpu/simd/lanes_avx512.h"
#include "cpu/vmath.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define MEMLANE_SIMD_X86 1
#endif

namespace memlane::cpu::simd {

bool have_avx512() { return use_avx512f(); }  // one switch for every AVX-512 path (cpu_features.h)

#ifdef MEMLANE_SIMD_X86
#define AVX512 __attribute__((target("avx512f")))

namespace {

namespace c = vmath::c;
using detail::exp16;
using detail::tanh16;

// erf by Abramowitz & Stegun 7.1.26, as vmath::erf8.
AVX512 inline __m512 erf16(__m512 x) {
  const __m512i sign_bit = _mm512_set1_epi32(int32_t(0x80000000u));
  const __m512i xi = _mm512_castps_si512(x);
  const __m512i sign = _mm512_and_si512(xi, sign_bit);
  const __m512 ax = _mm512_castsi512_ps(_mm512_andnot_si512(sign_bit, xi));
  const __m512 one = _mm512_set1_ps(1.f);
  const __m512 t = _mm512_div_ps(one, _mm512_fmadd_ps(_mm512_set1_ps(c::kP), ax, one));
  __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(c::kA5), t, _mm512_set1_ps(c::kA4));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(c::kA3));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(c::kA2));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(c::kA1));
  p = _mm512_mul_ps(p, t);
  const __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(ax, ax)));
  const __m512 r = _mm512_fnmadd_ps(p, e, one);
  return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(r), sign));
}

inline __mmask16 tail_mask(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1u); }

// One MR x (16 * NV) tile of C, accumulated over all of K in registers.
// PF: also prefetch pf's K rows of 32 floats (the next column panel of B) into L1, a row a k step.
template <int MR, int NV, bool kRows = false, bool PF = false>
AVX512 inline void tile(int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc,
                        const float* bias, __mmask16 m0, __mmask16 m1, const float* rbias = nullptr,
                        const ConvAct* act = nullptr, const float* pf = nullptr) {
  // Accumulators as named registers (an array of them made GCC store every one to the stack
  // on each k step, 2.7x slower than OpenBLAS); rows past MR are dead code.
  const __m512 i0 = bias ? _mm512_maskz_loadu_ps(m0, bias) : _mm512_setzero_ps();
  const __m512 i1 = NV > 1 && bias ? _mm512_maskz_loadu_ps(m1, bias + 16) : _mm512_setzero_ps();
  __m512 c00 = i0, c01 = i1, c10 = i0, c11 = i1, c20 = i0, c21 = i1, c30 = i0, c31 = i1;
  __m512 c40 = i0, c41 = i1, c50 = i0, c51 = i1, c60 = i0, c61 = i1, c70 = i0, c71 = i1;
  const float* a = A;
  for (int64_t k = 0; k < K; ++k, ++a) {
    const float* b = B + k * ldb;
    const __m512 b0 = _mm512_maskz_loadu_ps(m0, b);
    const __m512 b1 = NV > 1 ? _mm512_maskz_loadu_ps(m1, b + 16) : _mm512_setzero_ps();
    if constexpr (PF) {
      _mm_prefetch(reinterpret_cast<const char*>(pf + k * ldb), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(pf + k * ldb + 16), _MM_HINT_T0);
    }
#define MEMLANE_ROW(r)                                                        \
    if constexpr (MR > r) {                                                   \
      const __m512 av = _mm512_set1_ps(a[r * lda]);                           \
      c##r##0 = _mm512_fmadd_ps(av, b0, c##r##0);                             \
      if constexpr (NV > 1) c##r##1 = _mm512_fmadd_ps(av, b1, c##r##1);       \
    }
    MEMLANE_ROW(0) MEMLANE_ROW(1) MEMLANE_ROW(2) MEMLANE_ROW(3)
    MEMLANE_ROW(4) MEMLANE_ROW(5) MEMLANE_ROW(6) MEMLANE_ROW(7)
#undef MEMLANE_ROW
  }
  if constexpr (kRows) {  // sgemm_nn_rows: row bias and activation before the store
#define MEMLANE_FINISH(r)                                                           \
    if constexpr (MR > r) {                                                         \
      const __m512 rb = _mm512_set1_ps(rbias ? rbias[r] : 0.f);                      \
      c##r##0 = act_vec16(_mm512_add_ps(c##r##0, rb), *act);               \
      if constexpr (NV > 1) c##r##1 = act_vec16(_mm512_add_ps(c##r##1, rb), *act); \
    }
    MEMLANE_FINISH(0) MEMLANE_FINISH(1) MEMLANE_FINISH(2) MEMLANE_FINISH(3)
    MEMLANE_FINISH(4) MEMLANE_FINISH(5) MEMLANE_FINISH(6) MEMLANE_FINISH(7)
#undef MEMLANE_FINISH
  }
#define MEMLANE_STORE(r)                                                            \
  if constexpr (MR > r) {                                                           \
    _mm512_mask_storeu_ps(C + r * ldc, m0, c##r##0);                                \
    if constexpr (NV > 1) _mm512_mask_storeu_ps(C + r * ldc + 16, m1, c##r##1);     \
  }
  MEMLANE_STORE(0) MEMLANE_STORE(1) MEMLANE_STORE(2) MEMLANE_STORE(3)
  MEMLANE_STORE(4) MEMLANE_STORE(5) MEMLANE_STORE(6) MEMLANE_STORE(7)
#undef MEMLANE_STORE
}

constexpr int kMR = 8;

// pf (nullable): the next column panel of B, prefetched by the first full row block: B's rows
// lie ldb apart (a conv's map), K of them, each a stream of its own, more than the hardware
// prefetchers follow (squeezenet1_1's 128 -> 16 squeeze at 55x55: 128 rows 12 KiB apart).
template <int NV, bool kRows = false>
AVX512 void row_blocks(int64_t M, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
                       int64_t ldc, const float* bias, __mmask16 m0, __mmask16 m1, const float* rbias = nullptr,
                       const ConvAct* act = nullptr, const float* pf = nullptr) {
  int64_t i = 0;
  if (pf && M >= kMR) {
    tile<kMR, NV, kRows, true>(K, A, lda, B, ldb, C, ldc, bias, m0, m1, rbias, act, pf);
    i = kMR;
  }
  for (; i + kMR <= M; i += kMR)
    tile<kMR, NV, kRows>(K, A + i * lda, lda, B, ldb, C + i * ldc, ldc, bias, m0, m1, rbias ? rbias + i : nullptr, act);
  const float* rb = rbias ? rbias + i : nullptr;
  const float* a = A + i * lda;
  float* cc = C + i * ldc;
  switch (M - i) {
    case 7: tile<7, NV, kRows>(K, a, lda, B, ldb, cc, ldc, bias, m0, m1, rb, act); break;
    case 6: tile<6, NV, kRows>(K, a, lda, B, ldb, cc, ldc, bias, m0, m1, rb, act); break;
    case 5: tile<5, NV, kRows>(K, a, lda, B, ldb, cc, ldc, bias, m0, m1, rb, act); break;
    case 4: tile<4, NV, kRows>(K, a, lda, B, ldb, cc, ldc, bias, m0, m1, rb, act); break;
    case 3: tile<3, NV, kRows>(K, a, lda, B, ldb, cc, ldc, bias, m0, m1, rb, act); break;
    case 2: tile<2, NV, kRows>(K, a, lda, B, ldb, cc, ldc, bias, m0, m1, rb, act); break;
    case 1: tile<1, NV, kRows>(K, a, lda, B, ldb, cc, ldc, bias, m0, m1, rb, act); break;
    default: break;
  }
}

// The column panel after [j, j + 32) of B, or null where there is none (or the prefetch is
// switched off: MEMLANE_SGEMM_NO_PF=1, an A/B aid).
inline const float* next_panel(const float* B, int64_t j, int64_t N) {
  static const bool on = std::getenv("MEMLANE_SGEMM_NO_PF") == nullptr;
  return on && j + 32 < N ? B + j + 32 : nullptr;
}

AVX512 inline float hsum(__m512 v) { return _mm512_reduce_add_ps(v); }

}  // namespace

AVX512 void sgemm_nn(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
                     float* C, int64_t ldc, const float* bias) {
  // Column panels of 32 (B's panel stays in L1 across every row block), rows 8 at a time.
  for (int64_t j = 0; j < N; j += 32) {
    const int64_t w = std::min<int64_t>(32, N - j);
    const float* bj = bias ? bias + j : nullptr;
    const float* pf = next_panel(B, j, N);
    if (w > 16) row_blocks<2>(M, K, A, lda, B + j, ldb, C + j, ldc, bj, 0xFFFF, tail_mask(w - 16), nullptr, nullptr, pf);
    else row_blocks<1>(M, K, A, lda, B + j, ldb, C + j, ldc, bj, tail_mask(w), 0, nullptr, nullptr, pf);
  }
}

AVX512 void sgemm_nn_rows(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
                          float* C, int64_t ldc, const float* row_bias, const ConvAct& act) {
  for (int64_t j = 0; j < N; j += 32) {
    const int64_t w = std::min<int64_t>(32, N - j);
    const float* pf = next_panel(B, j, N);
    if (w > 16) row_blocks<2, true>(M, K, A, lda, B + j, ldb, C + j, ldc, nullptr, 0xFFFF, tail_mask(w - 16), row_bias, &act, pf);
    else row_blocks<1, true>(M, K, A, lda, B + j, ldb, C + j, ldc, nullptr, tail_mask(w), 0, row_bias, &act, pf);
  }
}

AVX512 float softmax_row_unnormalised(float* s, int64_t n, float scale, const float* mask, int64_t mask_col) {
  const __m512 vs = _mm512_set1_ps(scale);
  __m512 vmax = _mm512_set1_ps(-INFINITY);
  if (mask && mask_col != 1 && mask_col != 0) {  // a strided mask: scalar, then the common passes
    for (int64_t j = 0; j < n; ++j) s[j] = s[j] * scale + mask[j * mask_col];
  }
  const bool scaled_here = !(mask && mask_col != 1 && mask_col != 0);
  const __m512 mb = mask && mask_col == 0 ? _mm512_set1_ps(mask[0]) : _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = tail_mask(n - j);
    __m512 v = _mm512_maskz_loadu_ps(m, s + j);
    if (scaled_here) {
      if (mask && mask_col == 1) v = _mm512_fmadd_ps(v, vs, _mm512_maskz_loadu_ps(m, mask + j));
      else v = _mm512_fmadd_ps(v, vs, mb);
      _mm512_mask_storeu_ps(s + j, m, v);
    }
    vmax = _mm512_mask_max_ps(vmax, m, vmax, v);
  }
  const __m512 mx = _mm512_set1_ps(_mm512_reduce_max_ps(vmax));
  __m512 vsum = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = tail_mask(n - j);
    const __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, s + j), mx));
    _mm512_mask_storeu_ps(s + j, m, e);
    vsum = _mm512_mask_add_ps(vsum, m, vsum, e);
  }
  return hsum(vsum);
}

AVX512 void scale_row(float* y, int64_t n, float k) {
  const __m512 vk = _mm512_set1_ps(k);
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = tail_mask(n - j);
    _mm512_mask_storeu_ps(y + j, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, y + j), vk));
  }
}

AVX512 void gelu(const float* x, float* y, int64_t n) {
  const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.f), rs2 = _mm512_set1_ps(0.7071067811865476f);
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = tail_mask(n - j);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + j);
    const __m512 r = erf16(_mm512_mul_ps(v, rs2));
    _mm512_mask_storeu_ps(y + j, m, _mm512_mul_ps(_mm512_mul_ps(half, v), _mm512_add_ps(one, r)));
  }
}

AVX512 void gelu_tanh(const float* x, float* y, int64_t n) {
  const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.f);
  const __m512 k0 = _mm512_set1_ps(0.7978845608028654f), k1 = _mm512_set1_ps(0.044715f);
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = tail_mask(n - j);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + j);
    const __m512 v3 = _mm512_mul_ps(_mm512_mul_ps(v, v), v);
    const __m512 r = tanh16(_mm512_mul_ps(k0, _mm512_fmadd_ps(k1, v3, v)));
    _mm512_mask_storeu_ps(y + j, m, _mm512_mul_ps(_mm512_mul_ps(half, v), _mm512_add_ps(one, r)));
  }
}

AVX512 void layernorm_rows(const float* x, float* y, int64_t rows, int64_t n, const float* scale, const float* bias,
                           float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t j = 0; j < n; j += 16) acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(tail_mask(n - j), xr + j));
    const float mean = hsum(acc) / float(n);
    const __m512 vm = _mm512_set1_ps(mean);
    acc = _mm512_setzero_ps();
    for (int64_t j = 0; j < n; j += 16) {
      const __mmask16 m = tail_mask(n - j);
      const __m512 d = _mm512_maskz_sub_ps(m, _mm512_maskz_loadu_ps(m, xr + j), vm);
      acc = _mm512_fmadd_ps(d, d, acc);
    }
    const __m512 inv = _mm512_set1_ps(1.f / std::sqrt(hsum(acc) / float(n) + eps));
    for (int64_t j = 0; j < n; j += 16) {
      const __mmask16 m = tail_mask(n - j);
      const __m512 d = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, xr + j), vm), inv);
      const __m512 b = bias ? _mm512_maskz_loadu_ps(m, bias + j) : _mm512_setzero_ps();
      _mm512_mask_storeu_ps(yr + j, m, _mm512_fmadd_ps(d, _mm512_maskz_loadu_ps(m, scale + j), b));
    }
  }
}

AVX512 void row_means(const float* x, int64_t rows, int64_t n, float scale, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* p = x + r * n;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
      a0 = _mm512_add_ps(a0, _mm512_loadu_ps(p + i));
      a1 = _mm512_add_ps(a1, _mm512_loadu_ps(p + i + 16));
      a2 = _mm512_add_ps(a2, _mm512_loadu_ps(p + i + 32));
      a3 = _mm512_add_ps(a3, _mm512_loadu_ps(p + i + 48));
    }
    for (; i + 16 <= n; i += 16) a0 = _mm512_add_ps(a0, _mm512_loadu_ps(p + i));
    if (i < n) a1 = _mm512_add_ps(a1, _mm512_maskz_loadu_ps(tail_mask(n - i), p + i));
    out[r] = scale * hsum(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
  }
}

AVX512 void max3_stride2(const float* b, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const float* p = b + 2 * i;  // taps 0 and 1 from p[0..31], tap 2 from p[2..32]
    const __m512 lo = _mm512_loadu_ps(p), hi = _mm512_loadu_ps(p + 16);
    const __m512 lo2 = _mm512_loadu_ps(p + 2), hi2 = _mm512_maskz_loadu_ps(0x7FFF, p + 18);
    const __m512 m = _mm512_max_ps(even_lanes(lo, hi), odd_lanes(lo, hi));
    _mm512_storeu_ps(out + i, _mm512_max_ps(m, even_lanes(lo2, hi2)));
  }
  if (i < n) {  // the last r < 16 outputs: masked loads of the 2r + 1 floats they read
    // (a scalar loop here was most of the work on 27-wide rows, 13 outputs and no full vector)
    const int64_t r = n - i, avail = 2 * r + 1;
    const float* p = b + 2 * i;
    const auto mk = [&](int64_t from) { return tail_mask(std::clamp<int64_t>(avail - from, 0, 16)); };
    const __m512 lo = _mm512_maskz_loadu_ps(mk(0), p), hi = _mm512_maskz_loadu_ps(mk(16), p + 16);
    const __m512 lo2 = _mm512_maskz_loadu_ps(mk(2), p + 2), hi2 = _mm512_maskz_loadu_ps(mk(18), p + 18);
    const __m512 m = _mm512_max_ps(even_lanes(lo, hi), odd_lanes(lo, hi));
    _mm512_mask_storeu_ps(out + i, tail_mask(r), _mm512_max_ps(m, even_lanes(lo2, hi2)));
  }
}

// Lanes [s, s + 16) of the max over the rows (K of them, or `count` where K = 0) of W floats,
// -FLT_MAX outside [0, W) (masked loads at the edges: only the lanes inside are dereferenced,
// so the base may lie before or past a row).
template <int K>
AVX512 inline __m512 bordered_max(const float* const* rows, int64_t count, int64_t W, int64_t s, __m512 lowest) {
  const int64_t n = K > 0 ? K : count;
  if (s >= 0 && s + 16 <= W) {  // (plain loads where the vector is inside: masked ones measured slower)
    __m512 v = _mm512_loadu_ps(rows[0] + s);
    for (int64_t k = 1; k < n; ++k) v = _mm512_max_ps(v, _mm512_loadu_ps(rows[k] + s));
    return v;
  }
  const int64_t lo = std::clamp<int64_t>(-s, 0, 16), hi = std::clamp<int64_t>(W - s, lo, 16);
  const __mmask16 m = __mmask16(((1u << hi) - 1u) & ~((1u << lo) - 1u));
  __m512 v = _mm512_mask_loadu_ps(lowest, m, rows[0] + s);
  for (int64_t k = 1; k < n; ++k) v = _mm512_max_ps(v, _mm512_mask_loadu_ps(lowest, m, rows[k] + s));
  return v;
}

template <int K>
AVX512 inline void max3_stride2_row(const float* const* rows, int64_t count, int64_t W, int64_t pl, float* out,
                                    int64_t n) {
  const __m512 lowest = _mm512_set1_ps(-FLT_MAX);
  __m512 a = bordered_max<K>(rows, count, W, -pl, lowest);
  for (int64_t i = 0; i < n; i += 16) {
    // a, b, c: b[2i ..], b[2i + 16 ..], b[2i + 32 ..] of the bordered row
    const __m512 b = bordered_max<K>(rows, count, W, 2 * i + 16 - pl, lowest);
    const __m512 c = bordered_max<K>(rows, count, W, 2 * i + 32 - pl, lowest);
    const __m512 e = even_lanes(a, b), o = odd_lanes(a, b);
    // taps 2: b[2i + 2 .. 2i + 32] by even lanes of the row shifted by two
    const __m512 m = _mm512_max_ps(_mm512_max_ps(e, o), even_lanes(shift_lanes<2>(a, b), shift_lanes<2>(b, c)));
    _mm512_mask_storeu_ps(out + i, tail_mask(n - i), m);
    a = c;
  }
}

AVX512 void max3_stride2_pool(const float* x, int64_t H, int64_t W, int64_t OH, int64_t OW, int64_t kh, int64_t sh,
                              int64_t dh, int64_t pt, int64_t pl, float* y) {
  const float* rows[16];
  std::vector<const float*> many;  // (windows of more than 16 rows)
  const float** rp = kh <= 16 ? rows : (many.resize(size_t(kh)), many.data());
  for (int64_t oh = 0; oh < OH; ++oh) {
    int64_t n = 0;
    for (int64_t i = 0; i < kh; ++i) {
      const int64_t ih = oh * sh - pt + i * dh;
      if (ih >= 0 && ih < H) rp[n++] = x + ih * W;
    }
    float* yr = y + oh * OW;
    if (n == 3) max3_stride2_row<3>(rp, 3, W, pl, yr, OW);
    else if (n > 0) max3_stride2_row<0>(rp, n, W, pl, yr, OW);
    else std::fill(yr, yr + OW, -FLT_MAX);  // (a window of pad rows only)
  }
}

#else  // not x86-64: have_avx512() is false, so these are never called.

void sgemm_nn(int64_t, int64_t, int64_t, const float*, int64_t, const float*, int64_t, float*, int64_t, const float*) {
  std::abort();
}
float softmax_row_unnormalised(float*, int64_t, float, const float*, int64_t) { std::abort(); }
void scale_row(float*, int64_t, float) { std::abort(); }
void gelu(const float*, float*, int64_t) { std::abort(); }
void gelu_tanh(const float*, float*, int64_t) { std::abort(); }
void layernorm_rows(const float*, float*, int64_t, int64_t, const float*, const float*, float) { std::abort(); }
void max3_stride2(const float*, float*, int64_t) { std::abort(); }
void max3_stride2_pool(const float*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, float*) {
  std::abort();
}
void row_means(const float*, int64_t, int64_t, float, float*) { std::abort(); }
void sgemm_nn_rows(int64_t, int64_t, int64_t, const float*, int64_t, const float*, int64_t, float*, int64_t, const float*,
                   const ConvAct&) {
  std::abort();
}

#endif

}  // namespace memlane::cpu::simd
