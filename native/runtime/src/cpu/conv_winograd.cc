#include "cpu/conv_winograd.h"
#include "cpu/cpu_features.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "cpu/conv_direct.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define MEMLANE_WINOGRAD 1
#endif

namespace memlane::cpu {

namespace {
constexpr int64_t kBlock = 32;  // tiles per block: two 16-lane vectors
// Tile-row widths the segmented blocks take (conv_winograd's other branch).
// (6-7, not 5: a 10-wide map never gets here, the direct kernel Winograd needs wants OW >= 12.)
inline bool winograd_segmented(int64_t tw) { return (tw >= 12 && tw <= 31 && tw != 16) || (tw >= 6 && tw <= 7); }
// Floats between the 16 xi planes of V ([xi][C][32]) and P ([xi][M][32]): one cache line more
// than the plane, so that the 16 planes do not fall in one L1 set (a 2 or 4 KiB stride did,
// and the transforms, which touch all 16 at once, ran at a third of their speed).
inline int64_t plane_stride(int64_t rows) { return rows * kBlock + 16; }

// Threads split a map's tile blocks, each streaming all of U (16 x M x C floats) through every
// block it takes; or, here, the output channels, each transforming every block's input and
// streaming only its share of U. Channels where there are too few blocks to go round evenly
// (squeezenet1_1's 13x13 maps: 2 blocks), or where U is larger than a core's L2 holds
// alongside the block's scratch (a 14x14 256 -> 256 conv: U 4 MiB) so that a share of it
// stays there. MEMLANE_WINOGRAD_SPLIT=blocks / channels forces one (A/B timing).
bool winograd_split_channels(int64_t blocks, int64_t slots, int64_t C, int64_t M) {
  static const int64_t forced = [] {
    const char* e = std::getenv("MEMLANE_WINOGRAD_SPLIT");
    const std::string v = e ? e : "";
    return v == "channels" ? int64_t(1) : v == "blocks" ? int64_t(0) : int64_t(-1);
  }();
  if (forced >= 0) return forced == 1;
  if (M < 16 * slots) return false;  // shares of a vector's width or less
  const uint64_t u_bytes = uint64_t(16 * M * C) * sizeof(float);
  return blocks < 4 * slots || u_bytes > (uint64_t(512) << 10);
}
}

std::vector<float> conv_winograd_weights(const float* w, int64_t M, int64_t C) {
  // G = [[1,0,0],[.5,.5,.5],[.5,-.5,.5],[0,0,1]]
  static const float G[4][3] = {{1, 0, 0}, {.5f, .5f, .5f}, {.5f, -.5f, .5f}, {0, 0, 1}};
  std::vector<float> U(size_t(16 * M * C));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t c = 0; c < C; ++c) {
      const float* g = w + (m * C + c) * 9;
      float t[4][3];  // G g
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 3; ++j) t[i][j] = G[i][0] * g[j] + G[i][1] * g[3 + j] + G[i][2] * g[6 + j];
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j)
          U[size_t(((i * 4 + j) * M + m) * C + c)] = t[i][0] * G[j][0] + t[i][1] * G[j][1] + t[i][2] * G[j][2];
    }
  return U;
}

int64_t conv_winograd_scratch(int64_t C, int64_t M) { return 16 * (plane_stride(C) + plane_stride(M)); }

#ifdef MEMLANE_WINOGRAD
namespace {

bool has_avx512f() {
  static const bool has = use_avx512f();
  return has;
}

// 8 or 16 tiles a row: one ymm or zmm per row of the patch (no masked loads and stores).
template <int TW>
struct Lanes;
template <>
struct Lanes<16> {
  using V = __m512;
  __attribute__((target("avx512f"))) static V load(const float* p) { return _mm512_loadu_ps(p); }
  __attribute__((target("avx512f"))) static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  __attribute__((target("avx512f"))) static V add(V a, V b) { return _mm512_add_ps(a, b); }
  __attribute__((target("avx512f"))) static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
};
template <>
struct Lanes<4> {
  using V = __m128;
  static V load(const float* p) { return _mm_loadu_ps(p); }
  static void store(float* p, V v) { _mm_storeu_ps(p, v); }
  static V add(V a, V b) { return _mm_add_ps(a, b); }
  static V sub(V a, V b) { return _mm_sub_ps(a, b); }
};
template <>
struct Lanes<8> {
  using V = __m256;
  __attribute__((target("avx2"))) static V load(const float* p) { return _mm256_loadu_ps(p); }
  __attribute__((target("avx2"))) static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  __attribute__((target("avx2"))) static V add(V a, V b) { return _mm256_add_ps(a, b); }
  __attribute__((target("avx2"))) static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
};

// V[xi][c][lane] for the block's tiles: tile rows a0.., TW tiles each.
// d = the 4x4 input patch of tile (a, b): padded rows 2a..2a+3, columns 2b..2b+3, i.e.
// E[b], O[b], E[b+1], O[b+1] of the row's even/odd planes. V = B^T d B with
// B^T = [[1,0,-1,0],[0,1,1,0],[0,-1,1,0],[0,1,0,-1]].
// Tile rows are numbered across the samples of the call (th a sample); rows of a sample past
// the last one (an odd batch) repeat the last sample's, their outputs are dropped.
template <int TW>
__attribute__((target("avx512f"))) void input_block(const float* pad, int64_t padStride, int64_t samples, int64_t th,
                                                    int64_t C, int64_t Hp, int64_t Wh, int64_t a0, float* V) {
  using L = Lanes<TW>;
  using Vec = typename L::V;
  const int64_t half = Hp * Wh, rows = kBlock / TW;
  for (int64_t c = 0; c < C; ++c) {
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t gr = a0 + r, a = gr % th, smp = std::min(gr / th, samples - 1);
      const float* E = pad + smp * padStride + c * 2 * half;
      const float* O = E + half;
      Vec d[4][4];
      for (int k = 0; k < 4; ++k) {
        const int64_t off = (2 * a + k) * Wh;
        d[k][0] = L::load(E + off);
        d[k][1] = L::load(O + off);
        d[k][2] = L::load(E + off + 1);
        d[k][3] = L::load(O + off + 1);
      }
      Vec t[4][4];
      for (int q = 0; q < 4; ++q) {
        t[0][q] = L::sub(d[0][q], d[2][q]);
        t[1][q] = L::add(d[1][q], d[2][q]);
        t[2][q] = L::sub(d[2][q], d[1][q]);
        t[3][q] = L::sub(d[1][q], d[3][q]);
      }
      float* dst = V + c * kBlock + r * TW;
      const int64_t xs = plane_stride(C);  // stride between the 16 xi
      for (int i = 0; i < 4; ++i) {
        L::store(dst + (4 * i + 0) * xs, L::sub(t[i][0], t[i][2]));
        L::store(dst + (4 * i + 1) * xs, L::add(t[i][1], t[i][2]));
        L::store(dst + (4 * i + 2) * xs, L::sub(t[i][2], t[i][1]));
        L::store(dst + (4 * i + 3) * xs, L::sub(t[i][1], t[i][3]));
      }
    }
  }
}

// P[xi][m][32] = U[xi][m][:] . V[xi][:][32] for MB output channels at m0.
template <int MB>
__attribute__((target("avx512f"))) inline void product(const float* U, const float* V, float* P, int64_t C, int64_t M,
                                                       int64_t m0) {
  for (int xi = 0; xi < 16; ++xi) {
    const float* u = U + (int64_t(xi) * M + m0) * C;
    const float* v = V + int64_t(xi) * plane_stride(C);
    __m512 acc[MB][2];
    for (int r = 0; r < MB; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (int64_t c = 0; c < C; ++c) {
      const __m512 v0 = _mm512_loadu_ps(v + c * kBlock), v1 = _mm512_loadu_ps(v + c * kBlock + 16);
      for (int r = 0; r < MB; ++r) {
        const __m512 ur = _mm512_set1_ps(u[r * C + c]);
        acc[r][0] = _mm512_fmadd_ps(ur, v0, acc[r][0]);
        acc[r][1] = _mm512_fmadd_ps(ur, v1, acc[r][1]);
      }
    }
    float* p = P + int64_t(xi) * plane_stride(M) + m0 * kBlock;
    for (int r = 0; r < MB; ++r) {
      _mm512_storeu_ps(p + r * kBlock, acc[r][0]);
      _mm512_storeu_ps(p + r * kBlock + 16, acc[r][1]);
    }
  }
}

// y = A^T P A per tile, A^T = [[1,1,1,0],[0,1,-1,-1]], plus bias, activation; the 2x2 outputs
// of 8 tiles interleave into 16 contiguous floats of each output row.
// A^T P A of one 16-lane column of the 16 products (p[xi * xs], xi = 4 * row + col of the 4x4
// tile) plus the bias: o[i][j] is output (i, j) of each lane's 2x2 tile.
__attribute__((target("avx512f"))) inline void output_transform(const float* p, int64_t xs, __m512 bv, __m512 o[2][2]) {
  __m512 s[4], d[4];
  for (int j = 0; j < 4; ++j) {
    const __m512 p0 = _mm512_loadu_ps(p + (0 + j) * xs), p1 = _mm512_loadu_ps(p + (4 + j) * xs);
    const __m512 p2 = _mm512_loadu_ps(p + (8 + j) * xs), p3 = _mm512_loadu_ps(p + (12 + j) * xs);
    s[j] = _mm512_add_ps(_mm512_add_ps(p0, p1), p2);
    d[j] = _mm512_sub_ps(_mm512_sub_ps(p1, p2), p3);
  }
  o[0][0] = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(s[0], s[1]), s[2]), bv);
  o[0][1] = _mm512_add_ps(_mm512_sub_ps(_mm512_sub_ps(s[1], s[2]), s[3]), bv);
  o[1][0] = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(d[0], d[1]), d[2]), bv);
  o[1][1] = _mm512_add_ps(_mm512_sub_ps(_mm512_sub_ps(d[1], d[2]), d[3]), bv);
}

__attribute__((target("avx512f"))) void output_block(const float* P, const float* bias, float* y, const float* res,
                                                     int64_t M, int64_t m0, int64_t m1, int64_t OH, int64_t OW, int64_t tw,
                                                     int64_t t0, int64_t validTiles, bool relu) {
  const int64_t T = (OH / 2) * tw, ys = M * OH * OW;
  const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  const __m512 z = _mm512_setzero_ps();
  const int64_t xs = plane_stride(M);
  // Where each 8-tile group's two output rows start (channel 0), computed once a block.
  int64_t base[2][2][2], base2[2][2][2];  // [h / 16][half][i]
  bool ok[2][2];
  for (int hh = 0; hh < 2; ++hh)
    for (int half_ = 0; half_ < 2; ++half_) {
      const int64_t t = t0 + 16 * hh + 8 * half_, tl = t % T, ta = tl / tw, tb = tl % tw;
      ok[hh][half_] = t < validTiles;
      for (int i = 0; i < 2; ++i) {
        base[hh][half_][i] = (t / T) * ys + (2 * ta + i) * OW + 2 * tb;
        base2[hh][half_][i] = tw == 4 ? base[hh][half_][i] + 2 * OW : base[hh][half_][i] + 8;
      }
    }
  for (int64_t m = m0; m < m1; ++m) {
    const __m512 bv = _mm512_set1_ps(bias ? bias[m] : 0.f);
    for (int64_t h = 0; h < kBlock; h += 16) {
      __m512 o[2][2];
      output_transform(P + m * kBlock + h, xs, bv, o);
      for (int i = 0; i < 2; ++i) {
        const __m512 a = _mm512_permutex2var_ps(o[i][0], lo, o[i][1]), b = _mm512_permutex2var_ps(o[i][0], hi, o[i][1]);
        // lanes 0..7 / 8..15 are 8 consecutive tiles: of one tile row (tw >= 8), or of two
        // (tw == 4: each 8-float half is one output row)
        for (int half_ = 0; half_ < 2; ++half_) {
          if (!ok[h / 16][half_]) continue;
          const int64_t at = base[h / 16][half_][i] + m * OH * OW;
          const int64_t at2 = base2[h / 16][half_][i] + m * OH * OW;  // where lanes 8..15 go (tw == 4)
          __m512 v = half_ ? b : a;
          if (res) {
            const __m512 rv =
                tw == 4 ? _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(_mm256_loadu_ps(res + at))),
                                                              _mm256_castps_pd(_mm256_loadu_ps(res + at2)), 1))
                        : _mm512_loadu_ps(res + at);
            v = _mm512_add_ps(v, rv);
          }
          if (relu) v = _mm512_max_ps(v, z);
          if (tw == 4) {
            _mm256_storeu_ps(y + at, _mm512_castps512_ps256(v));
            _mm256_storeu_ps(y + at2, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
          } else {
            _mm512_storeu_ps(y + at, v);
          }
        }
      }
    }
  }
}

// Maps of other even widths (tw = OW / 2 tiles a row: 12-31 but 16, or 5-7): a block is two
// segments of 16 lanes, each with its own masks so that no lane reads across a row. With
// 12-31 tiles a row a segment is up to 16 tiles of one tile row (28 tiles: 16 + 12); with
// 5-7, two tile rows of one sample (lanes [0, tw) row a, [tw, 2 tw) row a + 1).
struct Seg {
  int64_t smp, a, b0, n;  // n = 0: no segment (past the last)
  int64_t n2;             // tiles of row a + 1 in lanes [n, n + n2) (5-7 tiles a row)
};
inline int64_t segments_per_sample(int64_t th, int64_t tw) { return tw <= 8 ? (th + 1) / 2 : th * ((tw + 15) / 16); }
inline Seg segment(int64_t g, int64_t segs, int64_t th, int64_t tw) {
  if (g >= segs) return {0, 0, 0, 0, 0};
  const int64_t per = segments_per_sample(th, tw), smp = g / per, k = g % per;
  if (tw <= 8) return {smp, 2 * k, 0, tw, 2 * k + 1 < th ? tw : 0};
  const int64_t ns = (tw + 15) / 16, b0 = 16 * (k % ns);
  return {smp, k / ns, b0, std::min<int64_t>(16, tw - b0), 0};
}
inline __mmask16 lanes(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1); }

__attribute__((target("avx512f"))) void input_segments(const float* pad, int64_t padStride, int64_t C, int64_t Hp,
                                                       int64_t Wh, const Seg* sg, float* V) {
  const int64_t half = Hp * Wh, xs = plane_stride(C);
  for (int64_t c = 0; c < C; ++c)
    for (int r = 0; r < 2; ++r) {
      float* dst = V + c * kBlock + r * 16;
      const __mmask16 mk = lanes(sg[r].n);
      const float* E = pad + sg[r].smp * padStride + c * 2 * half + sg[r].b0;
      const float* O = E + half;
      __m512 d[4][4];
      // row a + 1's tiles in lanes [n, n + n2): loaded from 2 padded rows further on, n back
      const __mmask16 mk2 = __mmask16(lanes(sg[r].n + sg[r].n2) & ~mk);
      const int64_t next = 2 * Wh - sg[r].n;
      for (int k = 0; k < 4; ++k) {
        const int64_t off = (2 * sg[r].a + k) * Wh;
        d[k][0] = _mm512_maskz_loadu_ps(mk, E + off);
        d[k][1] = _mm512_maskz_loadu_ps(mk, O + off);
        d[k][2] = _mm512_maskz_loadu_ps(mk, E + off + 1);
        d[k][3] = _mm512_maskz_loadu_ps(mk, O + off + 1);
        if (mk2) {  // (only the masked-in lanes are dereferenced)
          d[k][0] = _mm512_mask_loadu_ps(d[k][0], mk2, E + off + next);
          d[k][1] = _mm512_mask_loadu_ps(d[k][1], mk2, O + off + next);
          d[k][2] = _mm512_mask_loadu_ps(d[k][2], mk2, E + off + next + 1);
          d[k][3] = _mm512_mask_loadu_ps(d[k][3], mk2, O + off + next + 1);
        }
      }
      __m512 t[4][4];
      for (int q = 0; q < 4; ++q) {
        t[0][q] = _mm512_sub_ps(d[0][q], d[2][q]);
        t[1][q] = _mm512_add_ps(d[1][q], d[2][q]);
        t[2][q] = _mm512_sub_ps(d[2][q], d[1][q]);
        t[3][q] = _mm512_sub_ps(d[1][q], d[3][q]);
      }
      for (int i = 0; i < 4; ++i) {
        _mm512_storeu_ps(dst + (4 * i + 0) * xs, _mm512_sub_ps(t[i][0], t[i][2]));
        _mm512_storeu_ps(dst + (4 * i + 1) * xs, _mm512_add_ps(t[i][1], t[i][2]));
        _mm512_storeu_ps(dst + (4 * i + 2) * xs, _mm512_sub_ps(t[i][2], t[i][1]));
        _mm512_storeu_ps(dst + (4 * i + 3) * xs, _mm512_sub_ps(t[i][1], t[i][3]));
      }
    }
}

// output_block for two segments: each segment's 2x2 outputs interleave into two output rows
// of 2n floats (masked stores, 16 floats for tiles 0-7 and 16 for 8-15).
__attribute__((target("avx512f"))) void output_segments(const float* P, const float* bias, float* y, const float* res,
                                                        int64_t M, int64_t m0, int64_t m1, int64_t OH, int64_t OW,
                                                        const Seg* sg, bool relu) {
  const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  const __m512 z = _mm512_setzero_ps();
  const int64_t xs = plane_stride(M), ys = M * OH * OW;
  for (int64_t m = m0; m < m1; ++m) {
    const __m512 bv = _mm512_set1_ps(bias ? bias[m] : 0.f);
    for (int r = 0; r < 2; ++r) {
      const int64_t n = sg[r].n;
      if (n == 0) continue;
      // (an odd OW: the last tile's second column lies outside the map and is not stored)
      const int64_t cols = std::min<int64_t>(2 * n, OW - 2 * sg[r].b0);
      const __mmask16 mk[2] = {lanes(std::min<int64_t>(cols, 16)), lanes(std::max<int64_t>(cols - 16, 0))};
      __m512 o[2][2];
      output_transform(P + m * kBlock + 16 * r, xs, bv, o);
      for (int i = 0; i < 2; ++i) {
        if (2 * sg[r].a + i >= OH) break;  // an odd OH: the last tile row's second output row
        const int64_t at = sg[r].smp * ys + m * OH * OW + (2 * sg[r].a + i) * OW + 2 * sg[r].b0;
        const __m512 v2[2] = {_mm512_permutex2var_ps(o[i][0], lo, o[i][1]), _mm512_permutex2var_ps(o[i][0], hi, o[i][1])};
        for (int hh = 0; hh < 2; ++hh) {
          if (!mk[hh]) continue;
          __m512 v = v2[hh];
          if (res) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mk[hh], res + at + 16 * hh));
          if (relu) v = _mm512_max_ps(v, z);
          _mm512_mask_storeu_ps(y + at + 16 * hh, mk[hh], v);
        }
        if (sg[r].n2 && 2 * sg[r].a + 2 + i < OH) {  // row a + 1's tiles: lanes n.. into output row 2a + 2 + i
          const __mmask16 m2 = lanes(std::min<int64_t>(2 * sg[r].n2, OW));
          const __m512i sh = _mm512_set1_epi32(int(n));
          __m512 v = _mm512_permutex2var_ps(o[i][0], _mm512_add_epi32(lo, sh), o[i][1]);
          const int64_t at2 = at + 2 * OW;
          if (res) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m2, res + at2));
          if (relu) v = _mm512_max_ps(v, z);
          _mm512_mask_storeu_ps(y + at2, m2, v);
        }
      }
    }
  }
}

}  // namespace

bool conv_winograd_supported(int64_t C, int64_t M, int64_t OH, int64_t OW) {
  if (!has_avx512f() || C < 8 || M < 1 || OH < 1 || OW < 1) return false;
  // Odd sizes (squeezenet's 55-, 27- and 13-wide Fire maps): the segments cover ceil(OW / 2)
  // tiles a row and ceil(OH / 2) tile rows, read one more zero row and column of the padded
  // input (Hp = 2 th + 2, Wp = 2 tw + 2) and store only the outputs inside the map.
  // MEMLANE_CONV_WINOGRAD_NO_ODD=1: odd maps stay on the direct kernel (A/B timing).
  static const bool odd = std::getenv("MEMLANE_CONV_WINOGRAD_NO_ODD") == nullptr;
  static const bool segments = std::getenv("MEMLANE_CONV_WINOGRAD_NO_SEGMENTS") == nullptr;
  if (OH % 2 || OW % 2) return odd && segments && winograd_segmented((OW + 1) / 2);
  const int64_t tw = OW / 2, th = OH / 2;
  // 8x8 maps: measured faster than the direct kernel with 16 input channels (digits-cnn),
  // slower with 64 (resnet-mini's last block), where the 128-bit transforms dominate.
  if ((tw == 4 && th * tw == 16 && C <= 32) || ((tw == 8 || tw == 16) && (th * tw) % kBlock == 0)) return true;
  // Other widths in segments: 12-31 tiles a row (24- to 62-wide maps) or 6-7 (12- and 14-wide).
  return segments && winograd_segmented(tw);
}

int64_t conv_winograd_samples(int64_t OH, int64_t OW) {
  const int64_t T = std::max<int64_t>(1, ((OH + 1) / 2) * ((OW + 1) / 2));
  return T < kBlock ? kBlock / T : 1;
}

__attribute__((target("avx512f"))) void conv_winograd(const float* pad, int64_t padStride, int64_t samples, int64_t C,
                                                      const float* U, const float* bias, float* y, int64_t M,
                                                      int64_t OH, int64_t OW, bool relu, float* scratch, int64_t slot,
                                                      int64_t slots, const float* res) {
  // (odd OH / OW: the last tile row / column half outside the map; conv_winograd_pad)
  const int64_t tw = (OW + 1) / 2, th = (OH + 1) / 2, T = th * tw, Hp = 2 * th + 2, Wh = tw + 1;
  const bool segmented = winograd_segmented(tw);
  const int64_t segs = samples * segments_per_sample(th, tw);
  const int64_t blocks = segmented ? (segs + 1) / 2 : (samples * T + kBlock - 1) / kBlock;
  // A share of the blocks, or of the output channels (every block: winograd_split_channels).
  int64_t b0 = 0, b1 = blocks, m0 = 0, m1 = M;
  if (slots > 0 && winograd_split_channels(blocks, slots, C, M)) {
    m0 = std::min(M, (M * slot / slots + 4) / 8 * 8);
    m1 = slot + 1 == slots ? M : std::min(M, (M * (slot + 1) / slots + 4) / 8 * 8);
  } else if (slots > 0) {
    b0 = blocks * slot / slots;
    b1 = blocks * (slot + 1) / slots;
  }
  if (m0 >= m1) return;
  float* V = scratch;
  float* P = scratch + 16 * plane_stride(C);
  const auto products = [&] {
    int64_t m = m0;
    for (; m + 8 <= m1; m += 8) product<8>(U, V, P, C, M, m);
    for (; m + 4 <= m1; m += 4) product<4>(U, V, P, C, M, m);
    for (; m < m1; ++m) product<1>(U, V, P, C, M, m);
  };
  for (int64_t k = b0; k < b1; ++k) {
    if (segmented) {
      const Seg sg[2] = {segment(2 * k, segs, th, tw), segment(2 * k + 1, segs, th, tw)};
      input_segments(pad, padStride, C, Hp, Wh, sg, V);
      products();
      output_segments(P, bias, y, res, M, m0, m1, OH, OW, sg, relu);
      continue;
    }
    const int64_t t0 = k * kBlock;
    if (tw == 16) input_block<16>(pad, padStride, samples, th, C, Hp, Wh, t0 / tw, V);
    else if (tw == 8) input_block<8>(pad, padStride, samples, th, C, Hp, Wh, t0 / tw, V);
    else input_block<4>(pad, padStride, samples, th, C, Hp, Wh, t0 / tw, V);
    products();
    output_block(P, bias, y, res, M, m0, m1, OH, OW, tw, t0, samples * T, relu);
  }
}

#else

bool conv_winograd_supported(int64_t, int64_t, int64_t, int64_t) { return false; }
int64_t conv_winograd_samples(int64_t, int64_t) { return 1; }
void conv_winograd(const float*, int64_t, int64_t, int64_t, const float*, const float*, float*, int64_t, int64_t,
                   int64_t, bool, float*, int64_t, int64_t, const float*) {}

#endif

}  // namespace memlane::cpu
