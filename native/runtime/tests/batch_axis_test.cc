// The row ops with the batch off axis 0 (torch's seq-first [S, batch, E]) and the ops the
// transformers' dynamo masks and nn.LSTM's h_n need: Transpose moving the batch, MatMul by a
// weight, Gemm on rank 3, LayerNorm, Softmax, Concat on either side of the batch, batched
// MatMul with the batch on a later leading dim, GatherND and Max/Min; each against a reference
// computed here, at a batch of 3 with 2 threads (the whole batch at once: no lanes).
#include <cmath>
#include <cstdint>
#include <vector>

#include "harness.h"
#include "op_runner.h"
#include "plan/plan.h"

using namespace mltest;
using memlane::Status;
using I64 = std::vector<int64_t>;
using F = std::vector<float>;
using B8 = std::vector<uint8_t>;

static F iota(size_t n, float scale = 1.f) {
  F v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::sin(float(i) * 0.7f) * scale;
  return v;
}

static bool near(const F& a, const F& b, float tol = 1e-5f) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(std::fabs(a[i] - b[i]) <= tol)) return false;
  return true;
}

static void test_transpose_matmul_gemm() {
  // x [S=2, batch, 3] -> Transpose [1,0,2] -> [batch, 2, 3] -> Gemm (rank 3) by W [3, 2] + c;
  // and x MatMul W directly on the seq-first layout.
  const int64_t S = 2, N = 3, E = 3, O = 2;
  PlanBuilder b;
  int x = b.tensor("x", {S, -1, E}, "input");
  int t = b.tensor("t", {-1, S, E}, "output");
  const F w = {1, 2, -1, 0.5f, 3, -2};  // [3, 2]
  int W = b.weight("W", {E, O}, w);
  int c = b.weight("c", {O}, {10, 20});
  int g = b.tensor("g", {-1, S, O}, "output");
  int m = b.tensor("m", {S, -1, O}, "output");
  b.op("Transpose", {x}, {t}, {{"perm", I64{1, 0, 2}}});
  b.op("Gemm", {t, W, c}, {g}, {{"alpha", 1.0}, {"beta", 1.0}, {"transA", int64_t(0)}, {"transB", int64_t(0)}});
  b.op("MatMul", {x, W}, {m});
  const F xs = iota(size_t(S * N * E));
  RawResult r = run_raw(b, N, {bytes_of(xs)}, 2, 4);
  CHECK_MSG(r.status == Status::kOk, r.message);
  F wt(size_t(N * S * E)), wg(size_t(N * S * O)), wm(size_t(S * N * O));
  for (int64_t s = 0; s < S; ++s)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t e = 0; e < E; ++e) wt[size_t((n * S + s) * E + e)] = xs[size_t((s * N + n) * E + e)];
  for (int64_t row = 0; row < N * S; ++row)
    for (int64_t o = 0; o < O; ++o) {
      float acc = 0.f, accm = 0.f;
      for (int64_t e = 0; e < E; ++e) {
        acc += wt[size_t(row * E + e)] * w[size_t(e * O + o)];
        accm += xs[size_t(row * E + e)] * w[size_t(e * O + o)];
      }
      wg[size_t(row * O + o)] = acc + (o ? 20.f : 10.f);
      wm[size_t(row * O + o)] = accm;  // seq-first rows are rows too
    }
  CHECK(r.out<float>(0) == wt);
  CHECK(near(r.out<float>(1), wg));
  CHECK(near(r.out<float>(2), wm));
}

static void test_layernorm_softmax_seq_first() {
  const int64_t S = 2, N = 3, E = 4;
  PlanBuilder b;
  int x = b.tensor("x", {S, -1, E}, "input");
  int g = b.weight("g", {E}, {1, 1, 1, 1});
  int ln = b.tensor("ln", {S, -1, E}, "output");
  int sm = b.tensor("sm", {S, -1, E}, "output");
  int s0 = b.tensor("s0", {S, -1, E}, "output");  // softmax over axis 0, the batch after it
  b.op("LayerNormalization", {x, g}, {ln}, {{"axis", int64_t(2)}, {"epsilon", 1e-5}});
  b.op("Softmax", {x}, {sm}, {{"axis", int64_t(2)}});
  b.op("Softmax", {x}, {s0}, {{"axis", int64_t(0)}});
  const F xs = iota(size_t(S * N * E), 2.f);
  RawResult r = run_raw(b, N, {bytes_of(xs)}, 2, 4);
  CHECK_MSG(r.status == Status::kOk, r.message);
  F wl(xs.size()), ws(xs.size()), w0(xs.size());
  for (int64_t row = 0; row < S * N; ++row) {
    const float* v = &xs[size_t(row * E)];
    float mean = 0, var = 0, mx = v[0], sum = 0;
    for (int64_t e = 0; e < E; ++e) mean += v[e] / float(E), mx = std::max(mx, v[e]);
    for (int64_t e = 0; e < E; ++e) var += (v[e] - mean) * (v[e] - mean) / float(E);
    for (int64_t e = 0; e < E; ++e) sum += std::exp(v[e] - mx);
    for (int64_t e = 0; e < E; ++e) {
      wl[size_t(row * E + e)] = (v[e] - mean) / std::sqrt(var + 1e-5f);
      ws[size_t(row * E + e)] = std::exp(v[e] - mx) / sum;
    }
  }
  for (int64_t col = 0; col < N * E; ++col) {
    float sum = 0;
    for (int64_t s = 0; s < S; ++s) sum += std::exp(xs[size_t(s * N * E + col)]);
    for (int64_t s = 0; s < S; ++s) w0[size_t(s * N * E + col)] = std::exp(xs[size_t(s * N * E + col)]) / sum;
  }
  CHECK(near(r.out<float>(0), wl, 1e-4f));
  CHECK(near(r.out<float>(1), ws));
  CHECK(near(r.out<float>(2), w0));
}

static void test_concat_and_batched_matmul_batch_inner() {
  // h_n-style Concat on axis 0 of two [1, batch, 2]; MatMul of [2, batch, 1, 2] x [2, batch, 2, 1].
  const int64_t N = 3;
  PlanBuilder b;
  int a = b.tensor("a", {1, -1, 2}, "input");
  int c = b.tensor("c", {1, -1, 2}, "input");
  int y = b.tensor("y", {2, -1, 2}, "output");
  b.op("Concat", {a, c}, {y}, {{"axis", int64_t(0)}});
  int p = b.tensor("p", {2, -1, 1, 2}, "input");
  int q = b.tensor("q", {2, -1, 2, 1}, "input");
  int z = b.tensor("z", {2, -1, 1, 1}, "output");
  b.op("MatMul", {p, q}, {z});
  const F as = iota(size_t(N * 2)), cs = iota(size_t(N * 2), 3.f), ps = iota(size_t(2 * N * 2)), qs = iota(size_t(2 * N * 2), -1.f);
  RawResult r = run_raw(b, N, {bytes_of(as), bytes_of(cs), bytes_of(ps), bytes_of(qs)}, 2, 4);
  CHECK_MSG(r.status == Status::kOk, r.message);
  F wy = as;
  wy.insert(wy.end(), cs.begin(), cs.end());
  F wz(size_t(2 * N));
  for (size_t s = 0; s < wz.size(); ++s) wz[s] = ps[2 * s] * qs[2 * s] + ps[2 * s + 1] * qs[2 * s + 1];
  CHECK(r.out<float>(0) == wy);
  CHECK(near(r.out<float>(1), wz));
}

static void test_gather_nd_and_max() {
  // mask[arange(batch), arange(S)] over [batch, S, 2] tuples (transformers' dynamo masks).
  const int64_t N = 3, S = 4;
  PlanBuilder b;
  int m = b.tensor("mask", {-1, S}, "input", "bool");
  int idx = b.tensor("idx", {-1, S, 2}, "input", "int64");
  int y = b.tensor("y", {-1, S}, "output", "bool");
  b.op("GatherND", {m, idx}, {y});
  int u = b.tensor("u", {-1, 2}, "input", "int64");
  int v = b.typed_weight<int64_t>("v", {2}, "int64", {5, -5});
  int mx = b.tensor("mx", {-1, 2}, "output", "int64");
  b.op("Max", {u, v}, {mx});
  B8 mask(size_t(N * S));
  for (size_t i = 0; i < mask.size(); ++i) mask[i] = uint8_t(i % 3 == 0);
  I64 tuples;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t s = 0; s < S; ++s) tuples.insert(tuples.end(), {N - 1 - n, s - S});  // reversed rows, negative columns
  const I64 us = {1, 2, 7, -9, 0, 0};
  RawResult r = run_raw(b, N, {bytes_of(mask), bytes_of(tuples), bytes_of(us)}, 2, 4);
  CHECK_MSG(r.status == Status::kOk, r.message);
  B8 want;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t s = 0; s < S; ++s) want.push_back(mask[size_t((N - 1 - n) * S + s)]);
  CHECK(r.out<uint8_t>(0) == want);
  CHECK((r.out<int64_t>(1) == I64{5, 2, 7, -5, 5, 0}));
  // A tuple past the batch fails the request, naming it.
  tuples[0] = N;
  RawResult e = run_raw(b, N, {bytes_of(mask), bytes_of(tuples), bytes_of(us)}, 2, 4);
  CHECK(e.status == Status::kInvalidArgument);
  CHECK_CONTAINS(e.message, "index 3 of tuple 0 is out of range for data axis 0 of size 3");
}

int main() {
  test_transpose_matmul_gemm();
  test_layernorm_softmax_seq_first();
  test_concat_and_batched_matmul_batch_inner();
  test_gather_nd_and_max();
  return finish("batch_axis_test");
}
