// Gemm (A activation [..., K], B weight, optional C broadcast to [..., N]) and MatMul
// (A [..., K] activation, B [K,M] weight): A's rows are all its leading dims, so the batch
// may sit on any of them. One sgemm over the whole batch (split by sgemm_pool), or, for a MatMul on an
// AVX-512 CPU, the register-tiled simd::sgemm_nn over blocks of rows split between the
// pool's threads, with a fused epilogue (bias, Gelu; gemm_epilogue.cc).
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "cpu/kernel.h"
#include "cpu/sgemm_pool.h"
#include "cpu/simd/avx512.h"
#include "cpu/simd/gemm_t_rows.h"
#include "cpu/vmath.h"

namespace memlane::cpu {
namespace {

class GemmKernel final : public Kernel {
 public:
  TensorRef a, y, cact;
  const float* b = nullptr;
  const float* cw = nullptr;  // C as a weight: per column (cw_cols == N) or scalar (1)
  int64_t cw_cols = 0;
  bool c_is_act = false;
  int64_t rows_per_sample = 1, K = 0, N = 0;
  bool transB = false, relu = false;
  float alpha = 1.f, beta = 0.f;
  // MatMul only: the fused epilogue (bias on every row, then Gelu) and the kernel choice.
  const float* ebias = nullptr;
  bool egelu = false, egelu_tanh = false, simd_path = false;
  bool gemv_path = false;  // Gemm with transB on AVX-512: one row of A takes simd::gemv_t, a few simd::gemm_t_rows

  // Rows a block: A's block (64 x K floats) stays in L1 while every column panel reads it.
  static constexpr int64_t kRowBlock = 64;
  // Multiply-adds a thread must get before a product is split (~9 us on one core): waking a
  // sleeping pool worker costs several microseconds, about what halving the 64-wide
  // projections of the zoo's BERT and ViT at batch 1 would save; their 128-wide feed-forward
  // layers do split.
  static constexpr int64_t kMinMacsPerThread = int64_t(1) << 19;

  void run_simd(const RunCtx& c, int64_t M) const {
    const float* A = a.at(c);
    float* Y = y.at(c);
    // Threads split the rows evenly in units of 8 (one register tile), at least a block each.
    const int64_t units = (M + 7) / 8;
    const int64_t grain = std::max<int64_t>(kRowBlock / 8, kMinMacsPerThread / std::max<int64_t>(1, 8 * N * K));
    c.pool->parallel_for(units, grain, [&](int64_t u0, int64_t u1) {
      const int64_t end = std::min(M, u1 * 8);
      for (int64_t r0 = u0 * 8; r0 < end; r0 += kRowBlock) {
        const int64_t rows = std::min(kRowBlock, end - r0);
        float* yb = Y + r0 * N;
        simd::sgemm_nn(rows, N, K, A + r0 * K, K, b, N, yb, N, ebias);
        if (egelu) egelu_tanh ? simd::gelu_tanh(yb, yb, rows * N) : simd::gelu(yb, yb, rows * N);
      }
    });
  }

  // One row of A against B^T (a classifier at batch 1): simd::gemv_t, threads splitting the
  // columns in blocks of 64 (each reads its rows of B once).
  void run_gemv(const RunCtx& c) const {
    const float* A = a.at(c);
    float* Y = y.at(c);
    const float* C = c_is_act ? cact.at(c) : nullptr;
    const int64_t blocks = (N + 63) / 64;
    // (memory-bound: each thread streams its own rows of B, so split at a quarter of the usual work)
    const int64_t grain = std::max<int64_t>(1, kMinMacsPerThread / 4 / std::max<int64_t>(1, 64 * K));
    c.pool->parallel_for(blocks, grain, [&](int64_t b0, int64_t b1) {
      const int64_t j0 = b0 * 64, j1 = std::min(N, b1 * 64);
      const float* cj = C ? C + j0 : (cw && cw_cols == N ? cw + j0 : nullptr);
      simd::gemv_t(j1 - j0, K, A, b + j0 * K, Y + j0, alpha, beta, cj);
      if (cw && cw_cols != N)
        for (int64_t j = j0; j < j1; ++j) Y[j] += beta * cw[0];
      if (relu) relu_inplace(Y + j0, j1 - j0);
    });
  }

  // A few rows of A against B^T (a classifier over a whole batch: cpu_backend's batch tail):
  // simd::gemm_t_rows reads each row of B once for all of them, threads splitting the columns
  // in blocks of 64 as run_gemv.
  void run_rows(const RunCtx& c, int64_t M) const {
    const float* A = a.at(c);
    float* Y = y.at(c);
    const float* C = c_is_act ? cact.at(c) : nullptr;
    const int64_t blocks = (N + 63) / 64;
    const int64_t grain = std::max<int64_t>(1, kMinMacsPerThread / 4 / std::max<int64_t>(1, 64 * K * M));
    c.pool->parallel_for(blocks, grain, [&](int64_t b0, int64_t b1) {
      const int64_t j0 = b0 * 64, j1 = std::min(N, b1 * 64);
      simd::gemm_t_rows(M, j0, j1, K, A, b, Y, N, alpha, beta, cw && cw_cols == N ? cw : nullptr);
      for (int64_t r = 0; r < M; ++r) {
        float* yr = Y + r * N;
        if (C)
          for (int64_t j = j0; j < j1; ++j) yr[j] += beta * C[r * N + j];
        if (cw && cw_cols != N)
          for (int64_t j = j0; j < j1; ++j) yr[j] += beta * cw[0];
        if (relu) relu_inplace(yr + j0, j1 - j0);
      }
    });
  }

  void run(const RunCtx& c) const override {
    const int64_t M = rows_per_sample * c.batch;
    if (gemv_path && M == 1) return run_gemv(c);
    if (gemv_path && M <= simd::kGemmTRowsMax) return run_rows(c, M);
    if (simd_path) {
      run_simd(c, M);
      return;
    }
    float* Y = y.at(c);
    float gemm_beta = 0.f;
    if (cw || c_is_act) {
      gemm_beta = 1.f;
      if (c_is_act) {
        const float* C = cact.at(c);
        for (int64_t i = 0; i < M * N; ++i) Y[i] = beta * C[i];
      } else if (cw_cols == N) {
        for (int64_t r = 0; r < M; ++r)
          for (int64_t j = 0; j < N; ++j) Y[r * N + j] = beta * cw[j];
      } else {
        const float v = beta * cw[0];
        for (int64_t i = 0; i < M * N; ++i) Y[i] = v;
      }
    }
    sgemm_pool(c.pool, transB, M, N, K, alpha, a.at(c), K, b, transB ? K : N, gemm_beta, Y, N);
    if (relu) relu_inplace(Y, M * N);
    if (ebias)
      for (int64_t r = 0; r < M; ++r)
        for (int64_t j = 0; j < N; ++j) Y[r * N + j] += ebias[j];
    if (egelu) egelu_tanh ? vmath::gelu_tanh(Y, Y, M * N) : vmath::gelu(Y, Y, M * N);
  }
};

}  // namespace

std::unique_ptr<Kernel> make_gemm(const BuildCtx& bc, const Op& op, Status* st, std::string* msg) {
  if (!need_inputs(op, 2, 3, st, msg)) return nullptr;
  const TensorInfo& A = bc.info(op.inputs[0]);
  const TensorInfo& B = bc.info(op.inputs[1]);
  const TensorInfo& Y = bc.info(op.outputs[0]);
  const OpAttrs& at = op.attrs;
  if (A.is_weight() || !B.is_weight() || at.transA)
    return unsupported(op, "supports A an activation (transA = 0) and B a weight", st, msg);
  // A [..., K] as rows, the batch on any axis but the last (seq-first [S·batch, K], rank-3 [batch, S, K]).
  if (A.shape.size() < 2 || B.shape.size() != 2 || Y.shape.size() != A.shape.size() ||
      A.batch_axis() == int(A.shape.size()) - 1)
    return unsupported(op, "expects A [..., K] (the batch not on K), B rank 2, Y of A's rank; A " + shape_str(A.shape) +
                               ", B " + shape_str(B.shape), st, msg);
  auto k = std::make_unique<GemmKernel>();
  k->K = A.shape.back();
  k->N = at.transB ? B.shape[0] : B.shape[1];
  k->rows_per_sample = A.elements() / k->K;
  const int64_t bk = at.transB ? B.shape[1] : B.shape[0];
  if (bk != k->K || Y.shape.back() != k->N || Y.elements() != k->rows_per_sample * k->N)
    return unsupported(op, "shapes do not line up: A " + shape_str(A.shape) + ", B " + shape_str(B.shape) +
                               (at.transB ? " (transposed)" : "") + ", Y " + shape_str(Y.shape), st, msg);
  k->a = bc.ref(op.inputs[0]);
  k->y = bc.ref(op.outputs[0]);
  k->b = B.data;
  k->transB = at.transB;
  k->alpha = at.alpha;
  k->beta = at.beta;
  k->relu = at.activation == Activation::kRelu;
  // MEMLANE_GEMM_NO_GEMV=1 keeps one-row products on OpenBLAS (A/B timing; ctest runs both).
  k->gemv_path = at.transB && simd::have_avx512() && std::getenv("MEMLANE_GEMM_NO_GEMV") == nullptr;
  if (op.inputs.size() > 2 && op.inputs[2] != kAbsentInput && at.beta != 0.f) {
    const TensorInfo& C = bc.info(op.inputs[2]);
    if (C.is_weight()) {
      const int64_t n = C.elements();
      const bool row = n == k->N && (C.shape.size() <= 1 || (C.shape.size() == 2 && C.shape[0] == 1));
      if (!row && n != 1)
        return unsupported(op, "C weight " + shape_str(C.shape) + " must broadcast as [N] or a scalar", st, msg);
      k->cw = C.data;
      k->cw_cols = row ? k->N : 1;
    } else {
      if (C.shape.size() != 2 || C.shape[1] != k->N || C.shape != Y.shape)
        return unsupported(op, "C activation must be [-1," + std::to_string(k->N) + "], got " + shape_str(C.shape), st, msg);
      k->c_is_act = true;
      k->cact = bc.ref(op.inputs[2]);
    }
  }
  return k;
}

std::unique_ptr<Kernel> make_matmul(const BuildCtx& bc, const Op& op, Status* st, std::string* msg) {
  if (!need_inputs(op, 2, 2, st, msg)) return nullptr;
  const TensorInfo& A = bc.info(op.inputs[0]);
  const TensorInfo& B = bc.info(op.inputs[1]);
  const TensorInfo& Y = bc.info(op.outputs[0]);
  // Two activations (attention's Q x K^T), a weight A, or an N-D weight B: one GEMM a slice.
  if (A.is_weight() || !B.is_weight() || B.shape.size() != 2) return make_matmul_batched(bc, op, st, msg);
  if (A.shape.size() < 2 || A.batch_axis() == int(A.shape.size()) - 1)
    return unsupported(op, "supports A [n,…,K] an activation (the batch not on K) and B [K,M] a weight; A " + shape_str(A.shape) +
                               ", B " + shape_str(B.shape), st, msg);
  auto k = std::make_unique<GemmKernel>();
  k->K = A.shape.back();
  k->N = B.shape[1];
  if (B.shape[0] != k->K || Y.shape.size() != A.shape.size() || Y.shape.back() != k->N)
    return unsupported(op, "shapes do not line up: A " + shape_str(A.shape) + ", B " + shape_str(B.shape) +
                               ", Y " + shape_str(Y.shape), st, msg);
  k->rows_per_sample = A.elements() / k->K;  // rows per sample, the batch on any axis but K
  if (Y.elements() != k->rows_per_sample * k->N)
    return unsupported(op, "output " + shape_str(Y.shape) + " does not hold A " + shape_str(A.shape) + " x B " +
                               shape_str(B.shape), st, msg);
  k->a = bc.ref(op.inputs[0]);
  k->y = bc.ref(op.outputs[0]);
  k->b = B.data;
  if (const GemmEpilogue* e = bc.gemm_epilogue) {
    k->y = bc.ref(e->output);
    k->ebias = e->bias;
    k->egelu = e->gelu;
    k->egelu_tanh = e->gelu_tanh;
    e->taken = true;
  }
  // MEMLANE_GEMM_BLAS=1 keeps OpenBLAS for these too (a tuning aid for A/B timing).
  k->simd_path = simd::have_avx512() && !std::getenv("MEMLANE_GEMM_BLAS");
  return k;
}

}  // namespace memlane::cpu
