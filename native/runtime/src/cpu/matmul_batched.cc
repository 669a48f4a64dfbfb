// MatMul where B is not a 2-D weight: Q x K^T and attn x V in attention (both activations),
// or a weight with leading dims. One GEMM per slice of the broadcast leading dims: OpenBLAS
// for slices large enough to amortise its call overhead, a plain row-times-matrix loop
// (vectorised over N) for the small per-head slices of short sequences.
#include "cpu/matmul_batched.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "cpu/kernel.h"
#include "cpu/simd/avx512.h"
#include "cpu/sgemm_pool.h"
#include "cpu/thread_pool.h"

namespace memlane::cpu {
namespace {

// Below this many multiply-adds a slice, a direct loop beats sgemm's setup.
constexpr int64_t kSmallGemm = 32 * 32 * 32;

void small_gemm(const float* A, const float* B, float* Y, int64_t M, int64_t K, int64_t N) {
  if (simd::have_avx512()) {
    simd::sgemm_nn(M, N, K, A, K, B, N, Y, N);
    return;
  }
  for (int64_t i = 0; i < M; ++i) {
    float* y = Y + i * N;
    std::fill(y, y + N, 0.f);
    const float* a = A + i * K;
    for (int64_t k = 0; k < K; ++k) {
      const float av = a[k];
      const float* b = B + k * N;
      for (int64_t j = 0; j < N; ++j) y[j] += av * b[j];
    }
  }
}

void slice_offsets(const BatchedMatMulDims& d, int64_t s, int64_t* oa, int64_t* ob) {
  int64_t rem = s;
  *oa = *ob = 0;
  for (int i = d.lead - 1; i >= 0; --i) {
    const int64_t q = rem % d.dims[i];
    rem /= d.dims[i];
    *oa += q * d.a_stride[i];
    *ob += q * d.b_stride[i];
  }
}

}  // namespace

void matmul_batched(const float* A, const float* B, float* Y, const BatchedMatMulDims& d, ThreadPool* pool) {
  int64_t slices = 1;
  for (int i = 0; i < d.lead; ++i) slices *= d.dims[i];
  const int64_t MN = d.M * d.N;
  if (d.M * d.K * d.N > kSmallGemm) {
    // Slices side by side on the pool's threads when there are enough of them, else each
    // product split by sgemm_pool.
    const int64_t T = pool ? pool->threads() : 1;
    auto big = [&](int64_t s0, int64_t s1, ThreadPool* inner) {
      for (int64_t s = s0; s < s1; ++s) {
        int64_t oa, ob;
        slice_offsets(d, s, &oa, &ob);
        sgemm_pool(inner, false, d.M, d.N, d.K, 1.f, A + oa, d.K, B + ob, d.N, 0.f, Y + s * MN, d.N);
      }
    };
    if (T > 1 && slices >= T) pool->parallel_for(slices, 1, [&](int64_t s0, int64_t s1) { big(s0, s1, nullptr); });
    else big(0, slices, pool);
    return;
  }
  auto body = [&](int64_t s0, int64_t s1) {
    for (int64_t s = s0; s < s1; ++s) {
      int64_t oa, ob;
      slice_offsets(d, s, &oa, &ob);
      small_gemm(A + oa, B + ob, Y + s * MN, d.M, d.K, d.N);
    }
  };
  if (pool) pool->parallel_for(slices, std::max<int64_t>(1, kSmallGemm / std::max<int64_t>(1, d.M * d.K * d.N)), body);
  else body(0, slices);
}

namespace {

class BatchedMatMulKernel final : public Kernel {
 public:
  TensorRef a, b, y;
  BatchedMatMulDims d;  // d.dims[bax] is bk x the batch, set per run
  int bax = 0;          // the leading dim that holds the batch (-bk in the plan)
  int64_t bk = 1;
  bool a_act = false, b_act = false;  // an activation's strides before bax scale with the batch
  void run(const RunCtx& c) const override {
    BatchedMatMulDims dd = d;
    dd.dims[bax] = bk * c.batch;
    for (int i = 0; i < bax; ++i) {
      if (a_act) dd.a_stride[i] *= c.batch;
      if (b_act) dd.b_stride[i] *= c.batch;
    }
    matmul_batched(a.at(c), b.at(c), y.at(c), dd, c.pool);
  }
};

// Element strides of operand `t`'s matrices over the output's `lead` leading dims
// (right-aligned; 0 where t broadcasts), per sample. Dim `bax` is the batch (-k): an
// activation runs along it, a weight must be 1 there.
bool lead_strides(const TensorInfo& t, const std::vector<int64_t>& yshape, int lead, int bax, int64_t* s,
                  std::string* why) {
  const int tr = int(t.shape.size()), tl = tr - 2;
  if (tl > lead || (!t.is_weight() && tl != lead)) {
    *why = "operand " + shape_str(t.shape) + " does not line up with output " + shape_str(yshape);
    return false;
  }
  int64_t stride = t.shape[tr - 2] * t.shape[tr - 1];
  for (int i = lead - 1; i >= 0; --i) {
    const int ti = i - (lead - tl);
    if (ti < 0) { s[i] = 0; continue; }
    const int64_t td = t.shape[ti];
    if (i == bax) {  // the batch: activations run along it, a weight must be 1 there
      if (t.is_weight() && td != 1) { *why = "weight " + shape_str(t.shape) + " spans the batch"; return false; }
      if (!t.is_weight() && td != yshape[i]) {
        *why = "operand " + shape_str(t.shape) + " has its batch elsewhere than output " + shape_str(yshape);
        return false;
      }
      s[i] = t.is_weight() ? 0 : stride;
      if (!t.is_weight()) stride *= -td;
      continue;
    }
    if (td != yshape[i] && td != 1) {
      *why = "operand " + shape_str(t.shape) + " does not broadcast to " + shape_str(yshape);
      return false;
    }
    s[i] = td == 1 ? 0 : stride;
    stride *= td;
  }
  return true;
}

}  // namespace

std::unique_ptr<Kernel> make_matmul_batched(const BuildCtx& bc, const Op& op, Status* st, std::string* msg) {
  const TensorInfo& A = bc.info(op.inputs[0]);
  const TensorInfo& B = bc.info(op.inputs[1]);
  const TensorInfo& Y = bc.info(op.outputs[0]);
  const int r = int(Y.shape.size());
  if (A.shape.size() < 2 || B.shape.size() < 2 || r < 3 || r - 2 > kMatMulMaxLead || Y.is_weight() ||
      (A.is_weight() && B.is_weight()))
    return unsupported(op, "batched MatMul needs operands of rank >= 2, at least one an activation; A " +
                               shape_str(A.shape) + ", B " + shape_str(B.shape) + ", Y " + shape_str(Y.shape), st, msg);
  auto k = std::make_unique<BatchedMatMulKernel>();
  BatchedMatMulDims& d = k->d;
  d.lead = r - 2;
  d.M = A.shape[A.shape.size() - 2];
  d.K = A.shape.back();
  d.N = B.shape.back();
  if (B.shape[B.shape.size() - 2] != d.K || Y.shape[r - 2] != d.M || Y.shape[r - 1] != d.N)
    return unsupported(op, "shapes do not line up: A " + shape_str(A.shape) + " x B " + shape_str(B.shape) + " -> Y " +
                               shape_str(Y.shape), st, msg);
  k->bax = Y.batch_axis();
  if (k->bax < 0 || k->bax >= d.lead)
    return unsupported(op, "the batch of Y " + shape_str(Y.shape) + " must be on a leading dim", st, msg);
  k->bk = -Y.shape[size_t(k->bax)];
  for (int i = 0; i < d.lead; ++i) d.dims[i] = Y.shape[i];
  std::string why;
  if (!lead_strides(A, Y.shape, d.lead, k->bax, d.a_stride, &why) ||
      !lead_strides(B, Y.shape, d.lead, k->bax, d.b_stride, &why))
    return unsupported(op, why, st, msg);
  k->a_act = !A.is_weight();
  k->b_act = !B.is_weight();
  k->a = bc.ref(op.inputs[0]);
  k->b = bc.ref(op.inputs[1]);
  k->y = bc.ref(op.outputs[0]);
  return k;
}

}  // namespace memlane::cpu
