// AVX2+FMA sgemm_nn / sgemm_nn_rows (avx2_gemm.h): register tiles of 4 rows x 24 columns,
// twelve 8-lane accumulators, B's three vectors loaded and A broadcast each k step (16 ymm
// registers in all: 12 + 3 + 1). Zen 3 issues two FMAs a cycle at 4 cycles' latency, so 12
// independent chains keep both pipes busy, and 7 loads a step stay under its 3 a cycle.
// Column panels of 24 outer, each in slices of 256 k steps copied into a contiguous buffer
// (panel(): it then stays in L1 across the row blocks), 4-row blocks inner; the last panel's
// last vector masked. A last panel of 9-16 columns takes 6-row blocks, one of 1-8 columns 8-row
// blocks (12 and 8 chains, not 8 and 4); the last row block is what is left; a last 1-4 columns
// after a full panel, dot products along K (dot_tail). Where A is too large for L2, the order
// is blocked instead: K slices, column blocks of B packed together, row blocks inner (blocked()).
#include "cpu/simd/avx2_gemm.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#include <algorithm>

#include "cpu/conv_act_avx2.h"
#include "cpu/simd/lanes_avx2.h"
#define MEMLANE_AVX2_GEMM 1
#endif

#include <cstdlib>

namespace memlane::cpu::simd {

#ifdef MEMLANE_AVX2_GEMM

bool have_avx2_gemm() { return true; }

namespace {

// One MR x (8 * NV) tile of C over all of K in registers (MR x NV <= 12: 4 x 3, 6 x 2, 8 x 1,
// so that narrow panels keep enough independent FMA chains too); kTail: the last vector is partial
// (lanes in tm). kRows: + rbias[r] and the activation (kind kAct, folded at compile time)
// before the store, and with kRes + R's element (R laid out as C) between the two. kAcc: the
// accumulators start from C (a later slice of K), not from the column bias. Accumulators are
// named registers, as avx512.cc's tile: rows and vectors past MR / NV are dead code.
template <int MR, int NV, bool kTail, bool kRows, ConvAct::Kind kAct, bool kRes = false, bool kAcc = false>
inline void tile(int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc,
                 const float* bias, __m256i tm, const float* rbias, float lo, float hi, const float* R) {
#define MEMLANE_LOAD(v, p) \
  ((kTail && (v) == NV - 1) ? _mm256_maskload_ps((p) + 8 * (v), tm) : _mm256_loadu_ps((p) + 8 * (v)))
  const __m256 z = _mm256_setzero_ps();
  const __m256 i0 = bias ? MEMLANE_LOAD(0, bias) : z;
  const __m256 i1 = NV > 1 && bias ? MEMLANE_LOAD(1, bias) : z;
  const __m256 i2 = NV > 2 && bias ? MEMLANE_LOAD(2, bias) : z;
  static_assert(MR <= 8 && MR * NV <= 12, "more accumulators than ymm registers hold");
  __m256 c00 = i0, c01 = i1, c02 = i2, c10 = i0, c11 = i1, c12 = i2;
  __m256 c20 = i0, c21 = i1, c22 = i2, c30 = i0, c31 = i1, c32 = i2;
  __m256 c40 = i0, c41 = i1, c42 = i2, c50 = i0, c51 = i1, c52 = i2;
  __m256 c60 = i0, c61 = i1, c62 = i2, c70 = i0, c71 = i1, c72 = i2;
  if constexpr (kAcc) {
#define MEMLANE_INIT(r)                                                      \
  if constexpr (MR > r) {                                                    \
    c##r##0 = MEMLANE_LOAD(0, C + r * ldc);                                  \
    if constexpr (NV > 1) c##r##1 = MEMLANE_LOAD(1, C + r * ldc);            \
    if constexpr (NV > 2) c##r##2 = MEMLANE_LOAD(2, C + r * ldc);            \
  }
    MEMLANE_INIT(0) MEMLANE_INIT(1) MEMLANE_INIT(2) MEMLANE_INIT(3)
    MEMLANE_INIT(4) MEMLANE_INIT(5) MEMLANE_INIT(6) MEMLANE_INIT(7)
#undef MEMLANE_INIT
  }
  const float* a = A;
  for (int64_t k = 0; k < K; ++k, ++a) {
    const float* b = B + k * ldb;
    const __m256 b0 = MEMLANE_LOAD(0, b);
    const __m256 b1 = NV > 1 ? MEMLANE_LOAD(1, b) : z;
    const __m256 b2 = NV > 2 ? MEMLANE_LOAD(2, b) : z;
#define MEMLANE_ROW(r)                                               \
  if constexpr (MR > r) {                                            \
    const __m256 av = _mm256_broadcast_ss(a + r * lda);              \
    c##r##0 = _mm256_fmadd_ps(av, b0, c##r##0);                      \
    if constexpr (NV > 1) c##r##1 = _mm256_fmadd_ps(av, b1, c##r##1); \
    if constexpr (NV > 2) c##r##2 = _mm256_fmadd_ps(av, b2, c##r##2); \
  }
    MEMLANE_ROW(0) MEMLANE_ROW(1) MEMLANE_ROW(2) MEMLANE_ROW(3)
    MEMLANE_ROW(4) MEMLANE_ROW(5) MEMLANE_ROW(6) MEMLANE_ROW(7)
#undef MEMLANE_ROW
  }
  if constexpr (kRows) {
    const ConvAct act{kAct, lo, hi};  // a constant kind: act_vec8's switch folds away
#define MEMLANE_FINISH(r)                                                            \
  if constexpr (MR > r) {                                                            \
    const __m256 rb = _mm256_set1_ps(rbias ? rbias[r] : 0.f);                        \
    c##r##0 = act_vec8(MEMLANE_RES(0, r, _mm256_add_ps(c##r##0, rb)), act);          \
    if constexpr (NV > 1) c##r##1 = act_vec8(MEMLANE_RES(1, r, _mm256_add_ps(c##r##1, rb)), act); \
    if constexpr (NV > 2) c##r##2 = act_vec8(MEMLANE_RES(2, r, _mm256_add_ps(c##r##2, rb)), act); \
  }
    // (t + bias) + r: residual_act's order (conv_pointwise.cc), so both give the same floats
#define MEMLANE_RES(v, r, x) (kRes ? _mm256_add_ps(x, MEMLANE_LOAD(v, R + r * ldc)) : (x))
    MEMLANE_FINISH(0) MEMLANE_FINISH(1) MEMLANE_FINISH(2) MEMLANE_FINISH(3)
    MEMLANE_FINISH(4) MEMLANE_FINISH(5) MEMLANE_FINISH(6) MEMLANE_FINISH(7)
#undef MEMLANE_RES
#undef MEMLANE_FINISH
  }
  // (the tail's lanes counted from its mask: store_first8 writes them with plain stores)
  const int64_t tail_lanes = kTail ? __builtin_popcount(unsigned(_mm256_movemask_ps(_mm256_castsi256_ps(tm)))) : 8;
#define MEMLANE_STORE1(v, p, x)                                                          \
  if constexpr (NV > v) {                                                                \
    if constexpr (kTail && v == NV - 1) store_first8((p) + 8 * v, tail_lanes, x);        \
    else _mm256_storeu_ps((p) + 8 * v, x);                                               \
  }
#define MEMLANE_STORE(r)                                                       \
  if constexpr (MR > r) {                                                      \
    MEMLANE_STORE1(0, C + r * ldc, c##r##0)                                    \
    MEMLANE_STORE1(1, C + r * ldc, c##r##1)                                    \
    MEMLANE_STORE1(2, C + r * ldc, c##r##2)                                    \
  }
  MEMLANE_STORE(0) MEMLANE_STORE(1) MEMLANE_STORE(2) MEMLANE_STORE(3)
  MEMLANE_STORE(4) MEMLANE_STORE(5) MEMLANE_STORE(6) MEMLANE_STORE(7)
#undef MEMLANE_STORE
#undef MEMLANE_STORE1
#undef MEMLANE_LOAD
}

// Rows a tile: 12 accumulators at 2-3 vectors a row, 8 rows of one (tile()'s registers).
template <int NV>
constexpr int kMR = NV == 1 ? 8 : 12 / NV;

// Every row block of one column panel, over one slice of K.
template <int NV, bool kTail, bool kRows, ConvAct::Kind kAct, bool kRes, bool kAcc>
void row_blocks(int64_t M, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
                int64_t ldc, const float* bias, __m256i tm, const float* rbias, float lo, float hi, const float* R) {
  constexpr int MR = kMR<NV>;
  int64_t i = 0;
  for (; i + MR <= M; i += MR)
    tile<MR, NV, kTail, kRows, kAct, kRes, kAcc>(K, A + i * lda, lda, B, ldb, C + i * ldc, ldc, bias, tm,
                                                 rbias ? rbias + i : nullptr, lo, hi, kRes ? R + i * ldc : nullptr);
  const float* rb = rbias ? rbias + i : nullptr;
  const float* a = A + i * lda;
  const float* r = kRes ? R + i * ldc : nullptr;
  float* c = C + i * ldc;
  // (a case for every remainder; tiles of MR rows or more are never instantiated here)
  switch (M - i) {
#define MEMLANE_REST(n) \
  case n: \
    if constexpr (n < MR) tile<n, NV, kTail, kRows, kAct, kRes, kAcc>(K, a, lda, B, ldb, c, ldc, bias, tm, rb, lo, hi, r); \
    break;
    MEMLANE_REST(7) MEMLANE_REST(6) MEMLANE_REST(5) MEMLANE_REST(4) MEMLANE_REST(3) MEMLANE_REST(2) MEMLANE_REST(1)
#undef MEMLANE_REST
    default: break;
  }
}

// K in slices of this many steps: a slice of B's 24-column panel (24 KiB) stays in L1 across
// the row blocks.
constexpr int64_t kKc = 256;

// One column panel over all of K: slice by slice, the first from the column bias, the later
// ones adding to C, the row epilogue (kRows) with the last. Where more than one row block reads
// it, each slice of the panel is first copied into a contiguous buffer: read in place, its K
// rows lie a row of B apart (12 KiB on a 56x56 map), a page each, and the products ran at
// 1.3-1.45x OpenBLAS's time (which packs). Where the residual is C itself, K is not sliced:
// its elements would be read after the first slices overwrote them.
template <int NV, bool kTail, bool kRows, ConvAct::Kind kAct, bool kRes>
void panel(int64_t M, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc,
           const float* bias, __m256i tm, const float* rbias, float lo, float hi, const float* R) {
  const bool slice = !(kRes && R == C);
  const int64_t kc_max = slice ? kKc : K;
  // (one row block reads the panel once; rows a few vectors apart are as good as packed)
  const bool pack = M > kMR<NV> && ldb > 64;
  alignas(32) float packed[kKc * 24];
  for (int64_t k0 = 0; k0 < K; k0 += kc_max) {
    const int64_t kc = std::min(kc_max, K - k0);
    const float* a = A + k0;
    const float* b = B + k0 * ldb;
    int64_t lb = ldb;
    if (pack && kc <= kKc) {
      for (int64_t k = 0; k < kc; ++k)
        for (int v = 0; v < NV; ++v) {
          const float* src = b + k * ldb + 8 * v;
          _mm256_store_ps(packed + k * 8 * NV + 8 * v,
                          kTail && v == NV - 1 ? _mm256_maskload_ps(src, tm) : _mm256_loadu_ps(src));
        }
      b = packed;
      lb = 8 * NV;
    }
    const bool first = k0 == 0, last = k0 + kc == K;
    if (first && last)
      row_blocks<NV, kTail, kRows, kAct, kRes, false>(M, kc, a, lda, b, lb, C, ldc, bias, tm, rbias, lo, hi, R);
    else if (first)
      row_blocks<NV, kTail, false, ConvAct::kNone, false, false>(M, kc, a, lda, b, lb, C, ldc, bias, tm, nullptr, 0.f, 0.f, nullptr);
    else if (!last)
      row_blocks<NV, kTail, false, ConvAct::kNone, false, true>(M, kc, a, lda, b, lb, C, ldc, nullptr, tm, nullptr, 0.f, 0.f, nullptr);
    else
      row_blocks<NV, kTail, kRows, kAct, kRes, true>(M, kc, a, lda, b, lb, C, ldc, nullptr, tm, rbias, lo, hi, R);
  }
}

// Sum of each vector's 8 lanes, vector j's in lane j (v[j] for j >= n: zeros).
inline __m256 lane_sums8(const __m256 (&v)[8]) {
  const __m256 u0 = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
  const __m256 u1 = _mm256_hadd_ps(_mm256_hadd_ps(v[4], v[5]), _mm256_hadd_ps(v[6], v[7]));
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

// The last W (1-kDotTailMax) columns of C as dot products along K, K in lanes: each row of A
// read with vector loads, against those columns of B copied contiguous (bt: W rows of K8
// floats, zero past K). As a panel of its own they were one more pass over all of A in
// 8-row tiles of one mostly-masked vector, a broadcast for every FMA: RegNet's 400 x 400 x 49
// pointwise convs (7x7 maps: 48 + 1 columns) took 231 us, 173 us for 48 columns alone. R rows
// at a time: R x W accumulators. The epilogue is the tile's: + bias[j], + rbias[r], + R's
// element, act.
template <int W, int R, bool kRows, ConvAct::Kind kAct, bool kRes, bool kAcc = false>
void dot_rows(int64_t i, int64_t K, int64_t K8, const float* A, int64_t lda, const float* bt, float* C, int64_t ldc,
              const float* bias, const float* rbias, float lo, float hi, const float* Rm) {
  const __m256i tm = first_lanes8(W);
  const __m256i km = first_lanes8(K - (K8 - 8));
  __m256 acc[R][W];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < W; ++j) acc[r][j] = _mm256_setzero_ps();
  for (int64_t k = 0; k < K8; k += 8) {
    const bool last = k + 8 > K;
    __m256 a[R];
    for (int r = 0; r < R; ++r) {
      const float* p = A + (i + r) * lda + k;
      a[r] = last ? _mm256_maskload_ps(p, km) : _mm256_loadu_ps(p);
    }
    for (int j = 0; j < W; ++j) {
      const __m256 b = _mm256_load_ps(bt + j * K8 + k);
      for (int r = 0; r < R; ++r) acc[r][j] = _mm256_fmadd_ps(a[r], b, acc[r][j]);
    }
  }
  const ConvAct act{kAct, lo, hi};
  for (int r = 0; r < R; ++r) {
    __m256 v[8];
    for (int j = 0; j < 8; ++j) v[j] = j < W ? acc[r][j] : _mm256_setzero_ps();
    __m256 s = lane_sums8(v);
    float* c = C + (i + r) * ldc;
    if (bias) s = _mm256_add_ps(s, _mm256_maskload_ps(bias, tm));
    if constexpr (kAcc) s = _mm256_add_ps(s, _mm256_maskload_ps(c, tm));  // a later slice of K
    if constexpr (kRows) {
      s = _mm256_add_ps(s, _mm256_set1_ps(rbias ? rbias[i + r] : 0.f));
      if constexpr (kRes) s = _mm256_add_ps(s, _mm256_maskload_ps(Rm + (i + r) * ldc, tm));
      s = act_vec8(s, act);
    }
    store_first8(c, W, s);
  }
}

constexpr int64_t kDotTailMax = 4;
constexpr int64_t kDotTailMaxK = 4096;

// B's last W columns copied for dot_rows: W rows of K8 floats, zero past K.
template <int W>
void dot_pack(int64_t K, int64_t K8, const float* B, int64_t ldb, float* bt) {
  for (int j = 0; j < W; ++j) {
    for (int64_t k = 0; k < K; ++k) bt[j * K8 + k] = B[k * ldb + j];
    for (int64_t k = K; k < K8; ++k) bt[j * K8 + k] = 0.f;
  }
}

// Rows [i0, i1) of the last W columns, from bt (dot_pack).
template <int W, bool kRows, ConvAct::Kind kAct, bool kRes, bool kAcc = false>
void dot_tail_rows(int64_t i0, int64_t i1, int64_t K, int64_t K8, const float* A, int64_t lda, const float* bt,
                   float* C, int64_t ldc, const float* bias, const float* rbias, float lo, float hi, const float* Rm) {
  constexpr int kR = W == 1 ? 4 : W == 2 ? 3 : 2;  // (R x W accumulators, R + 1 loads a column)
  int64_t i = i0;
  for (; i + kR <= i1; i += kR)
    dot_rows<W, kR, kRows, kAct, kRes, kAcc>(i, K, K8, A, lda, bt, C, ldc, bias, rbias, lo, hi, Rm);
  for (; i < i1; ++i) dot_rows<W, 1, kRows, kAct, kRes, kAcc>(i, K, K8, A, lda, bt, C, ldc, bias, rbias, lo, hi, Rm);
}

template <int W, bool kRows, ConvAct::Kind kAct, bool kRes>
void dot_tail(int64_t M, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc,
              const float* bias, const float* rbias, float lo, float hi, const float* Rm) {
  const int64_t K8 = (K + 7) / 8 * 8;
  alignas(32) float bt[W * kDotTailMaxK];
  dot_pack<W>(K, K8, B, ldb, bt);
  dot_tail_rows<W, kRows, kAct, kRes>(0, M, K, K8, A, lda, bt, C, ldc, bias, rbias, lo, hi, Rm);
}

// MEMLANE_GEMM_NO_DOT_TAIL=1 keeps a product's last 1-4 columns a panel (A/B; ctest runs both).
inline bool dot_tail_enabled() {
  static const bool ok = std::getenv("MEMLANE_GEMM_NO_DOT_TAIL") == nullptr;
  return ok;
}

// Products whose A is too large to stay in L2 (kBlockedMinA floats or more) in blocks of B:
// slices of kKc steps of K outer, then column blocks of up to kBlockB floats (K slice x
// columns, packed once, in L2), then row blocks of kRowBlock rows, then the block's panels.
// A's rows then stream once a column block (once in all for maps up to 128 columns at K 256),
// and a row block's slice of A (24 KiB) stays in L1 across the block's panels. Panel by panel
// (panels()), A streamed once a 24-column panel: RegNet's 400 x 400 x 49 pointwise convs read
// their 640 KiB of weights, more than a Zen 3 core's 512 KiB of L2, three times from L3.
// Where A fits in L2 with room, panel by panel measured as fast or faster (160 x 160 x 196
// alone, min of 400: 133-165 us panel by panel, 138-167 row blocks outer): B's panel stays in
// L1 there. MEMLANE_GEMM_NO_BLOCKED=1 keeps every product panel by panel (A/B; ctest runs both).
constexpr int64_t kBlockB = 32768;        // floats: 128 KiB of stack
constexpr int64_t kBlockedMinA = 65536;   // floats: 256 KiB, half a Zen 3 core's L2
constexpr int64_t kRowBlock = 24;         // a multiple of every tile's rows (4, 6, 8) and dot_rows' (4, 3, 2)

// The blocking of an M x N x K product: K slices of kc, column blocks of nc (a multiple of 24
// unless it is all of N). take: whether blocked() runs it.
struct Blocking {
  int64_t kc, nc;
  bool take;
};

Blocking blocking(int64_t M, int64_t N, int64_t K, bool in_place) {
  static const bool enabled = std::getenv("MEMLANE_GEMM_NO_BLOCKED") == nullptr;
  Blocking l{};
  // Where the residual is C itself, K is not sliced (panel()'s reason).
  l.kc = in_place ? K : std::min(K, kKc);
  const int64_t K8 = (l.kc + 7) / 8 * 8;  // a block packs at most (nc rounded up to 8) x K8 floats
  l.nc = (N + 7) / 8 * 8 * K8 <= kBlockB ? N : kBlockB / K8 / 24 * 24;
  l.take = enabled && N > 24 && M > kRowBlock && M * K >= kBlockedMinA && l.nc >= 24;
  return l;
}

// One column block (nc columns of one K slice, packed in buf) over every row block. kFirst:
// the slice starts K (accumulators from the column bias, not from C); kLast: it ends K (the row
// epilogue: + row bias, + residual, activation, when kRows).
template <bool kRows, ConvAct::Kind kAct, bool kRes, bool kFirst, bool kLast>
void blocked_pass(int64_t M, int64_t nc, int64_t kc, const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
                  int64_t ldc, const float* bias, const float* rbias, float lo, float hi, const float* R, float* buf) {
  constexpr bool kEpi = kRows && kLast, kAcc = !kFirst;
  constexpr ConvAct::Kind kA = kEpi ? kAct : ConvAct::kNone;
  constexpr bool kR = kEpi && kRes;
  const int64_t full = nc / 24, w = nc - full * 24, K8 = (kc + 7) / 8 * 8;
  const bool dot = full > 0 && w > 0 && w <= kDotTailMax && dot_tail_enabled();
  const int nv = w == 0 || dot ? 0 : int((w + 7) / 8);  // the tail panel's vectors
  const __m256i all = _mm256_set1_epi32(-1);
  const __m256i tm = first_lanes8(w - (w - 1) / 8 * 8);
  for (int64_t p = 0; p < full; ++p)
    for (int64_t k = 0; k < kc; ++k)
      for (int v = 0; v < 3; ++v)
        _mm256_store_ps(buf + p * kc * 24 + k * 24 + 8 * v, _mm256_loadu_ps(B + k * ldb + p * 24 + 8 * v));
  float* tail = buf + full * kc * 24;
  const int64_t j = full * 24;
  if (dot) {
    switch (w) {
      case 1: dot_pack<1>(kc, K8, B + j, ldb, tail); break;
      case 2: dot_pack<2>(kc, K8, B + j, ldb, tail); break;
      case 3: dot_pack<3>(kc, K8, B + j, ldb, tail); break;
      default: dot_pack<4>(kc, K8, B + j, ldb, tail); break;
    }
  } else if (nv > 0) {
    for (int64_t k = 0; k < kc; ++k)
      for (int v = 0; v < nv; ++v) {
        const float* src = B + k * ldb + j + 8 * v;
        _mm256_store_ps(tail + k * 8 * nv + 8 * v, v == nv - 1 ? _mm256_maskload_ps(src, tm) : _mm256_loadu_ps(src));
      }
  }
  const float* cb = kFirst ? bias : nullptr;  // the column bias starts the sums
  const float* rb0 = kEpi ? rbias : nullptr;
  const float* bj = cb ? cb + j : nullptr;
  for (int64_t i = 0; i < M; i += kRowBlock) {
    const int64_t mb = std::min(kRowBlock, M - i);
    const float* a = A + i * lda;
    const float* rb = rb0 ? rb0 + i : nullptr;
    float* c = C + i * ldc;
    const float* r = kR ? R + i * ldc : nullptr;
    for (int64_t p = 0; p < full; ++p)
      row_blocks<3, false, kEpi, kA, kR, kAcc>(mb, kc, a, lda, buf + p * kc * 24, 24, c + p * 24, ldc,
                                               cb ? cb + p * 24 : nullptr, all, rb, lo, hi, kR ? r + p * 24 : nullptr);
    const float* rj = kR ? r + j : nullptr;
    const float* Rj = kR ? R + j : nullptr;
    if (dot) {
      switch (w) {
        case 1: dot_tail_rows<1, kEpi, kA, kR, kAcc>(i, i + mb, kc, K8, A, lda, tail, C + j, ldc, bj, rb0, lo, hi, Rj); break;
        case 2: dot_tail_rows<2, kEpi, kA, kR, kAcc>(i, i + mb, kc, K8, A, lda, tail, C + j, ldc, bj, rb0, lo, hi, Rj); break;
        case 3: dot_tail_rows<3, kEpi, kA, kR, kAcc>(i, i + mb, kc, K8, A, lda, tail, C + j, ldc, bj, rb0, lo, hi, Rj); break;
        default: dot_tail_rows<4, kEpi, kA, kR, kAcc>(i, i + mb, kc, K8, A, lda, tail, C + j, ldc, bj, rb0, lo, hi, Rj); break;
      }
    } else if (nv == 3) {
      row_blocks<3, true, kEpi, kA, kR, kAcc>(mb, kc, a, lda, tail, 24, c + j, ldc, bj, tm, rb, lo, hi, rj);
    } else if (nv == 2) {
      row_blocks<2, true, kEpi, kA, kR, kAcc>(mb, kc, a, lda, tail, 16, c + j, ldc, bj, tm, rb, lo, hi, rj);
    } else if (nv == 1) {
      row_blocks<1, true, kEpi, kA, kR, kAcc>(mb, kc, a, lda, tail, 8, c + j, ldc, bj, tm, rb, lo, hi, rj);
    }
  }
}

template <bool kRows, ConvAct::Kind kAct, bool kRes>
bool blocked(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
             int64_t ldc, const float* bias, const float* rbias, float lo, float hi, const float* R) {
  const Blocking l = blocking(M, N, K, kRes && R == C);
  if (!l.take) return false;
  alignas(32) float buf[kBlockB];
  for (int64_t k0 = 0; k0 < K; k0 += l.kc) {
    const int64_t kc = std::min(l.kc, K - k0);
    const bool first = k0 == 0, last = k0 + kc == K;
    const float* a = A + k0;
    for (int64_t n0 = 0; n0 < N; n0 += l.nc) {
      const int64_t nc = std::min(l.nc, N - n0);
      const float* b = B + k0 * ldb + n0;
      float* c = C + n0;
      const float* cb = bias ? bias + n0 : nullptr;
      const float* r = kRes ? R + n0 : nullptr;
      if (first && last)
        blocked_pass<kRows, kAct, kRes, true, true>(M, nc, kc, a, lda, b, ldb, c, ldc, cb, rbias, lo, hi, r, buf);
      else if (first)
        blocked_pass<kRows, kAct, kRes, true, false>(M, nc, kc, a, lda, b, ldb, c, ldc, cb, rbias, lo, hi, r, buf);
      else if (!last)
        blocked_pass<kRows, kAct, kRes, false, false>(M, nc, kc, a, lda, b, ldb, c, ldc, cb, rbias, lo, hi, r, buf);
      else
        blocked_pass<kRows, kAct, kRes, false, true>(M, nc, kc, a, lda, b, ldb, c, ldc, cb, rbias, lo, hi, r, buf);
    }
  }
  return true;
}

// Column panels of 24, the last one 1-24 wide (1-4 after a full one: dot products, above).
template <bool kRows, ConvAct::Kind kAct, bool kRes = false>
void panels(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
            int64_t ldc, const float* bias, const float* rbias, float lo, float hi, const float* R = nullptr) {
  if (blocked<kRows, kAct, kRes>(M, N, K, A, lda, B, ldb, C, ldc, bias, rbias, lo, hi, R)) return;
  const __m256i all = _mm256_set1_epi32(-1);
  int64_t j = 0;
  for (; j + 24 <= N; j += 24)
    panel<3, false, kRows, kAct, kRes>(M, K, A, lda, B + j, ldb, C + j, ldc, bias ? bias + j : nullptr, all, rbias, lo, hi,
                                       kRes ? R + j : nullptr);
  const int64_t w = N - j;
  if (w == 0) return;
  const float* bj = bias ? bias + j : nullptr;
  const float* rj = kRes ? R + j : nullptr;
  // (R == C: the tail's own columns of R are read before they are written, row by row.)
  if (j > 0 && w <= kDotTailMax && K <= kDotTailMaxK && dot_tail_enabled()) {
    switch (w) {
      case 1: return dot_tail<1, kRows, kAct, kRes>(M, K, A, lda, B + j, ldb, C + j, ldc, bj, rbias, lo, hi, rj);
      case 2: return dot_tail<2, kRows, kAct, kRes>(M, K, A, lda, B + j, ldb, C + j, ldc, bj, rbias, lo, hi, rj);
      case 3: return dot_tail<3, kRows, kAct, kRes>(M, K, A, lda, B + j, ldb, C + j, ldc, bj, rbias, lo, hi, rj);
      default: return dot_tail<4, kRows, kAct, kRes>(M, K, A, lda, B + j, ldb, C + j, ldc, bj, rbias, lo, hi, rj);
    }
  }
  const __m256i tm = first_lanes8(w - (w - 1) / 8 * 8);
  if (w > 16) panel<3, true, kRows, kAct, kRes>(M, K, A, lda, B + j, ldb, C + j, ldc, bj, tm, rbias, lo, hi, rj);
  else if (w > 8) panel<2, true, kRows, kAct, kRes>(M, K, A, lda, B + j, ldb, C + j, ldc, bj, tm, rbias, lo, hi, rj);
  else panel<1, true, kRows, kAct, kRes>(M, K, A, lda, B + j, ldb, C + j, ldc, bj, tm, rbias, lo, hi, rj);
}

// R rows of A against 4 rows of B (R x 4 dot products along K, K in the lanes), each B row
// read once for the R rows; the last K % 8 columns masked. C = alpha * dot (+ C when acc).
template <int R>
void nt_block(int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc, int W,
              float alpha, bool acc) {
  __m256 s[R][4];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < 4; ++j) s[r][j] = _mm256_setzero_ps();
  const __m256i tail = first_lanes8(K % 8);
  for (int64_t k = 0; k < K; k += 8) {
    const bool part = k + 8 > K;
    __m256 a[R], b[4];
    for (int r = 0; r < R; ++r) a[r] = part ? _mm256_maskload_ps(A + r * lda + k, tail) : _mm256_loadu_ps(A + r * lda + k);
    for (int j = 0; j < 4; ++j)
      b[j] = j >= W ? _mm256_setzero_ps() : part ? _mm256_maskload_ps(B + j * ldb + k, tail) : _mm256_loadu_ps(B + j * ldb + k);
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < 4; ++j) s[r][j] = _mm256_fmadd_ps(a[r], b[j], s[r][j]);
  }
  for (int r = 0; r < R; ++r) {
    const __m256 v[8] = {s[r][0], s[r][1], s[r][2], s[r][3], _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    alignas(32) float sums[8];
    _mm256_store_ps(sums, lane_sums8(v));
    for (int j = 0; j < W; ++j) C[r * ldc + j] = alpha * sums[j] + (acc ? C[r * ldc + j] : 0.f);
  }
}

}  // namespace

void sgemm_nt_few_rows_avx2(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
                            float* C, int64_t ldc, float alpha, bool accumulate) {
  for (int64_t n = 0; n < N; n += 4) {
    const int W = int(std::min<int64_t>(4, N - n));
    int64_t m = 0;
    for (; m + 2 <= M; m += 2)
      nt_block<2>(K, A + m * lda, lda, B + n * ldb, ldb, C + m * ldc + n, ldc, W, alpha, accumulate);
    if (m < M) nt_block<1>(K, A + m * lda, lda, B + n * ldb, ldb, C + m * ldc + n, ldc, W, alpha, accumulate);
  }
}

bool avx2_gemm_blocked(int64_t M, int64_t N, int64_t K) { return blocking(M, N, K, false).take; }

void sgemm_nn_avx2(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
                   float* C, int64_t ldc, const float* bias) {
  panels<false, ConvAct::kNone>(M, N, K, A, lda, B, ldb, C, ldc, bias, nullptr, 0.f, 0.f);
}

void sgemm_nn_rows_avx2(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
                        float* C, int64_t ldc, const float* row_bias, const ConvAct& act, const float* res) {
  if (res) {  // the backend fuses a residual Add with a Relu after it or nothing (conv.cc)
    if (act.kind == ConvAct::kNone)
      return panels<true, ConvAct::kNone, true>(M, N, K, A, lda, B, ldb, C, ldc, nullptr, row_bias, 0.f, 0.f, res);
    if (act.kind == ConvAct::kRelu)
      return panels<true, ConvAct::kRelu, true>(M, N, K, A, lda, B, ldb, C, ldc, nullptr, row_bias, 0.f, 0.f, res);
    std::abort();
  }
  switch (act.kind) {
    case ConvAct::kNone: return panels<true, ConvAct::kNone>(M, N, K, A, lda, B, ldb, C, ldc, nullptr, row_bias, 0.f, 0.f);
    case ConvAct::kRelu: return panels<true, ConvAct::kRelu>(M, N, K, A, lda, B, ldb, C, ldc, nullptr, row_bias, 0.f, 0.f);
    case ConvAct::kClip:
      return panels<true, ConvAct::kClip>(M, N, K, A, lda, B, ldb, C, ldc, nullptr, row_bias, act.lo, act.hi);
    case ConvAct::kHardSwish:
      return panels<true, ConvAct::kHardSwish>(M, N, K, A, lda, B, ldb, C, ldc, nullptr, row_bias, 0.f, 0.f);
    case ConvAct::kSiLU: return panels<true, ConvAct::kSiLU>(M, N, K, A, lda, B, ldb, C, ldc, nullptr, row_bias, 0.f, 0.f);
  }
  std::abort();  // a corrupt kind: fail, do not guess
}

#else  // not an AVX2+FMA x86-64 build: callers check have_avx2_gemm() first

bool have_avx2_gemm() { return false; }
bool avx2_gemm_blocked(int64_t, int64_t, int64_t) { return false; }
void sgemm_nn_avx2(int64_t, int64_t, int64_t, const float*, int64_t, const float*, int64_t, float*, int64_t,
                   const float*) {
  std::abort();
}
void sgemm_nn_rows_avx2(int64_t, int64_t, int64_t, const float*, int64_t, const float*, int64_t, float*, int64_t,
                        const float*, const ConvAct&, const float*) {
  std::abort();
}
void sgemm_nt_few_rows_avx2(int64_t, int64_t, int64_t, const float*, int64_t, const float*, int64_t, float*, int64_t,
                            float, bool) {
  std::abort();
}

#endif

}  // namespace memlane::cpu::simd
