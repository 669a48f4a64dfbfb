#include "cpu/lstm_packed.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cpu/sgemm_pool.h"
#include "cpu/simd/avx512.h"
#include "cpu/simd/avx512_math.h"
#include "cpu/thread_pool.h"

namespace memlane::cpu {

LstmPacked lstm_pack(const float* W, const float* R, const float* bias, int D, int64_t H, int64_t I) {
  LstmPacked p;
  p.D = D;
  p.H = H;
  p.I = I;
  p.Hp = (H + 15) / 16 * 16;
  const int64_t G = 4 * p.Hp, nb = p.Hp / 16;
  p.w.assign(size_t(I * D * G), 0.f);
  p.r.assign(size_t(D * nb * H * 64), 0.f);
  p.bias.assign(size_t(D * G), 0.f);
  for (int d = 0; d < D; ++d)
    for (int64_t jb = 0; jb < nb; ++jb)
      for (int g = 0; g < 4; ++g)
        for (int64_t l = 0; l < 16; ++l) {
          const int64_t u = jb * 16 + l;  // hidden unit
          if (u >= H) continue;           // padding: zero weights and bias
          const int64_t src = d * 4 * H + g * H + u;  // row of W / R, column of the bias
          const int64_t col = jb * 64 + g * 16 + l;
          for (int64_t i = 0; i < I; ++i) p.w[size_t(i * D * G + d * G + col)] = W[src * I + i];
          float* rb = &p.r[size_t((d * nb + jb) * H * 64 + g * 16 + l)];
          for (int64_t k = 0; k < H; ++k) rb[k * 64] = R[src * H + k];
          if (bias) p.bias[size_t(d * G + col)] = bias[d * 8 * H + g * H + u] + bias[d * 8 * H + 4 * H + g * H + u];
        }
  return p;
}

int64_t lstm_packed_workspace_floats(const LstmDims& d, const LstmPacked& p) {
  return d.S * d.B * d.D * 4 * p.Hp + d.D * 3 * d.B * p.Hp;
}

#if defined(__x86_64__) || defined(_M_X64)

namespace {

// One time step of `rows` batch rows of one direction.
struct Step {
  int rows = 0;
  int64_t H = 0, K = 0;        // K = H, or 0 at the first step (h = 0: no recurrent term)
  const float* proj = nullptr;  // row 0's gate-interleaved projection at this t
  int64_t ld_proj = 0;
  const float* r = nullptr;     // the direction's packed R
  const float* h_prev = nullptr;
  float* h_next = nullptr;
  float* c = nullptr;           // updated in place
  int64_t ld_h = 0;             // h_prev, h_next and c rows (Hp)
  float* y = nullptr;           // H floats a row at y + row * ld_y, or null
  int64_t ld_y = 0;
  bool backward = false;        // walk the blocks from the last: see step_blocks
};

MEMLANE_AVX512 inline __mmask16 tail_mask(int64_t n) {
  return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1u);
}

// ROWS rows x NB blocks of 16 units: 4 * ROWS * NB accumulators (at most 16) plus the NB * 4
// vectors of R of this k, loaded once for every row.
template <int ROWS, int NB>
MEMLANE_AVX512 void cell_tile(const Step& s, int r0, int64_t jb) {
  __m512 acc[ROWS][NB][4];
  for (int r = 0; r < ROWS; ++r)
    for (int n = 0; n < NB; ++n)
      for (int g = 0; g < 4; ++g) {
        const int64_t col = (jb + n) * 64 + g * 16;
        acc[r][n][g] = _mm512_loadu_ps(s.proj + (r0 + r) * s.ld_proj + col);
      }
  const float* rp = s.r + jb * s.H * 64;
  const float* hp = s.h_prev + r0 * s.ld_h;
  for (int64_t k = 0; k < s.K; ++k) {
    __m512 wv[NB][4];
    for (int n = 0; n < NB; ++n)
      for (int g = 0; g < 4; ++g) wv[n][g] = _mm512_loadu_ps(rp + n * s.H * 64 + k * 64 + g * 16);
    for (int r = 0; r < ROWS; ++r) {
      const __m512 hk = _mm512_set1_ps(hp[r * s.ld_h + k]);
      for (int n = 0; n < NB; ++n)
        for (int g = 0; g < 4; ++g) acc[r][n][g] = _mm512_fmadd_ps(hk, wv[n][g], acc[r][n][g]);
    }
  }
  using simd::detail::sigmoid16;
  using simd::detail::tanh16;
  for (int r = 0; r < ROWS; ++r)
    for (int n = 0; n < NB; ++n) {
      const int64_t u = (jb + n) * 16;
      const __m512 ig = sigmoid16(acc[r][n][0]), og = sigmoid16(acc[r][n][1]), fg = sigmoid16(acc[r][n][2]);
      float* cp = s.c + (r0 + r) * s.ld_h + u;
      const __m512 c = _mm512_fmadd_ps(fg, _mm512_loadu_ps(cp), _mm512_mul_ps(ig, tanh16(acc[r][n][3])));
      _mm512_storeu_ps(cp, c);
      const __m512 h = _mm512_mul_ps(og, tanh16(c));
      _mm512_storeu_ps(s.h_next + (r0 + r) * s.ld_h + u, h);
      if (s.y) _mm512_mask_storeu_ps(s.y + (r0 + r) * s.ld_y + u, tail_mask(s.H - u), h);
    }
}

template <int ROWS>
MEMLANE_AVX512 void tile_rows(const Step& s, int r0, int64_t jb, bool pair) {
  if (pair && ROWS <= 2) return cell_tile<ROWS, 2>(s, r0, jb);
  cell_tile<ROWS, 1>(s, r0, jb);
  if (pair) cell_tile<ROWS, 1>(s, r0, jb + 1);
}

// Blocks [jb0, jb1) of every row, two at a time. Blocks outer, rows inner: a block's R
// (H x 64 floats) is read from L2 by every row group rather than streamed from memory once
// per group. One row (or two) takes both blocks in one tile, so 8 (16) accumulators keep the
// FMA units busy. Steps alternate the direction of the walk: where R is about the size of L2
// the blocks the last step read last are still there when the next step starts with them
// (one walk order would evict each block just before it is read again).
MEMLANE_AVX512 void step_blocks(const Step& s, int64_t jb0, int64_t jb1) {
  const int64_t units = (jb1 - jb0 + 1) / 2;
  for (int64_t i = 0; i < units; ++i) {
    const int64_t jb = jb0 + 2 * (s.backward ? units - 1 - i : i);
    const bool pair = jb + 2 <= jb1;
    for (int r0 = 0; r0 < s.rows; r0 += 4) {
      switch (std::min(4, s.rows - r0)) {
        case 1: tile_rows<1>(s, r0, jb, pair); break;
        case 2: tile_rows<2>(s, r0, jb, pair); break;
        case 3: tile_rows<3>(s, r0, jb, pair); break;
        default: tile_rows<4>(s, r0, jb, pair); break;
      }
    }
  }
}

enum class Split { kAuto, kTasks, kCols, kNone };

Split forced_split() {
  static const Split s = [] {
    const char* e = std::getenv("MEMLANE_LSTM_SPLIT");
    if (!e || !*e) return Split::kAuto;
    if (!std::strcmp(e, "tasks")) return Split::kTasks;
    if (!std::strcmp(e, "cols")) return Split::kCols;
    if (!std::strcmp(e, "none")) return Split::kNone;
    std::fprintf(stderr, "memlane-rt: MEMLANE_LSTM_SPLIT=\"%s\" is not tasks, cols or none; choosing per layer\n", e);
    return Split::kAuto;
  }();
  return s;
}

// A per-step barrier (the pool's workers spin between steps) is taken only from this many
// multiply-adds a step; below it one thread runs the whole recurrence. Unsettled: on the
// shared 2-core machine at load average 10 the split lost to one thread at batch 1 even at
// H = 1024 (64-74 ms against 41-51 ms), a worker descheduled in mid-step holding up each
// step; on idle cores it halves the R each core streams a step, which is what a step of this
// size waits on. Not timed idle. (At batch > 1 with 2+ threads the backend runs the batch in
// lanes, one a thread, and this kernel sees a one-thread pool: the splits here serve batch 1,
// profiling runs and plans that cannot be cut into lanes.)
constexpr int64_t kMinStepMacsToSplit = int64_t(1) << 20;
// R of one direction above this (bytes) does not stay in one core's L2 (1 MiB on Zen 4, with the
// projection and state beside it): batch-row tasks would each stream all of it every step,
// where splitting the step's blocks streams each half once.
constexpr int64_t kMaxTaskRBytes = int64_t(1) << 19;

// The input projection of every step and direction, both biases added: proj = x W^T + b,
// [M, D * 4Hp]. A W^T of up to kMaxNnWeightBytes: simd::sgemm_nn (as MatMul: no packing;
// OpenBLAS packs W every call, which at I = 32..64 costs about what the product does; the
// zoo lstm's layers 5% faster) in 64-row blocks, threads splitting the rows in units of 8,
// the bias in its epilogue. A larger one (I = 128 and 512 x 2048 columns: sgemm_nn 6-16%
// slower): OpenBLAS through sgemm_pool over rows holding the bias.
constexpr int64_t kMaxNnWeightBytes = int64_t(256) << 10;

void project(int64_t M, const LstmPacked& p, const float* x, float* proj, ThreadPool* pool) {
  const int64_t N = p.D * 4 * p.Hp, K = p.I, kRowBlock = 64, kMinMacsPerThread = int64_t(1) << 19;
  if (M == 0) return;
  if (K * N * 4 > kMaxNnWeightBytes) {
    for (int64_t r = 0; r < M; ++r) std::memcpy(proj + r * N, p.bias.data(), sizeof(float) * size_t(N));
    return sgemm_pool(pool, false, M, N, K, 1.f, x, K, p.w.data(), N, 1.f, proj, N);
  }
  auto rows = [&](int64_t u0, int64_t u1) {
    const int64_t end = std::min(M, u1 * 8);
    for (int64_t r0 = u0 * 8; r0 < end; r0 += kRowBlock)
      simd::sgemm_nn(std::min(kRowBlock, end - r0), N, K, x + r0 * K, K, p.w.data(), N, proj + r0 * N, N, p.bias.data());
  };
  const int64_t units = (M + 7) / 8;
  if (!pool) return rows(0, units);
  pool->parallel_for(units, std::max<int64_t>(kRowBlock / 8, kMinMacsPerThread / std::max<int64_t>(1, 8 * N * K)), rows);
}

}  // namespace

void lstm_packed(const LstmDims& d, const LstmPacked& p, const float* x, float* y, float* yh, float* yc,
                 float* workspace, ThreadPool* pool) {
  const int64_t S = d.S, B = d.B, H = p.H, Hp = p.Hp, G = 4 * Hp, ld_proj = d.D * G, nb = Hp / 16;
  float* proj = workspace;  // [S * B, D * 4Hp] in x's row order
  float* state = proj + S * B * ld_proj;
  project(S * B, p, x, proj, pool);

  // One direction's rows [b0, b1) over the whole sequence; `cols`: each step's blocks split
  // across the pool.
  auto recur = [&](int dir, int64_t b0, int64_t b1, bool cols) {
    const bool back = dir == 1 || d.reverse;
    float* h0 = state + dir * 3 * B * Hp + b0 * Hp;
    float* h1 = h0 + B * Hp;
    float* c = h1 + B * Hp;
    std::fill(c, c + (b1 - b0) * Hp, 0.f);
    Step s;
    s.rows = int(b1 - b0);
    s.H = H;
    s.ld_proj = d.x_b * ld_proj;
    s.r = p.r.data() + dir * nb * H * 64;
    s.c = c;
    s.ld_h = Hp;
    s.ld_y = d.y_b;
    for (int64_t step = 0; step < S; ++step) {
      const int64_t t = back ? S - 1 - step : step;
      s.K = step == 0 ? 0 : H;
      s.proj = proj + (t * d.x_t + b0 * d.x_b) * ld_proj + dir * G;
      s.h_prev = step % 2 ? h1 : h0;
      s.h_next = step % 2 ? h0 : h1;
      s.y = y ? y + t * d.y_t + dir * d.y_d + b0 * d.y_b : nullptr;
      s.backward = step % 2 == 1;
      if (cols) {
        const int64_t pairs = (nb + 1) / 2;
        // (forced, as the tests do on small layers: every pair of blocks its own chunk)
        const int64_t grain = forced_split() == Split::kCols
                                  ? 1
                                  : std::max<int64_t>(1, kMinStepMacsToSplit / std::max<int64_t>(1, s.rows * 128 * H));
        pool->parallel_for(pairs, grain, [&](int64_t q0, int64_t q1) { step_blocks(s, 2 * q0, std::min(nb, 2 * q1)); });
      } else {
        step_blocks(s, 0, nb);
      }
    }
    const float* h_last = S % 2 ? h1 : h0;
    for (int64_t b = b0; b < b1; ++b) {
      if (yh) {
        float* o = yh + dir * d.s_d + b * d.s_b;
        if (S) std::memcpy(o, h_last + (b - b0) * Hp, sizeof(float) * size_t(H));
        else std::fill(o, o + H, 0.f);
      }
      if (yc) std::memcpy(yc + dir * d.s_d + b * d.s_b, c + (b - b0) * Hp, sizeof(float) * size_t(H));
    }
  };

  const int threads = pool ? pool->threads() : 1;
  const int64_t step_macs = B * 4 * H * H;
  Split split = forced_split();
  if (split == Split::kAuto) {
    // Two directions are two tasks that stream their own R each, however large.
    if (threads < 2 || (d.D == 1 && B == 1 && step_macs < kMinStepMacsToSplit)) split = Split::kNone;
    else if (d.D == 2 || (B >= 2 && 16 * H * H <= kMaxTaskRBytes)) split = Split::kTasks;
    else split = step_macs >= kMinStepMacsToSplit ? Split::kCols : Split::kNone;
  }
  if (split == Split::kTasks && threads >= 2) {
    // Directions, then groups of rows, as independent recurrences: no barrier per step.
    const int64_t groups = std::min<int64_t>(B, std::max(1, threads / d.D));
    pool->parallel_for(d.D * groups, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t task = t0; task < t1; ++task) {
        const int64_t g = task % groups;
        recur(int(task / groups), B * g / groups, B * (g + 1) / groups, false);
      }
    });
    return;
  }
  for (int dir = 0; dir < d.D; ++dir) recur(dir, 0, B, split == Split::kCols && threads >= 2);
}

#else  // not x86-64: lstm.cc never picks the packed path.

void lstm_packed(const LstmDims&, const LstmPacked&, const float*, float*, float*, float*, float*, ThreadPool*) {
  std::abort();
}

#endif

}  // namespace memlane::cpu
