// Gemm (A activation [..., K], B weight, optional C broadcast to [..., N]) and MatMul
// (A [..., K] activation, B [K,M] weight): A's rows are all its leading dims, so the batch
// may sit on any of them. On an AVX-512 CPU, B packed at build into 32-column panels and
// every row count on simd::gemm_panels (the rows, or for a few rows the panels, split between
// the pool's threads), with a fused epilogue (bias, Relu, Gelu; gemm_epilogue.cc); elsewhere
// one sgemm over the whole batch (split by sgemm_pool).
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "cpu/kernel.h"
#include "cpu/sgemm_pool.h"
#include "cpu/simd/avx2_gemm.h"
#include "cpu/simd/avx512.h"
#include "cpu/simd/gemm_panels.h"
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
  // MatMul only: the fused epilogue (bias on every row, then Gelu).
  const float* ebias = nullptr;
  bool egelu = false, egelu_tanh = false;
  // AVX-512: B packed at build into 32-column panels (simd::gemm_panels) for every row count;
  // the plan's pages of B are then given back (weight_release.h).
  std::shared_ptr<const simd::PackedPanels> panels;  // shared with the other profiles' kernels
  std::vector<float> cbias;  // Gemm: beta * C where C is a weight per column (the panels' bias)
  bool panel_path = false;

  std::vector<const float*> repacked_weights() const override {
    return panel_path ? std::vector<const float*>{b} : std::vector<const float*>{};
  }
  const char* path() const override { return panel_path ? "panels" : "blas"; }

  // Multiply-adds a thread must get before a product is split (~9 us on one core): waking a
  // sleeping pool worker costs several microseconds, about what halving the 64-wide
  // projections of the zoo's BERT and ViT at batch 1 would save; their 128-wide feed-forward
  // layers do split.
  static constexpr int64_t kMinMacsPerThread = int64_t(1) << 19;
  // A unit of few rows (a classifier at batch 1) is paced by B's bytes coming from memory, not
  // by its multiply-adds: one core here multiplies ~65 G MAC/s (an FMA loop) and read that
  // classifier's B at ~12 GB/s (2 MiB in ~170 us), about 5 MACs a byte; a byte of B counts as
  // 4 when deciding whether a split pays (the split costs one hand-off, so erring toward it).
  // resnet18's 512 -> 1000 classifier (2 MiB of B, 0.5 M MACs) ran on one thread under the MAC rule.
  static constexpr int64_t kMacsPerWeightByte = 4;

  // Every row count on the packed panels: units of 64 rows x a group of panels, the rows split
  // between threads first, the panels where there are too few rows (a classifier, a batch
  // tail). Bias and Relu in the tiles' registers; what C adds besides a bias per column, and
  // Gelu, over the unit's block after.
  void run_panels(const RunCtx& c, int64_t M) const {
    const float* A = a.at(c);
    float* Y = y.at(c);
    const float* C = c_is_act ? cact.at(c) : nullptr;
    const bool after = C || (cw && cw_cols != N);  // C beyond a bias: added (then Relu) after the product
    const simd::PanelEpilogue e{alpha, cbias.empty() ? ebias : cbias.data(), relu && !after};
    const int64_t P = panels->panels(), T = c.pool->threads(), row_blocks = (M + 63) / 64;
    const int64_t groups = row_blocks >= T ? 1 : std::min(P, (2 * T + row_blocks - 1) / row_blocks);
    const int64_t pg = (P + groups - 1) / groups, per_block = (P + pg - 1) / pg;
    const int64_t unit_macs = std::min<int64_t>(64, M) * K * pg * simd::kPanelCols;
    const int64_t unit_bytes = K * pg * simd::kPanelCols * int64_t(sizeof(float));
    const int64_t unit_work = std::max(unit_macs, kMacsPerWeightByte * unit_bytes);
    const int64_t grain = std::max<int64_t>(1, kMinMacsPerThread / std::max<int64_t>(1, unit_work));
    c.pool->parallel_for(row_blocks * per_block, grain, [&](int64_t u0, int64_t u1) {
      for (int64_t u = u0; u < u1; ++u) {
        const int64_t r0 = u / per_block * 64, r1 = std::min(M, r0 + 64);
        const int64_t p0 = u % per_block * pg, p1 = std::min(P, p0 + pg);
        const int64_t j0 = p0 * simd::kPanelCols, j1 = std::min(N, p1 * simd::kPanelCols);
        simd::gemm_panels(r1 - r0, p0, p1, A + r0 * K, K, *panels, Y + r0 * N, N, e);
        for (int64_t r = r0; r < r1 && (after || egelu); ++r) {
          float* yr = Y + r * N;
          if (C)
            for (int64_t j = j0; j < j1; ++j) yr[j] += beta * C[r * N + j];
          if (cw && cw_cols != N)
            for (int64_t j = j0; j < j1; ++j) yr[j] += beta * cw[0];
          if (after && relu) relu_inplace(yr + j0, j1 - j0);
          if (egelu) egelu_tanh ? simd::gelu_tanh(yr + j0, yr + j0, j1 - j0) : simd::gelu(yr + j0, yr + j0, j1 - j0);
        }
      }
    });
  }

  // A few rows against a transposed B (a Linear's weight at batch 2-8) without AVX-512: dot
  // products that read B once (simd::sgemm_nt_few_rows_avx2) where OpenBLAS packed all of it a
  // call. Single thread, Zen 3, a 9216 -> 4096 layer (alexnet's): batch 2 7.3 ms against 24,
  // batch 8 26 against 47; at 16 rows OpenBLAS is ahead (33 against 55).
  // One row stays on sgemm_pool's sgemv: against it the dot products were 0.9x on that
  // 9216 -> 4096 layer but 1.5x on resnet18's 512 -> 1000 (64 against 42 us). Here, not in
  // sgemm_pool: its other few-row transB callers (the LSTM recurrence) were not measured.
  // MEMLANE_GEMM_NO_FEW_ROWS=1: OpenBLAS for those too (A/B).
  static constexpr int64_t kFewRowsMax = 8;
  bool few_rows(int64_t M) const {
    static const bool on = simd::have_avx2_gemm() && std::getenv("MEMLANE_GEMM_NO_FEW_ROWS") == nullptr;
    return on && transB && M >= 2 && M <= kFewRowsMax;
  }

  void run(const RunCtx& c) const override {
    const int64_t M = rows_per_sample * c.batch;
    if (panel_path) return run_panels(c, M);
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
    if (few_rows(M)) {
      // Column blocks of B^T's rows split between threads (each unit 64 output columns of every row)
      const float* A = a.at(c);
      const int64_t units = (N + 63) / 64;
      const int64_t grain = std::max<int64_t>(1, kMinMacsPerThread / std::max<int64_t>(1, kMacsPerWeightByte * 64 * K * 4));
      c.pool->parallel_for(units, grain, [&](int64_t u0, int64_t u1) {
        const int64_t n0 = u0 * 64, n1 = std::min(N, u1 * 64);
        simd::sgemm_nt_few_rows_avx2(M, n1 - n0, K, A, K, b + n0 * K, K, Y + n0, N, alpha, gemm_beta != 0.f);
      });
    } else {
      sgemm_pool(c.pool, transB, M, N, K, alpha, a.at(c), K, b, transB ? K : N, gemm_beta, Y, N);
    }
    if (relu) relu_inplace(Y, M * N);
    if (ebias)
      for (int64_t r = 0; r < M; ++r)
        for (int64_t j = 0; j < N; ++j) Y[r * N + j] += ebias[j];
    if (egelu) egelu_tanh ? vmath::gelu_tanh(Y, Y, M * N) : vmath::gelu(Y, Y, M * N);
  }
};

// The panel path where the CPU has AVX-512 (MEMLANE_GEMM_BLAS=1: OpenBLAS, an A/B aid), B
// packed once for every profile of the plan (the build's cache; a kernel built without one
// packs its own).
void pack_panels(const BuildCtx& bc, GemmKernel& k, const float* B, bool transB) {
  k.panel_path = simd::have_avx512() && !std::getenv("MEMLANE_GEMM_BLAS");
  if (!k.panel_path) return;
  k.panels = simd::shared_panels(bc.panels, B, k.K, k.N, transB);
}

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
  pack_panels(bc, *k, B.data, at.transB);
  if (k->panel_path && k->cw && k->cw_cols == k->N) {
    k->cbias.resize(size_t(k->N));
    for (int64_t j = 0; j < k->N; ++j) k->cbias[size_t(j)] = k->beta * k->cw[j];
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
  pack_panels(bc, *k, B.data, false);
  return k;
}

}  // namespace memlane::cpu
