#include "cpu/conv_depthwise_blocked.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cpu/conv_act_avx512.h"
#include "cpu/conv_depthwise_s2_avx512.h"
#include "cpu/cpu_features.h"
#include "cpu/transpose16_avx512.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#include "cpu/aligned_floats.h"
#define MEMLANE_DWB_AVX512 1
#endif

namespace memlane::cpu {

#ifndef MEMLANE_DWB_AVX512
std::unique_ptr<Kernel> make_depthwise_blocked_kernel(const DwGeom&, int64_t, TensorRef, TensorRef, const float*,
                                                      const float*, const ConvAct&, int, const DwPointwiseInput*) {
  return nullptr;
}
bool pointwise_depthwise_pays(const DwGeom&, int64_t) { return false; }
#else

namespace {

constexpr int64_t kLanes = 16;
// Floats of scratch (input band + output band) a thread aims for: within L2 with room to spare.
constexpr int64_t kBandBudgetFloats = 24 * 1024;
// The fused 1x1 -> depthwise kernel from this many floats of expanded map a sample on
// (pointwise_depthwise_pays; measured, docs/native-cpu.md).
constexpr int64_t kPwDwMinFloats = 128 * 1024;
// Fused: channel blocks whose 1x1 outputs are computed together (each input value broadcast
// once feeds them all: with one block the loop made 9 loads for 8 FMAs and ran slower than
// the 1x1 kernels apart), and the larger scratch budget their bands get (within L2 still).
constexpr int kPwGroup = 4;
constexpr int64_t kFusedBudgetFloats = 64 * 1024;

#define MEMLANE_DWB_TARGET __attribute__((target("avx512f")))

// Stores one input position's 16 channels at d and moves d on to the next position, over the
// right and left border (skip floats) at the end of a row of W.
MEMLANE_DWB_TARGET inline void put_position(__m512 t, int64_t W, int64_t skip, float*& d, int64_t& w) {
  _mm512_storeu_ps(d, t);
  d += kLanes;
  if (++w == W) w = 0, d += skip;
}

// 16 positions of 16 channels (planes HW floats apart) to 16 positions of the band. A
// function of its own, fully unrolled, so that v stays in registers (indexed by a run-time
// count it went through the stack, which cost more than the transpose).
MEMLANE_DWB_TARGET void pack_full_chunk(const float* src, int64_t HW, int64_t W, int64_t skip, float*& d,
                                        int64_t& w) {
  __m512 v[16];
#pragma GCC unroll 16
  for (int k = 0; k < 16; ++k) v[k] = _mm512_loadu_ps(src + k * HW);
  transpose16(v);
#pragma GCC unroll 16
  for (int j = 0; j < 16; ++j) put_position(v[j], W, skip, d, w);
}

class BlockedDepthwiseKernel final : public Kernel {
 public:
  DwGeom g{};
  int64_t C = 0, blocks = 0, K = 0, Wp = 0, band = 1, band_in_rows = 0;
  TensorRef x, y;
  AlignedFloats wpack, bpack;  // [block][tap][16], [block][16]; zero past C
  const float *w = nullptr, *bias = nullptr;  // the plan's originals (not read at run time)
  std::vector<int64_t> tap_off;     // floats from an output's first tap to tap t in the band
  ConvAct act;
  int threads = 1;
  bool in_place = false;  // y over x: a block's bands must run in order (inplace_safe_band)
  // Fused after a 1x1 conv (DwPointwiseInput): its input, its weights packed [block][C][16]
  // and bias [block][16] (zero past this conv's C), its activation and the plan's originals.
  bool fused = false;
  int64_t pw_C = 0, groups = 0;  // groups of blocks (run_group)
  TensorRef pw_x;
  AlignedFloats pw_wpack, pw_bpack;
  ConvAct pw_act;
  const float *pw_w = nullptr, *pw_b = nullptr;

  int64_t in_rows(int64_t b) const { return (b - 1) * g.sh + (g.kh - 1) * g.dh + 1; }
  // Fused: an input band for each block of the largest group, one output band.
  int64_t bands_in() const { return fused ? (blocks + groups - 1) / groups : 1; }
  int64_t slot_floats() const { return (bands_in() * band_in_rows * Wp + band * g.OW) * kLanes; }

  uint64_t workspace_floats(int64_t) const override { return uint64_t(threads) * uint64_t(slot_floats()); }
  std::vector<const float*> repacked_weights() const override {
    return fused ? std::vector<const float*>{w, bias, pw_w, pw_b} : std::vector<const float*>{w, bias};
  }
  const char* path() const override { return fused ? "pointwise_depthwise_blocked" : "depthwise_blocked"; }

  void run(const RunCtx& c) const override {
    const float* X = fused ? pw_x.at(c) : x.at(c);
    float* Y = y.at(c);
    const int64_t items = c.batch * (fused ? groups : blocks), slot = slot_floats();
    // Fewer blocks than two a thread (a 96-channel map at batch 1 is 6 blocks): the blocks'
    // output rows are split into pieces too, each packing its own first band (a halo of
    // kh - 1 input rows more). Not in place, where a block's bands must run in order.
    const int64_t T = std::min<int64_t>(threads, c.pool->threads());
    const int64_t pieces = in_place || T < 2 || items >= 2 * T || split_off() ? 1
                                                                              : std::min(g.OH, (2 * T + items - 1) / items);
    const int64_t rows = (g.OH + pieces - 1) / pieces, units = items * pieces;
    const int64_t use = depthwise_threads(units, K * rows * g.OW * kLanes, threads, c.pool->threads());
    c.pool->parallel_for(use, 1, [&](int64_t s0, int64_t s1) {
      for (int64_t s = s0; s < s1; ++s)
        for (int64_t u = units * s / use; u < units * (s + 1) / use; ++u) {
          // Fused, the units go piece by piece (a thread takes the same rows of every group:
          // groups of unequal size split by group left one thread most of the work).
          const int64_t it = fused ? u % items : u / pieces, r0 = (fused ? u / items : u % pieces) * rows;
          if (r0 >= g.OH) continue;
          float* scratch = c.workspace + s * slot;
          if (fused) run_group(X, Y, it / groups, it % groups, r0, std::min(g.OH, r0 + rows), scratch);
          else run_block(X, Y, it / blocks, it % blocks, r0, std::min(g.OH, r0 + rows), scratch);
        }
    });
  }

 private:
  static bool split_off() {  // MEMLANE_DW_NO_ROW_SPLIT=1: blocks only (A/B timing)
    static const bool off = std::getenv("MEMLANE_DW_NO_ROW_SPLIT") != nullptr;
    return off;
  }

  // Output rows [r0, r1) of channel block cb of sample n, band by band (see the header for why
  // the next band is packed before this one is unpacked).
  MEMLANE_DWB_TARGET void run_block(const float* X, float* Y, int64_t n, int64_t cb, int64_t r0, int64_t r1,
                                    float* scratch) const {
    const int64_t c0 = cb * kLanes, nc = std::min(kLanes, C - c0);
    const float* xb = X + (n * C + c0) * g.H * g.W;
    float* yb = Y + (n * C + c0) * g.OH * g.OW;
    float* in = scratch;
    float* out = scratch + band_in_rows * Wp * kLanes;
    pack(xb, nc, r0, std::min(r1, r0 + band), in);
    for (int64_t oh0 = r0; oh0 < r1; oh0 += band) {
      const int64_t oh1 = std::min(r1, oh0 + band);
      compute(in, wpack.data() + cb * K * kLanes, bpack.data() + cb * kLanes, oh1 - oh0, out);
      if (oh1 < r1) pack(xb, nc, oh1, std::min(r1, oh1 + band), in);
      unpack(out, nc, oh0, oh1, yb);
    }
  }

  // Fused: output rows [r0, r1) of the channel blocks of group gi of sample n (groups as even
  // as they can be, at most kPwGroup blocks each: 5 blocks are 3 + 2, not 4 + 1), band by band:
  // each band's input rows for every block of the group from the 1x1 conv (produce), then each
  // block's taps and unpack as run_block's.
  MEMLANE_DWB_TARGET void run_group(const float* X, float* Y, int64_t n, int64_t gi, int64_t r0, int64_t r1,
                                    float* scratch) const {
    const int64_t cb0 = blocks * gi / groups, ng = blocks * (gi + 1) / groups - cb0;
    const int64_t band_floats = band_in_rows * Wp * kLanes;
    float* out = scratch + bands_in() * band_floats;
    const float* xs = X + n * pw_C * g.H * g.W;  // the 1x1 conv's input, this sample
    int64_t held = -1;                            // padded input row at the bands' row 0 (-1: none)
    for (int64_t oh0 = r0; oh0 < r1; oh0 += band) {
      const int64_t oh1 = std::min(r1, oh0 + band);
      held = produce(xs, cb0, ng, oh0, oh1, held, scratch);
      for (int64_t j = 0; j < ng; ++j) {
        const int64_t cb = cb0 + j, c0 = cb * kLanes, nc = std::min(kLanes, C - c0);
        compute(scratch + j * band_floats, wpack.data() + cb * K * kLanes, bpack.data() + cb * kLanes, oh1 - oh0, out);
        unpack(out, nc, oh0, oh1, Y + (n * C + c0) * g.OH * g.OW);
      }
    }
  }

  // The fused 1x1 conv into the input bands of blocks cb0..cb0+ng: band j's in[r][q][lane] =
  // padded act(1x1 conv)[(cb0 + j) * 16 + lane][oh0 * sh + r][q] for output rows [oh0, oh1),
  // the band pack() makes from a tensor. `held`: the padded row the bands' row 0 holds from
  // the previous band (-1: none); the rows both bands need move up instead of being computed
  // again. Returns this band's first padded row (the next `held`).
  MEMLANE_DWB_TARGET int64_t produce(const float* xs, int64_t cb0, int64_t ng, int64_t oh0, int64_t oh1, int64_t held,
                                     float* bands) const {
    const int64_t lo = oh0 * g.sh, rows = in_rows(oh1 - oh0), row_floats = Wp * kLanes;
    const int64_t band_floats = band_in_rows * row_floats;
    int64_t kept = 0;
    if (held >= 0 && held <= lo && lo < held + band_in_rows) {
      kept = std::min(rows, held + band_in_rows - lo);
      if (lo != held)
        for (int64_t j = 0; j < ng; ++j)
          std::memmove(bands + j * band_floats, bands + j * band_floats + (lo - held) * row_floats,
                       sizeof(float) * size_t(kept * row_floats));
    }
    for (int64_t r = kept; r < rows; ++r) {
      const int64_t h = lo + r - g.pt;
      for (int64_t j = 0; j < ng; ++j) {
        float* dst = bands + j * band_floats + r * row_floats;
        if (h < 0 || h >= g.H) {
          std::memset(dst, 0, sizeof(float) * size_t(row_floats));
          continue;
        }
        std::memset(dst, 0, sizeof(float) * size_t(g.pl * kLanes));
        std::memset(dst + (g.pl + g.W) * kLanes, 0, sizeof(float) * size_t((Wp - g.pl - g.W) * kLanes));
      }
      if (h < 0 || h >= g.H) continue;
      float* d = bands + r * row_floats + g.pl * kLanes;
      switch (ng) {
        case 4: pointwise_row<4>(xs + h * g.W, cb0, d, band_floats); break;
        case 3: pointwise_row<3>(xs + h * g.W, cb0, d, band_floats); break;
        case 2: pointwise_row<2>(xs + h * g.W, cb0, d, band_floats); break;
        default: pointwise_row<1>(xs + h * g.W, cb0, d, band_floats); break;
      }
    }
    return lo;
  }

  // One input row of the fused 1x1 conv for NG blocks from cb0: d + j * stride holds block
  // cb0 + j's W positions, [q][lane] = act(b + sum over ci of x[ci][q] * w[ci][lane]). Runs of
  // up to 24 / NG positions (24 accumulators), as even as compute()'s.
  template <int NG>
  MEMLANE_DWB_TARGET void pointwise_row(const float* xr, int64_t cb0, float* d, int64_t stride) const {
    constexpr int kMax = 24 / NG;
    const int64_t runs = (g.W + kMax - 1) / kMax;
    for (int64_t k = 0; k < runs; ++k) {
      const int64_t a = g.W * k / runs, e = g.W * (k + 1) / runs;
      pointwise_run_n<NG, kMax>(int(e - a), xr + a, cb0, d + a * kLanes, stride);
    }
  }

  // pointwise_run<NG, n> for a run length n known only at run time (1 <= n <= N).
  template <int NG, int N>
  MEMLANE_DWB_TARGET void pointwise_run_n(int n, const float* x0, int64_t cb0, float* d, int64_t stride) const {
    if constexpr (N > 1)
      if (n < N) return pointwise_run_n<NG, N - 1>(n, x0, cb0, d, stride);
    pointwise_run<NG, N>(x0, cb0, d, stride);
  }

  template <int NG, int N>
  MEMLANE_DWB_TARGET void pointwise_run(const float* x0, int64_t cb0, float* d, int64_t stride) const {
    // (Fully unrolled, so that acc stays in registers.)
    __m512 acc[NG][N];
#pragma GCC unroll 4
    for (int j = 0; j < NG; ++j) {
      const __m512 b = _mm512_loadu_ps(pw_bpack.data() + (cb0 + j) * kLanes);
#pragma GCC unroll 24
      for (int u = 0; u < N; ++u) acc[j][u] = b;
    }
    const int64_t HW = g.H * g.W;
    const float* wp = pw_wpack.data() + cb0 * pw_C * kLanes;  // [block][ci][16]
    for (int64_t ci = 0; ci < pw_C; ++ci) {
      __m512 wv[NG];
#pragma GCC unroll 4
      for (int j = 0; j < NG; ++j) wv[j] = _mm512_loadu_ps(wp + (j * pw_C + ci) * kLanes);
      const float* xc = x0 + ci * HW;
#pragma GCC unroll 24
      for (int u = 0; u < N; ++u) {
        const __m512 xv = _mm512_set1_ps(xc[u]);
#pragma GCC unroll 4
        for (int j = 0; j < NG; ++j) acc[j][u] = _mm512_fmadd_ps(wv[j], xv, acc[j][u]);
      }
    }
#pragma GCC unroll 4
    for (int j = 0; j < NG; ++j)
#pragma GCC unroll 24
      for (int u = 0; u < N; ++u) _mm512_storeu_ps(d + j * stride + u * kLanes, act_vec16(acc[j][u], pw_act));
  }

  // in[r][q][lane] = padded x[c0 + lane][oh0 * sh + r][q]: zero outside the input.
  MEMLANE_DWB_TARGET void pack(const float* xb, int64_t nc, int64_t oh0, int64_t oh1, float* in) const {
    const int64_t pr0 = oh0 * g.sh, rows = in_rows(oh1 - oh0), HW = g.H * g.W;
    const int64_t h0 = std::clamp<int64_t>(pr0 - g.pt, 0, g.H), h1 = std::clamp<int64_t>(pr0 + rows - g.pt, 0, g.H);
    const int64_t row_floats = Wp * kLanes;
    for (int64_t r = 0; r < rows; ++r) {
      float* dst = in + r * row_floats;
      const int64_t h = pr0 + r - g.pt;
      if (h < 0 || h >= g.H) {
        std::memset(dst, 0, sizeof(float) * size_t(row_floats));
        continue;
      }
      std::memset(dst, 0, sizeof(float) * size_t(g.pl * kLanes));
      std::memset(dst + (g.pl + g.W) * kLanes, 0, sizeof(float) * size_t((Wp - g.pl - g.W) * kLanes));
    }
    // Rows h0..h1 are contiguous in every channel plane: transpose them 16 positions at a time.
    const int64_t W = g.W, skip = (Wp - W) * kLanes, p0 = h0 * W, p1 = h1 * W;
    float* d = in + ((h0 + g.pt - pr0) * Wp + g.pl) * kLanes;
    int64_t w = 0;
    for (int64_t p = p0; p < p1; p += kLanes) {
      const int64_t m = std::min(kLanes, p1 - p);
      if (m == kLanes && nc == kLanes) {
        pack_full_chunk(xb + p, HW, W, skip, d, w);
        continue;
      }
      __m512 v[16];
      const __mmask16 mask = __mmask16((1u << m) - 1);
      for (int64_t k = 0; k < 16; ++k)
        v[k] = k < nc ? _mm512_maskz_loadu_ps(mask, xb + k * HW + p) : _mm512_setzero_ps();
      transpose16(v);
      for (int64_t j = 0; j < m; ++j) put_position(v[j], W, skip, d, w);
    }
  }

  // out[r][ow][lane] = bias + sum over taps, for output rows oh0 + r (r < rows).
  template <int N>
  MEMLANE_DWB_TARGET void row_block(const float* src, const float* wp, __m512 b, float* dst) const {
    __m512 acc[N];
    for (int u = 0; u < N; ++u) acc[u] = b;
    const int64_t step = g.sw * kLanes;
    for (int64_t t = 0; t < K; ++t) {
      const __m512 wv = _mm512_loadu_ps(wp + t * kLanes);
      const float* s = src + tap_off[size_t(t)];
      for (int u = 0; u < N; ++u) acc[u] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(s + u * step), acc[u]);
    }
    for (int u = 0; u < N; ++u) _mm512_storeu_ps(dst + u * kLanes, act_vec16(acc[u], act));
  }

  MEMLANE_DWB_TARGET void compute(const float* in, const float* wp, const float* bp, int64_t rows, float* out) const {
    const __m512 b = _mm512_loadu_ps(bp);
    // Output columns in runs of at most 8 accumulators, the runs as even as they can be
    // (14 -> 7 + 7, not 8 + 6).
    const int64_t runs = (g.OW + 7) / 8;
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = in + r * g.sh * Wp * kLanes;
      float* orow = out + r * g.OW * kLanes;
      for (int64_t k = 0; k < runs; ++k) {
        const int64_t a = g.OW * k / runs, e = g.OW * (k + 1) / runs;
        const float* src = row + a * g.sw * kLanes;
        float* dst = orow + a * kLanes;
        switch (e - a) {
          case 8: row_block<8>(src, wp, b, dst); break;
          case 7: row_block<7>(src, wp, b, dst); break;
          case 6: row_block<6>(src, wp, b, dst); break;
          case 5: row_block<5>(src, wp, b, dst); break;
          case 4: row_block<4>(src, wp, b, dst); break;
          case 3: row_block<3>(src, wp, b, dst); break;
          case 2: row_block<2>(src, wp, b, dst); break;
          default: row_block<1>(src, wp, b, dst); break;
        }
      }
    }
  }

  // y[c0 + k][oh0 * OW + q] = out[q][k] for k < nc.
  MEMLANE_DWB_TARGET void unpack(const float* out, int64_t nc, int64_t oh0, int64_t oh1, float* yb) const {
    const int64_t count = (oh1 - oh0) * g.OW, OHW = g.OH * g.OW;
    float* base = yb + oh0 * g.OW;
    for (int64_t q = 0; q < count; q += kLanes) {
      const int64_t m = std::min(kLanes, count - q);
      __m512 v[16];
      if (m == kLanes) {
#pragma GCC unroll 16
        for (int j = 0; j < 16; ++j) v[j] = _mm512_loadu_ps(out + (q + j) * kLanes);
      } else {
        for (int64_t j = 0; j < 16; ++j) v[j] = j < m ? _mm512_loadu_ps(out + (q + j) * kLanes) : _mm512_setzero_ps();
      }
      transpose16(v);
      const __mmask16 mask = __mmask16((1u << m) - 1);
      if (nc == kLanes) {
#pragma GCC unroll 16
        for (int k = 0; k < 16; ++k) _mm512_mask_storeu_ps(base + k * OHW + q, mask, v[k]);
      } else {
        for (int64_t k = 0; k < nc; ++k) _mm512_mask_storeu_ps(base + k * OHW + q, mask, v[k]);
      }
    }
  }
};

// Band height for an output written over its input (y == x, same plane size): unpacking band
// b writes plane positions [0, oh1(b) * OW); every band packed after that (b + 2 on) reads
// from input row oh0(b + 2) * sh - pt on. The smallest band height that keeps those apart.
int64_t inplace_safe_band(const DwGeom& g, int64_t band) {
  for (; band < g.OH; ++band) {
    bool ok = true;
    for (int64_t oh1 = band; oh1 + band < g.OH && ok; oh1 += band)
      ok = oh1 * g.OW <= std::max<int64_t>(0, (oh1 + band) * g.sh - g.pt) * g.W;
    if (ok) return band;
  }
  return g.OH;
}

// Measured per op, batch 1, 1 thread (docs/native-cpu.md): blocked ran 0.26-0.8x the
// per-channel kernel's time on every 5x5 conv and on maps up to 14 wide, but 1.0-1.3x on 3x3
// convs with 28+ output columns, where the per-channel kernel's vectors are full and its plane
// copy is cheaper than the two 16x16 transposes an output costs here.
// A stride-2 conv over a plane larger than L1 reads it directly instead
// (conv_depthwise_s2_avx512.h: 0.77-0.87x this kernel's time on 96-112 wide 5x5 and 3x3 maps).
bool blocked_pays(const DwGeom& g) { return !dw_s2_direct_applies(g) && (g.kh * g.kw > 9 || g.OW < 24); }

}  // namespace

bool pointwise_depthwise_pays(const DwGeom& g, int64_t C) {
  // (Read at each build, not once: the tests switch them between plans.) MEMLANE_NO_FUSION
  // and MEMLANE_CONV_NO_PW_DW: the two convs apart (A/B timing); MEMLANE_CONV_PW_DW: every
  // pair fused, whatever its size (tests).
  if (!use_avx512f() || std::getenv("MEMLANE_DW_PER_CHANNEL") || std::getenv("MEMLANE_NO_FUSION") ||
      std::getenv("MEMLANE_CONV_NO_PW_DW"))
    return false;
  return std::getenv("MEMLANE_CONV_PW_DW") != nullptr || C * g.H * g.W >= kPwDwMinFloats;
}

std::unique_ptr<Kernel> make_depthwise_blocked_kernel(const DwGeom& g, int64_t C, TensorRef x, TensorRef y,
                                                      const float* w, const float* bias, const ConvAct& act,
                                                      int threads, const DwPointwiseInput* pointwise) {
  if (!use_avx512f() || std::getenv("MEMLANE_DW_PER_CHANNEL") != nullptr) return nullptr;
  if (!pointwise && !blocked_pays(g) && std::getenv("MEMLANE_DW_BLOCKED") == nullptr) return nullptr;
  auto k = std::make_unique<BlockedDepthwiseKernel>();
  k->g = g;
  k->C = C;
  k->blocks = (C + kLanes - 1) / kLanes;
  k->K = g.kh * g.kw;
  k->Wp = std::max(g.pl + g.W, (g.OW - 1) * g.sw + (g.kw - 1) * g.dw + 1);
  k->x = x;
  k->y = y;
  k->act = act;
  k->threads = std::max(1, threads);
  k->w = w;
  k->bias = bias;
  k->wpack.assign(size_t(k->blocks * k->K * kLanes), 0.f);
  k->bpack.assign(size_t(k->blocks * kLanes), 0.f);
  for (int64_t c = 0; c < C; ++c) {
    for (int64_t t = 0; t < k->K; ++t) k->wpack[size_t(((c / kLanes) * k->K + t) * kLanes + c % kLanes)] = w[c * k->K + t];
    if (bias) k->bpack[size_t(c)] = bias[c];
  }
  for (int64_t i = 0; i < g.kh; ++i)
    for (int64_t j = 0; j < g.kw; ++j) k->tap_off.push_back((i * g.dh * k->Wp + j * g.dw) * kLanes);
  // Band: as many output rows as keep the input and output bands within the budget.
  k->fused = pointwise != nullptr;
  if (k->fused) k->groups = (k->blocks + kPwGroup - 1) / kPwGroup;
  const int64_t budget = k->fused ? kFusedBudgetFloats : kBandBudgetFloats;
  int64_t band = g.OH;
  while (band > 1 && (k->bands_in() * k->in_rows(band) * k->Wp + band * g.OW) * kLanes > budget) --band;
  // x and y are the same bytes when the planner put the fused activation's output over the
  // input (conv.cc's dw_over_input: then the planes are the same size).
  // (Fused: x is never read; the caller keeps y off the 1x1 conv's input.)
  const bool over_input = !pointwise && x.weight == nullptr && y.weight == nullptr && x.offset == y.offset;
  k->band = over_input ? inplace_safe_band(g, band) : band;
  k->in_place = over_input;
  k->band_in_rows = k->in_rows(k->band);
  if (pointwise) {
    k->pw_C = pointwise->C;
    k->pw_x = pointwise->x;
    k->pw_act = pointwise->act;
    k->pw_w = pointwise->w;
    k->pw_b = pointwise->b;
    k->pw_wpack.assign(size_t(k->blocks * k->pw_C * kLanes), 0.f);
    k->pw_bpack.assign(size_t(k->blocks * kLanes), 0.f);
    for (int64_t c = 0; c < C; ++c) {
      for (int64_t ci = 0; ci < k->pw_C; ++ci)
        k->pw_wpack[size_t(((c / kLanes) * k->pw_C + ci) * kLanes + c % kLanes)] = pointwise->w[c * k->pw_C + ci];
      if (pointwise->b) k->pw_bpack[size_t(c)] = pointwise->b[c];
    }
  }
  return k;
}

#endif

}  // namespace memlane::cpu
