// The transformer kernels as plain functions (attention_slice, layernorm_rows and the AVX-512
// helpers in cpu/simd) against naive double-precision references, at odd sizes (tails of
// every vector and register tile), with and without masks. Run once as built (AVX-512 where
// the CPU has it) and once with MEMLANE_CPU_NO_AVX512=1 (the portable paths; see CMakeLists.txt).
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "cpu/attention.h"
#include "cpu/layernorm.h"
#include "cpu/simd/avx512.h"
#include "harness.h"

using namespace memlane::cpu;

namespace {

std::vector<float> randoms(size_t n, unsigned seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = u(g);
  return v;
}

double max_diff(const std::vector<float>& a, const std::vector<double>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - b[i]));
  return m;
}

// Naive attention of one slice: softmax(Q Kt * scale + mask) V in double.
std::vector<double> attention_ref(const AttentionSlice& a) {
  std::vector<double> y(size_t(a.S * a.dv), 0.0), p(size_t(a.T));
  for (int64_t i = 0; i < a.S; ++i) {
    double mx = -1e300;
    for (int64_t j = 0; j < a.T; ++j) {
      double s = 0;
      for (int64_t k = 0; k < a.d; ++k) s += double(a.q[i * a.d + k]) * a.kt[k * a.T + j];
      s = s * a.scale + (a.mask ? a.mask[i * a.mask_row + j * a.mask_col] : 0.0);
      p[size_t(j)] = s;
      mx = std::max(mx, s);
    }
    double sum = 0;
    for (auto& v : p) sum += (v = std::exp(v - mx));
    for (int64_t j = 0; j < a.T; ++j)
      for (int64_t c = 0; c < a.dv; ++c) y[size_t(i * a.dv + c)] += p[size_t(j)] / sum * a.v[j * a.dv + c];
  }
  return y;
}

void check_attention(int64_t S, int64_t T, int64_t d, int64_t dv, int mask_kind) {
  auto q = randoms(size_t(S * d), 1), kt = randoms(size_t(d * T), 2), v = randoms(size_t(T * dv), 3);
  // mask_kind 0: none; 1: a full [S, T] mask with -1e4 holes; 2: a per-key row [1, T]
  // (BERT's padding mask, row stride 0); 3: a per-query column [S, 1] (column stride 0).
  std::vector<float> mask;
  AttentionSlice a;
  if (mask_kind == 1) {
    mask = randoms(size_t(S * T), 4, -2.f, 2.f);
    for (size_t i = 0; i < mask.size(); i += 7) mask[i] = -1e4f;
    a.mask_row = T, a.mask_col = 1;
  } else if (mask_kind == 2) {
    mask = randoms(size_t(T), 5, -1.f, 0.f);
    mask[size_t(T - 1)] = -3.4e38f;  // a masked-out key as transformers writes it
    a.mask_row = 0, a.mask_col = 1;
  } else if (mask_kind == 3) {
    mask = randoms(size_t(S), 6);
    a.mask_row = 1, a.mask_col = 0;
  }
  std::vector<float> y(size_t(S * dv), 0.f), scratch(size_t(kAttentionRows * T));
  a.q = q.data(), a.kt = kt.data(), a.v = v.data(), a.y = y.data();
  a.mask = mask_kind ? mask.data() : nullptr;
  a.S = S, a.T = T, a.d = d, a.dv = dv, a.scale = 1.f / std::sqrt(float(d));
  attention_slice(a, scratch.data());
  const double diff = max_diff(y, attention_ref(a));
  CHECK_MSG(diff < 2e-5, "attention S=" + std::to_string(S) + " T=" + std::to_string(T) + " d=" + std::to_string(d) +
                             " dv=" + std::to_string(dv) + " mask " + std::to_string(mask_kind) + ": max diff " +
                             std::to_string(diff));
}

void test_attention() {
  for (int mk = 0; mk < 4; ++mk) {
    check_attention(128, 128, 32, 32, mk);  // BERT's heads
    check_attention(197, 197, 32, 32, mk);  // ViT's 14 x 14 + 1 tokens
    check_attention(5, 17, 3, 7, mk);       // every tail at once
    check_attention(33, 1, 8, 16, mk);      // one key
    check_attention(40, 49, 64, 33, mk);
  }
}

// A key masked with finfo.min (transformers' padding and causal masks) must weigh exactly 0,
// not exp's clamp floor FLT_MIN: those keys' V rows hold 3e38 here, so a weight of 1.2e-38
// would add ~3.5 / sum to every output (and, at ordinary V, a denormal to every product of the
// P x V block, which an Intel core runs as a microcode assist: cpu/denormals.h).
void test_masked_keys_weigh_nothing() {
  const int64_t S = 19, T = 37, d = 16, dv = 24, masked = 9;
  auto q = randoms(size_t(S * d), 11), kt = randoms(size_t(d * T), 12), v = randoms(size_t(T * dv), 13);
  std::vector<float> mask(size_t(T), 0.f);
  for (int64_t j = T - masked; j < T; ++j) {
    mask[size_t(j)] = -3.4028235e38f;
    for (int64_t c = 0; c < dv; ++c) v[size_t(j * dv + c)] = 3e38f;
  }
  std::vector<float> y(size_t(S * dv), 0.f), scratch(size_t(kAttentionRows * T));
  AttentionSlice a;
  a.q = q.data(), a.kt = kt.data(), a.v = v.data(), a.y = y.data(), a.mask = mask.data();
  a.mask_row = 0, a.mask_col = 1;
  a.S = S, a.T = T, a.d = d, a.dv = dv, a.scale = 0.25f;
  attention_slice(a, scratch.data());
  const double diff = max_diff(y, attention_ref(a));
  CHECK_MSG(diff < 2e-5, "attention with finfo.min-masked keys: max diff " + std::to_string(diff));
}

void test_sgemm() {
  if (!simd::have_avx512()) {
    std::printf("transformer_kernels_test: simd::sgemm_nn skipped (no AVX-512, or MEMLANE_CPU_NO_AVX512 set)\n");
    return;
  }
  const int64_t sizes[][3] = {{1, 1, 1}, {8, 32, 64}, {9, 33, 5}, {17, 197, 32}, {128, 64, 64}, {3, 15, 200}};
  for (const auto& s : sizes) {
    const int64_t M = s[0], N = s[1], K = s[2], lda = K + 3, ldb = N + 1, ldc = N + 2;
    auto A = randoms(size_t(M * lda), 7), B = randoms(size_t(K * ldb), 8);
    std::vector<float> C(size_t(M * ldc), 42.f);
    simd::sgemm_nn(M, N, K, A.data(), lda, B.data(), ldb, C.data(), ldc);
    double diff = 0;
    bool pad_kept = true;
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) {
        double r = 0;
        for (int64_t k = 0; k < K; ++k) r += double(A[size_t(i * lda + k)]) * B[size_t(k * ldb + j)];
        diff = std::max(diff, std::fabs(r - C[size_t(i * ldc + j)]));
      }
      for (int64_t j = N; j < ldc; ++j) pad_kept = pad_kept && C[size_t(i * ldc + j)] == 42.f;
    }
    const std::string what = "sgemm " + std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K);
    CHECK_MSG(diff < 1e-4, what + ": max diff " + std::to_string(diff));
    CHECK_MSG(pad_kept, what + ": wrote past N");
  }
}

void test_gelu() {
  if (!simd::have_avx512()) return;
  auto x = randoms(37, 9, -6.f, 6.f);
  x[0] = 0.f, x[1] = -0.f, x[2] = 20.f, x[3] = -20.f;
  std::vector<float> y(x.size()), yt(x.size());
  simd::gelu(x.data(), y.data(), int64_t(x.size()));
  simd::gelu_tanh(x.data(), yt.data(), int64_t(x.size()));
  double d = 0, dt = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    d = std::max(d, std::fabs(y[i] - 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)))));
    dt = std::max(dt, std::fabs(yt[i] - 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)))));
  }
  CHECK_MSG(d < 1e-5, "gelu max diff " + std::to_string(d));
  CHECK_MSG(dt < 1e-5, "gelu_tanh max diff " + std::to_string(dt));
}

void test_layernorm() {
  for (int64_t n : {1, 15, 64, 100}) {
    const int64_t rows = 3;
    auto x = randoms(size_t(rows * n), 10, 50.f, 52.f);  // a large mean against the spread
    auto sc = randoms(size_t(n), 11), b = randoms(size_t(n), 12);
    std::vector<float> y(x.size());
    layernorm_rows(x.data(), y.data(), rows, n, sc.data(), b.data(), 1e-5f);
    std::vector<double> ref(x.size());
    for (int64_t r = 0; r < rows; ++r) {
      double mean = 0, var = 0;
      for (int64_t i = 0; i < n; ++i) mean += x[size_t(r * n + i)];
      mean /= double(n);
      for (int64_t i = 0; i < n; ++i) var += std::pow(x[size_t(r * n + i)] - mean, 2);
      const double inv = 1 / std::sqrt(var / double(n) + 1e-5);
      for (int64_t i = 0; i < n; ++i) ref[size_t(r * n + i)] = (x[size_t(r * n + i)] - mean) * inv * sc[size_t(i)] + b[size_t(i)];
    }
    const double diff = max_diff(y, ref);
    CHECK_MSG(diff < 5e-4, "layernorm n=" + std::to_string(n) + ": max diff " + std::to_string(diff));
  }
}

}  // namespace

int main() {
  test_attention();
  test_masked_keys_weigh_nothing();
  test_sgemm();
  test_gelu();
  test_layernorm();
  return mltest::finish(simd::have_avx512() ? "transformer_kernels_test (avx512)" : "transformer_kernels_test (portable)");
}
