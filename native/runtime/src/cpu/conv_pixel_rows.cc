// ConvKernel's pixel-rows path (conv_kernel.h): an implicit GEMM, Y^T = A W^T, where row r of A
// is output pixel r's receptive field (C x kh x kw floats) and W is packed at load into
// simd::gemm_panels' 32-channel panels. A is never built: rows[r] points at the pixel's field
// origin in the zero-bordered input ([C][Hp][Wp], the direct kernel's stride-1 layout) and
// taps[k] is tap k's offset from it, so simd::gemm_panels_gather broadcasts rows[r][taps[k]]
// into its register tiles (7 pixels x 64 channels) straight from the input (a first version copied
// the fields out: the copy, runs of 2 to 11 floats, cost up to 1.4x ORT's whole conv). The
// [pixels][M] product of a tile is then written to NCHW by 16x16 transposes, with a fused
// residual and Relu. Takes the strided convs the direct kernel does not unroll (AlexNet's 11x11
// stride-4 stem, the patchify and downsampling convs of ConvNeXt, Swin and ViT, 5x5 stride 2)
// and the wide ones (64+ output channels) other than Winograd's and the direct 3x3 stride 1:
// the pixels are the long side of these products, so the register tile is always full.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "cpu/conv_kernel.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#include "cpu/transpose16_avx512.h"
#define MEMLANE_PIXEL_ROWS_AVX512 1
#endif

namespace memlane::cpu::conv_detail {
namespace {

// y[m][r] = prod[r][m] (+ res[m][r], then Relu where relu) for r < cnt, m < M; prod's rows ldp
// apart, y's and res's P apart (res may be y itself: each element is read before it is written). 16x16 blocks
// transposed in registers where the CPU has AVX-512 (a strided scalar store cost as much as
// the product on 3-channel stems), the edges element by element. stream: whole 64-byte lines
// are written with non-temporal stores where y and P keep them aligned (see kStreamStoreBytes),
// fenced before the return so the pool's hand-off orders them for the thread that reads y.
inline float finish(float v, const float* res, int64_t at, bool relu) {
  if (res) v += res[at];
  return relu && v < 0.f ? 0.f : v;
}

#ifdef MEMLANE_PIXEL_ROWS_AVX512
__attribute__((target("avx512f"))) void store_transposed(const float* prod, int64_t ldp, int64_t cnt, int64_t M,
                                                         float* y, int64_t P, const float* res, bool relu, bool stream) {
  const int64_t r16 = cnt / 16 * 16, m16 = M / 16 * 16;
  const __m512 zero = _mm512_setzero_ps();
  stream = stream && reinterpret_cast<uintptr_t>(y) % 64 == 0 && P % 16 == 0;
  for (int64_t m0 = 0; m0 < m16; m0 += 16)
    for (int64_t r0 = 0; r0 < r16; r0 += 16) {
      __m512 v[16];
      for (int k = 0; k < 16; ++k) v[k] = _mm512_loadu_ps(prod + (r0 + k) * ldp + m0);
      transpose16(v);
      for (int j = 0; j < 16; ++j) {
        const int64_t at = (m0 + j) * P + r0;
        if (res) v[j] = _mm512_add_ps(v[j], _mm512_loadu_ps(res + at));
        if (relu) v[j] = _mm512_max_ps(v[j], zero);
        if (stream) _mm512_stream_ps(y + at, v[j]);
        else _mm512_storeu_ps(y + at, v[j]);
      }
    }
  for (int64_t m = 0; m < M; ++m)
    for (int64_t r = m < m16 ? r16 : 0; r < cnt; ++r) y[m * P + r] = finish(prod[r * ldp + m], res, m * P + r, relu);
  if (stream) _mm_sfence();
}
#else
void store_transposed(const float* prod, int64_t ldp, int64_t cnt, int64_t M, float* y, int64_t P, const float* res,
                      bool relu, bool) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t r = 0; r < cnt; ++r) y[m * P + r] = finish(prod[r * ldp + m], res, m * P + r, relu);
}
#endif

}  // namespace

std::vector<int32_t> pixel_rows_taps(const ConvGeom& g, int64_t Hp, int64_t Wp) {
  std::vector<int32_t> t(uint64_t(g.K()));
  for (int64_t c = 0; c < g.C; ++c)
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) t[(c * g.kh + i) * g.kw + j] = int32_t(c * Hp * Wp + i * g.dh * Wp + j * g.dw);
  return t;
}

int64_t ConvKernel::pixel_rows_tile() const {
  // The most pixels a tile: its product (rows x M floats) up to 256 KiB, in L2 for the
  // transposing store; a multiple of the store's 16-row blocks. Each tile streams all of W
  // (simd::gemm_panels_gather reads it once a call), so a small map is one tile: resnet18's
  // 14x14 256-channel and 7x7 512-channel maps took 4 and 2 tiles at the 64 KiB this was
  // before, each reading W (2.3 and 9 MiB) from L3 again.
  return std::clamp<int64_t>((65536 / std::max<int64_t>(g.M, 1)) / 16 * 16, 16, kPixelRowsMaxTile);
}

namespace {
// Tile t of a sample's P pixels in tiles of at most R: the tiles of near-equal size (784 pixels
// in 4 of 196, not 3 of 256 and one of 16 that streams all of W for 16 pixels).
// aligned: the tiles share the map's 16-pixel blocks instead, each start a multiple of 16 (a map
// of 16k pixels keeps the non-temporal store's whole 64-byte lines in every tile); R being a
// multiple of 16, no tile gets more than R pixels.
inline int64_t pixel_tile_start(int64_t P, int64_t R, int64_t t, bool aligned) {
  const int64_t tiles = (P + R - 1) / R;
  if (!aligned) return P * t / tiles;
  const int64_t blocks = (P + 15) / 16;
  return std::min(P, 16 * (blocks * t / tiles));
}
}  // namespace

uint64_t ConvKernel::pixel_rows_floats() const {
  return uint64_t(padded_input_floats()) + uint64_t(threads) * uint64_t(pixel_rows_tile() * g.M);
}

void ConvKernel::run_pixel_rows(const RunCtx& c) const {
  const float* X = input(c);
  float* Y = y.at(c);
  const int64_t P = g.P(), M = g.M, in_sz = g.C * g.H * g.W, out_sz = M * P;
  const int64_t R = pixel_rows_tile(), tiles = (P + R - 1) / R;
  // Relu rides in the panels' epilogue, or with a fused residual Add in the transposing store
  // (Relu(conv + bias + res)); the other folded activations after the store.
  const float* Rs = has_res ? res.at(c) : nullptr;
  const simd::PanelEpilogue e{1.f, b, relu && !Rs};
  const ConvAct after = relu ? ConvAct{} : act;
  const float* pad = c.workspace;
  float* prods = c.workspace + padded_input_floats();
  // Non-temporal stores for a sample's output past a core's L2: its lines would be read for
  // ownership from L3 or memory only to be overwritten whole, and the transposing store writes
  // 16-64 channel planes at once. Per sample: a batch is stored sample by sample and the op
  // after reads it likewise. Not with an activation after the store (it would read the lines
  // back from memory). ResNet-18's stem (64 x 112 x 112, 3.1 MiB a sample), batch 1, in the
  // model, the stem and the max pool that reads it, 6 rounds alternating order: 0.79-0.94x the
  // time a round at 1 thread (geomean 0.85), 0.60-0.94x at 2 (0.84; measured on the first
  // version, the same stores without the aligned tiles, which this map does not need).
  // MEMLANE_CONV_NO_STREAM=1: off (A/B).
  static const bool stream_ok = std::getenv("MEMLANE_CONV_NO_STREAM") == nullptr;
  const bool stream = stream_ok && after.kind == ConvAct::kNone && uint64_t(out_sz) * sizeof(float) >= kStreamStoreBytes;
  // Units of (tile, panel group), one product slot a thread (the pool runs slot s's units on one
  // thread). The panels are split too where there are fewer than two tiles a thread: a deep layer
  // at batch 1 (49 pixels, 512 channels) would otherwise have every thread stream all of W.
  const int64_t panel_count = panels->panels();
  const int64_t want = std::max<int64_t>(1, 2 * std::min<int64_t>(threads, c.pool->threads()));
  const int64_t groups = tiles >= want ? 1 : std::min(panel_count, (want + tiles - 1) / tiles);
  const int64_t units = tiles * groups;
  const int64_t slots = std::clamp<int64_t>(std::min<int64_t>(threads, c.pool->threads()), 1, units);
  for (int64_t n = 0; n < c.batch; ++n) {
    fill_padded(c, X + n * in_sz, c.workspace, 1);
    float* yn = Y + n * out_sz;
    const float* rn = Rs ? Rs + n * out_sz : nullptr;
    c.pool->parallel_for(slots, 1, [&](int64_t s0, int64_t s1) {
      for (int64_t s = s0; s < s1; ++s) {
        float* prod = prods + s * R * M;  // [rows][M]
        const float* rows[kPixelRowsMaxTile];
        for (int64_t u = units * s / slots; u < units * (s + 1) / slots; ++u) {
          const int64_t t = u / groups, pg = u % groups;
          const int64_t p0 = pixel_tile_start(P, R, t, stream), cnt = pixel_tile_start(P, R, t + 1, stream) - p0;
          const int64_t q0 = panel_count * pg / groups, q1 = panel_count * (pg + 1) / groups;
          const int64_t j0 = q0 * simd::kPanelCols, j1 = std::min(M, q1 * simd::kPanelCols);
          int64_t oh = p0 / g.OW, ow = p0 % g.OW;
          for (int64_t r = 0; r < cnt; ++r) {
            rows[r] = pad + oh * g.sh * Wp + ow * g.sw;
            if (++ow == g.OW) ow = 0, ++oh;
          }
          simd::gemm_panels_gather(cnt, q0, q1, rows, taps.data(), *panels, prod, M, e);
          store_transposed(prod + j0, M, cnt, j1 - j0, yn + j0 * P + p0, P, rn ? rn + j0 * P + p0 : nullptr, relu && Rs,
                           stream);
          if (after.kind != ConvAct::kNone)
            for (int64_t m = j0; m < j1; ++m) conv_activate(yn + m * P + p0, cnt, after);
        }
      }
    });
  }
}

}  // namespace memlane::cpu::conv_detail
