// The CPU backend's LSTM against the ONNX equations in double precision: every direction,
// with and without bias, hidden sizes off and on the 16-lane blocks, batch 1 / 3 / 8, each
// prefix of the outputs (Y; Y, Y_h; Y, Y_h, Y_c), 1 and 2 threads. ctest runs this file once
// per path: the default (AVX-512 where the CPU has it), each forced thread split
// (MEMLANE_LSTM_SPLIT) and the portable lstm() (MEMLANE_CPU_NO_AVX512).
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "cpu/cnn_ops.h"
#include "cpu/kernel.h"
#include "cpu/lstm_packed.h"
#include "cpu/simd/avx512.h"
#include "harness.h"
#include "op_runner.h"

using namespace mltest;
using memlane::Status;
using V = std::vector<float>;

// The ONNX LSTM equations in double precision, batch-first, zero initial state.
struct LstmRef { V y, yh, yc; };
static LstmRef lstm_ref(const V& x, const V& W, const V& R, const V& B, int64_t N, int64_t S, int64_t I, int64_t H,
                        int D, bool reverse) {
  LstmRef o{V(size_t(N * S * D * H)), V(size_t(N * D * H)), V(size_t(N * D * H))};
  auto sg = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
  for (int d = 0; d < D; ++d)
    for (int64_t b = 0; b < N; ++b) {
      std::vector<double> h(size_t(H), 0.0), c(size_t(H), 0.0);
      for (int64_t st = 0; st < S; ++st) {
        const int64_t t = (d == 1 || reverse) ? S - 1 - st : st;
        std::vector<double> g(size_t(4 * H));
        for (int64_t j = 0; j < 4 * H; ++j) {
          double a = B.empty() ? 0.0 : double(B[size_t(d * 8 * H + j)]) + B[size_t(d * 8 * H + 4 * H + j)];
          for (int64_t i = 0; i < I; ++i) a += double(W[size_t((d * 4 * H + j) * I + i)]) * x[size_t((b * S + t) * I + i)];
          for (int64_t k = 0; k < H; ++k) a += double(R[size_t((d * 4 * H + j) * H + k)]) * h[size_t(k)];
          g[size_t(j)] = a;
        }
        for (int64_t j = 0; j < H; ++j) {
          const double ig = sg(g[size_t(j)]), og = sg(g[size_t(H + j)]), fg = sg(g[size_t(2 * H + j)]);
          c[size_t(j)] = fg * c[size_t(j)] + ig * std::tanh(g[size_t(3 * H + j)]);
          h[size_t(j)] = og * std::tanh(c[size_t(j)]);
          o.y[size_t(((b * S + t) * D + d) * H + j)] = float(h[size_t(j)]);
        }
      }
      for (int64_t j = 0; j < H; ++j) {
        o.yh[size_t((b * D + d) * H + j)] = float(h[size_t(j)]);
        o.yc[size_t((b * D + d) * H + j)] = float(c[size_t(j)]);
      }
    }
  return o;
}

// Uniform in [-scale, scale): weights scaled by 1/sqrt(fan-in) keep the gates off saturation,
// where a wrong product would hide.
static V scaled(Rng& rng, size_t n, float scale) {
  V v = rng.vec(n);
  for (auto& e : v) e *= scale;
  return v;
}

struct Case { const char* dir; int D; bool rev; bool bias; int64_t H; };

static void check_case(const Case& c, int64_t N, size_t n_out, int64_t I = 5, int64_t S = 7) {
  Rng rng;
  const int64_t H = c.H;
  const V x = rng.vec(size_t(N * S * I));
  const V W = scaled(rng, size_t(c.D * 4 * H * I), 1.f / std::sqrt(float(I)));
  const V R = scaled(rng, size_t(c.D * 4 * H * H), 2.f / std::sqrt(float(H)));
  const V B = c.bias ? rng.vec(size_t(c.D * 8 * H)) : V();
  PlanBuilder pb;
  int xi = pb.input("x", {S, I});
  int wi = pb.weight("W", {c.D, 4 * H, I}, W);
  int ri = pb.weight("R", {c.D, 4 * H, H}, R);
  int bi = c.bias ? pb.weight("B", {c.D, 8 * H}, B) : -1;
  std::vector<int64_t> outs = {pb.output("y", {S, c.D, H})};  // a plan declares only the outputs it has
  if (n_out > 1) outs.push_back(pb.output("yh", {c.D, H}));
  if (n_out > 2) outs.push_back(pb.output("yc", {c.D, H}));
  pb.op("LSTM", {xi, wi, ri, bi}, outs,
        {{"hiddenSize", H}, {"direction", std::string(c.dir)}, {"layout", int64_t(1)}});
  const LstmRef ref = lstm_ref(x, W, R, B, N, S, I, H, c.D, c.rev);
  const V* want[3] = {&ref.y, &ref.yh, &ref.yc};
  const char* names[3] = {" Y", " Y_h", " Y_c"};
  for (int threads : {1, 2}) {
    const std::string label = std::string("lstm ") + c.dir + (c.bias ? "" : " no bias") + " S " + std::to_string(S) + " I " + std::to_string(I) + " H " + std::to_string(H) +
                              " N " + std::to_string(N) + " outputs " + std::to_string(n_out) + " threads " +
                              std::to_string(threads);
    RunResult r = run_plan(pb, N, {x}, threads);
    CHECK_MSG(r.status == Status::kOk, label + ": " + r.message);
    if (r.status != Status::kOk) continue;
    for (size_t o = 0; o < n_out; ++o) CHECK_CLOSE(r.outputs[o], *want[o], 2e-5f, label + names[o]);
  }
}

static void test_lstm_matrix() {
  const Case cases[] = {{"forward", 1, false, true, 6},        {"reverse", 1, true, true, 20},
                        {"bidirectional", 2, false, true, 37}, {"forward", 1, false, false, 16},
                        {"forward", 1, false, true, 64},       {"bidirectional", 2, false, false, 48}};
  for (const auto& c : cases)
    for (int64_t N : {1, 3, 8}) check_case(c, N, 3);
  // A W^T over 256 KiB (176 x 384): the AVX-512 path's projection on OpenBLAS, the bias in C.
  check_case({"bidirectional", 2, false, true, 37}, 3, 3, 176);
  check_case({"forward", 1, false, false, 37}, 8, 3, 400);
  // One step, and an even count: the packed kernel's last h is in one of two ping-pong buffers
  // by the parity of S.
  for (int64_t S : {1, 2, 8}) {
    check_case({"bidirectional", 2, false, true, 20}, 3, 3, 5, S);
    check_case({"reverse", 1, true, true, 37}, 8, 3, 5, S);
  }
  for (size_t n_out : {size_t(1), size_t(2)}) {  // Y alone; Y and Y_h
    check_case({"forward", 1, false, true, 20}, 3, n_out);
    check_case({"bidirectional", 2, false, true, 33}, 8, n_out);
  }
}

// The raw kernels with layout 0 strides (X [S, N, I], Y [S, D, N, H], Y_h [D, N, H]): the
// portable lstm(), and lstm_packed where the CPU has AVX-512.
static void test_layout0_strides() {
  Rng rng;
  const int64_t N = 3, S = 5, I = 4, H = 21;
  const V x = rng.vec(size_t(N * S * I)), W = scaled(rng, size_t(2 * 4 * H * I), 0.5f);
  const V R = scaled(rng, size_t(2 * 4 * H * H), 0.4f), B = rng.vec(size_t(2 * 8 * H));
  const LstmRef ref = lstm_ref(x, W, R, B, N, S, I, H, 2, false);
  V xs(x.size());
  for (int64_t b = 0; b < N; ++b)
    for (int64_t t = 0; t < S; ++t) std::copy_n(&x[size_t((b * S + t) * I)], I, &xs[size_t((t * N + b) * I)]);
  V ry(ref.y.size()), rh(ref.yh.size()), rc(ref.yc.size());
  for (int64_t b = 0; b < N; ++b)
    for (int dd = 0; dd < 2; ++dd) {
      for (int64_t t = 0; t < S; ++t)
        std::copy_n(&ref.y[size_t(((b * S + t) * 2 + dd) * H)], H, &ry[size_t(((t * 2 + dd) * N + b) * H)]);
      std::copy_n(&ref.yh[size_t((b * 2 + dd) * H)], H, &rh[size_t((dd * N + b) * H)]);
      std::copy_n(&ref.yc[size_t((b * 2 + dd) * H)], H, &rc[size_t((dd * N + b) * H)]);
    }
  memlane::cpu::LstmDims d;
  d.S = S; d.B = N; d.I = I; d.H = H; d.D = 2;
  d.x_t = N; d.x_b = 1;
  d.y_t = 2 * N * H; d.y_d = N * H; d.y_b = H;
  d.s_d = N * H; d.s_b = H;
  {
    V ws(size_t(memlane::cpu::lstm_workspace_floats(d))), y(ry.size()), yh(rh.size()), yc(rc.size());
    memlane::cpu::lstm(d, xs.data(), W.data(), R.data(), B.data(), y.data(), yh.data(), yc.data(), ws.data());
    CHECK_CLOSE(y, ry, 2e-5f, "lstm layout 0 Y");
    CHECK_CLOSE(yh, rh, 2e-5f, "lstm layout 0 Y_h");
    CHECK_CLOSE(yc, rc, 2e-5f, "lstm layout 0 Y_c");
  }
  if (!memlane::cpu::simd::have_avx512()) {
    std::printf("lstm_test: no AVX-512 here (or MEMLANE_CPU_NO_AVX512): lstm_packed strides not run\n");
    return;
  }
  const memlane::cpu::LstmPacked p = memlane::cpu::lstm_pack(W.data(), R.data(), B.data(), 2, H, I);
  for (int threads : {1, 2}) {
    memlane::cpu::ThreadPool pool(threads);
    V ws(size_t(memlane::cpu::lstm_packed_workspace_floats(d, p))), y(ry.size()), yh(rh.size()), yc(rc.size());
    memlane::cpu::lstm_packed(d, p, xs.data(), y.data(), yh.data(), yc.data(), ws.data(), &pool);
    const std::string label = "lstm_packed layout 0, threads " + std::to_string(threads);
    CHECK_CLOSE(y, ry, 2e-5f, label + " Y");
    CHECK_CLOSE(yh, rh, 2e-5f, label + " Y_h");
    CHECK_CLOSE(yc, rc, 2e-5f, label + " Y_c");
  }
}

// The factory picks the packed path exactly where AVX-512 is on.
static void test_path_choice() {
  const int64_t S = 3, I = 4, H = 8;
  PlanBuilder pb;
  int xi = pb.input("x", {S, I});
  int wi = pb.weight("W", {1, 4 * H, I}, V(size_t(4 * H * I), 0.1f));
  int ri = pb.weight("R", {1, 4 * H, H}, V(size_t(4 * H * H), 0.1f));
  int yi = pb.output("y", {S, 1, H});
  pb.op("LSTM", {xi, wi, ri}, {yi}, {{"hiddenSize", H}, {"layout", int64_t(1)}});
  std::vector<uint8_t> bytes = pb.build();
  memlane::Plan plan;
  std::string msg;
  CHECK(memlane::parse_plan(bytes.data(), bytes.size(), &plan, &msg) == Status::kOk);
  memlane::cpu::BuildCtx bc{&plan, 1};
  Status st = Status::kOk;
  auto k = memlane::cpu::make_lstm(bc, plan.ops[0], &st, &msg);
  CHECK_MSG(k != nullptr, msg);
  if (!k) return;
  const std::string want = memlane::cpu::simd::have_avx512() ? "avx512" : "portable";
  CHECK_MSG(k->path() == want, std::string("lstm path ") + k->path() + ", expected " + want);
  CHECK(k->repacked_weights().size() == (want == "avx512" ? 2u : 0u));
}

static void test_layout0_refused() {
  const int64_t S = 5, I = 4, H = 6;
  PlanBuilder pb;  // a layout 0 plan cannot say where its batch is in v1
  int xi = pb.input("x", {S, I});
  int wi = pb.weight("W", {1, 4 * H, I}, V());
  int ri = pb.weight("R", {1, 4 * H, H}, V());
  int yi = pb.output("y", {S, 1, H});
  pb.op("LSTM", {xi, wi, ri}, {yi}, {{"hiddenSize", H}, {"layout", int64_t(0)}});
  RunResult r = run_plan(pb, 1, {V(size_t(S * I))});
  CHECK(r.status == Status::kUnsupportedOp);
  CHECK_CONTAINS(r.message, "layout 0");
}

int main() {
  test_lstm_matrix();
  test_layout0_strides();
  test_path_choice();
  test_layout0_refused();
  return finish("lstm_test");
}
