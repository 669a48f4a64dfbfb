// simd/avx2_gemm.h called directly, against a double-precision reference: every column tail
// (none, a 1-3 vector panel, the 1-4 column dot products), row counts that leave every tile's
// remainder, K over and under a slice, and the products that run blocked (A of 64 Ki floats
// or more: K slices x column blocks, row blocks inner), with a column bias, a row bias, each
// activation and a residual (also in place, res == C). ctest runs it once more with
// MEMLANE_GEMM_NO_BLOCKED=1 and once with MEMLANE_GEMM_NO_DOT_TAIL=1, so each order is checked
// on the same shapes.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "cpu/simd/avx2_gemm.h"
#include "harness.h"

using memlane::cpu::ConvAct;
namespace simd = memlane::cpu::simd;
using namespace mltest;

namespace {

struct Shape {
  int64_t M, N, K;
};

float act_ref(double v, const ConvAct& a) {
  switch (a.kind) {
    case ConvAct::kNone: return float(v);
    case ConvAct::kRelu: return float(std::max(v, 0.0));
    case ConvAct::kClip: return float(std::min(std::max(v, double(a.lo)), double(a.hi)));
    case ConvAct::kHardSwish: return float(v * std::min(std::max(v + 3.0, 0.0), 6.0) / 6.0);
    case ConvAct::kSiLU: return float(v / (1.0 + std::exp(-v)));
  }
  return 0.f;
}

std::vector<float> random_vec(std::mt19937& rng, size_t n) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

// C's rows a row apart by ldc > N, A's by lda > K, B's by ldb > N: strides that are not the
// sizes, as a pointwise conv's column panel of a wider map passes them.
void check_shape(std::mt19937& rng, const Shape& s) {
  const int64_t lda = s.K + 3, ldb = s.N + 5, ldc = s.N + 7;
  const std::vector<float> A = random_vec(rng, size_t(s.M * lda)), B = random_vec(rng, size_t(s.K * ldb));
  const std::vector<float> bias = random_vec(rng, size_t(s.M)), colb = random_vec(rng, size_t(s.N));
  const std::vector<float> R0 = random_vec(rng, size_t(s.M * ldc));
  std::vector<double> dot(size_t(s.M * s.N));
  double scale = 0;  // for the tolerance: the largest |a| |b| sum of an element
  for (int64_t i = 0; i < s.M; ++i)
    for (int64_t j = 0; j < s.N; ++j) {
      double t = 0, m = 0;
      for (int64_t k = 0; k < s.K; ++k) {
        t += double(A[size_t(i * lda + k)]) * B[size_t(k * ldb + j)];
        m += std::fabs(double(A[size_t(i * lda + k)]) * B[size_t(k * ldb + j)]);
      }
      dot[size_t(i * s.N + j)] = t;
      scale = std::max(scale, m);
    }
  const float tol = float(1e-6 * scale + 1e-6);
  const std::string shape = std::to_string(s.M) + "x" + std::to_string(s.N) + "x" + std::to_string(s.K);
  const auto compare = [&](const std::vector<float>& C, const std::vector<float>& want, const std::string& what) {
    float worst = 0;
    for (int64_t i = 0; i < s.M; ++i)
      for (int64_t j = 0; j < s.N; ++j) worst = std::max(worst, std::fabs(C[size_t(i * ldc + j)] - want[size_t(i * ldc + j)]));
    // the padding between rows untouched
    bool pad_ok = true;
    for (int64_t i = 0; i < s.M; ++i)
      for (int64_t j = s.N; j < ldc; ++j) pad_ok = pad_ok && C[size_t(i * ldc + j)] == 42.f;
    CHECK_MSG(worst <= tol, shape + " " + what + ": max abs diff " + std::to_string(worst) + " > " + std::to_string(tol));
    CHECK_MSG(pad_ok, shape + " " + what + ": wrote past column N");
  };
  {  // column bias (sgemm_nn_avx2)
    std::vector<float> C(size_t(s.M * ldc), 42.f), want(C);
    for (int64_t i = 0; i < s.M; ++i)
      for (int64_t j = 0; j < s.N; ++j) want[size_t(i * ldc + j)] = float(dot[size_t(i * s.N + j)] + colb[size_t(j)]);
    simd::sgemm_nn_avx2(s.M, s.N, s.K, A.data(), lda, B.data(), ldb, C.data(), ldc, colb.data());
    compare(C, want, "column bias");
  }
  const ConvAct acts[] = {{ConvAct::kNone, 0, 0}, {ConvAct::kRelu, 0, 0}, {ConvAct::kClip, -0.5f, 0.75f},
                          {ConvAct::kHardSwish, 0, 0}, {ConvAct::kSiLU, 0, 0}};
  for (const ConvAct& a : acts) {  // row bias + activation (sgemm_nn_rows_avx2)
    std::vector<float> C(size_t(s.M * ldc), 42.f), want(C);
    for (int64_t i = 0; i < s.M; ++i)
      for (int64_t j = 0; j < s.N; ++j) want[size_t(i * ldc + j)] = act_ref(dot[size_t(i * s.N + j)] + bias[size_t(i)], a);
    simd::sgemm_nn_rows_avx2(s.M, s.N, s.K, A.data(), lda, B.data(), ldb, C.data(), ldc, bias.data(), a);
    compare(C, want, "act " + std::to_string(int(a.kind)));
  }
  for (const bool relu : {false, true})
    for (const bool in_place : {false, true}) {  // + residual, then Relu or nothing
      const ConvAct a{relu ? ConvAct::kRelu : ConvAct::kNone, 0, 0};
      std::vector<float> C(size_t(s.M * ldc), 42.f), want(C), R = R0;
      for (int64_t i = 0; i < s.M; ++i)
        for (int64_t j = 0; j < s.N; ++j) {
          if (in_place) C[size_t(i * ldc + j)] = R0[size_t(i * ldc + j)];
          want[size_t(i * ldc + j)] = act_ref(dot[size_t(i * s.N + j)] + bias[size_t(i)] + R0[size_t(i * ldc + j)], a);
        }
      simd::sgemm_nn_rows_avx2(s.M, s.N, s.K, A.data(), lda, B.data(), ldb, C.data(), ldc, bias.data(), a,
                               in_place ? C.data() : R.data());
      compare(C, want, std::string("residual") + (relu ? " relu" : "") + (in_place ? " in place" : ""));
    }
}

}  // namespace

int main() {
  if (!simd::have_avx2_gemm()) {
    std::printf("avx2_gemm_test: skipped (this build has no AVX2+FMA sgemm: not x86-64-v3)\n");
    return finish("avx2_gemm_test");
  }
  std::mt19937 rng(7);
  const Shape shapes[] = {
      // panel by panel: A under 64 Ki floats, or B too large to pack whole
      {13, 49, 40}, {7, 24, 5}, {30, 60, 300}, {9, 3, 17}, {50, 196, 64},
      // blocked: row blocks of 24 (M = 400: 16 blocks + 16 rows) inside K slices of 256 and
      // column blocks of B
      {400, 49, 400},   // 2 panels + a 1-column dot tail (RegNet's 7x7 pointwise convs)
      {410, 52, 160},   // + a 4-column dot tail
      {250, 55, 300},   // + a 1-vector masked panel (7 columns)
      {300, 62, 260},   // + a 2-vector masked panel (14 columns), K over one 256-step slice
      {333, 69, 200},   // + a 3-vector masked panel (21 columns)
      {420, 48, 160},   // two full panels, no tail
      {700, 196, 100},  // 8 panels + a 4-column dot tail, 14x14's
      {300, 200, 700},  // K in 3 slices; columns in blocks of 120 and 80 (a 1-vector tail panel)
      {130, 800, 520},  // 6 blocks of 120 + 80; in place, K unsliced: blocks of 48
      {64, 1100, 1030}, // 9 blocks of 120 + a last one of 20 columns (a 3-vector panel alone)
      {260, 60, 300},   // 2 slices (256 + 44); in place one slice of 300
  };
  const bool blocked_on = std::getenv("MEMLANE_GEMM_NO_BLOCKED") == nullptr;
  for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); ++i) {
    const Shape& s = shapes[i];
    const bool blocked = simd::avx2_gemm_blocked(s.M, s.N, s.K);
    CHECK_MSG(blocked == (blocked_on && i >= 5), std::to_string(s.M) + "x" + std::to_string(s.N) + "x" +
                                                     std::to_string(s.K) + (blocked ? " runs" : " does not run") + " blocked");
    check_shape(rng, s);
  }
  return finish("avx2_gemm_test");
}
