// The fused Attention op (src/compiler/fuse-attention.ts): per slice of the leading dims, per
// block of query rows, scores = Q_block x Kt (GEMM), then scale + mask + a max-subtracted
// softmax per row, then Y_block = P x V (GEMM). Slices run in parallel, each thread with its
// own block of scratch from the shared workspace.
#include "cpu/attention.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>

#include "cpu/kernel.h"
#include "cpu/simd/avx2_gemm.h"
#include "cpu/simd/avx512.h"
#include "cpu/vmath.h"

namespace memlane::cpu {
namespace {

constexpr int kMaxLead = 8;

void gemm(const float* A, const float* B, float* C, int64_t M, int64_t K, int64_t N) {
  if (M * K * N > 32 * 32 * 32) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(M), int(N), int(K), 1.f, A, int(K), B, int(N), 0.f, C,
                int(N));
    return;
  }
  for (int64_t i = 0; i < M; ++i) {
    float* c = C + i * N;
    std::fill(c, c + N, 0.f);
    for (int64_t k = 0; k < K; ++k) {
      const float a = A[i * K + k];
      const float* b = B + k * N;
      for (int64_t j = 0; j < N; ++j) c[j] += a * b[j];
    }
  }
}

// The AVX-512 path: the same blocks, with register-tiled products that need no packing
// (Kt and V of one head fit in L2, a block of scores in L1), and the softmax's division
// applied to the block's dv outputs instead of its T probabilities.
void attention_slice_avx512(const AttentionSlice& a, float* scratch) {
  float inv[kAttentionRows];
  for (int64_t r0 = 0; r0 < a.S; r0 += kAttentionRows) {
    const int64_t rows = std::min(kAttentionRows, a.S - r0);
    simd::sgemm_nn(rows, a.T, a.d, a.q + r0 * a.d, a.d, a.kt, a.T, scratch, a.T);
    for (int64_t i = 0; i < rows; ++i) {
      const float* m = a.mask ? a.mask + (r0 + i) * a.mask_row : nullptr;
      inv[i] = 1.f / simd::softmax_row_unnormalised(scratch + i * a.T, a.T, a.scale, m, a.mask_col);
    }
    float* y = a.y + r0 * a.dv;
    simd::sgemm_nn(rows, a.dv, a.T, scratch, a.T, a.v, a.dv, y, a.dv);
    for (int64_t i = 0; i < rows; ++i) simd::scale_row(y + i * a.dv, a.dv, inv[i]);
  }
}

#ifdef MEMLANE_VMATH_AVX2
// One score row on AVX2: s = s * scale (+ mask), then exp(s - max) in place; returns the
// sum (the softmax's division goes to the row's dv outputs). Vector max and sum: the
// portable loops below reduce serially, a float at a time.
float softmax_row_unnormalised_avx2(float* s, int64_t n, float scale, const float* mask, int64_t mask_col) {
  const __m256 k = _mm256_set1_ps(scale);
  __m256 mx = _mm256_set1_ps(-INFINITY);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    __m256 v = _mm256_mul_ps(_mm256_loadu_ps(s + j), k);
    if (mask) {
      const __m256 m = mask_col == 1 ? _mm256_loadu_ps(mask + j)
                                     : _mm256_setr_ps(mask[j * mask_col], mask[(j + 1) * mask_col], mask[(j + 2) * mask_col],
                                                      mask[(j + 3) * mask_col], mask[(j + 4) * mask_col], mask[(j + 5) * mask_col],
                                                      mask[(j + 6) * mask_col], mask[(j + 7) * mask_col]);
      v = _mm256_add_ps(v, m);
    }
    _mm256_storeu_ps(s + j, v);
    mx = _mm256_max_ps(mx, v);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, mx);
  float m = lanes[0];
  for (int i = 1; i < 8; ++i) m = std::max(m, lanes[i]);
  for (; j < n; ++j) {
    s[j] = s[j] * scale + (mask ? mask[j * mask_col] : 0.f);
    m = std::max(m, s[j]);
  }
  const __m256 mv = _mm256_set1_ps(m);
  __m256 sum = _mm256_setzero_ps();
  j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 e = vmath::exp8(_mm256_sub_ps(_mm256_loadu_ps(s + j), mv));
    _mm256_storeu_ps(s + j, e);
    sum = _mm256_add_ps(sum, e);
  }
  _mm256_store_ps(lanes, sum);
  float total = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
  for (; j < n; ++j) total += (s[j] = vmath::exp1(s[j] - m));
  return total;
}

// The AVX-512 path's blocks on the AVX2 product (simd/avx2_gemm.h): cblas re-packed Kt and V
// for every block of 32 query rows, and the portable softmax reduced serially. Whisper's
// encoder (1500 positions, 2 heads of 32) took 18.7 ms an attention layer against ONNX
// Runtime's 12.1 for its two MatMuls and Softmax (1 thread, per-op minima).
void attention_slice_avx2(const AttentionSlice& a, float* scratch) {
  float inv[kAttentionRows];
  for (int64_t r0 = 0; r0 < a.S; r0 += kAttentionRows) {
    const int64_t rows = std::min(kAttentionRows, a.S - r0);
    simd::sgemm_nn_avx2(rows, a.T, a.d, a.q + r0 * a.d, a.d, a.kt, a.T, scratch, a.T, nullptr);
    for (int64_t i = 0; i < rows; ++i) {
      const float* m = a.mask ? a.mask + (r0 + i) * a.mask_row : nullptr;
      inv[i] = 1.f / softmax_row_unnormalised_avx2(scratch + i * a.T, a.T, a.scale, m, a.mask_col);
    }
    float* y = a.y + r0 * a.dv;
    simd::sgemm_nn_avx2(rows, a.dv, a.T, scratch, a.T, a.v, a.dv, y, a.dv, nullptr);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < a.dv; ++j) y[i * a.dv + j] *= inv[i];
  }
}
#endif

}  // namespace

void attention_slice(const AttentionSlice& a, float* scratch) {
  if (simd::have_avx512()) {
    attention_slice_avx512(a, scratch);
    return;
  }
#ifdef MEMLANE_VMATH_AVX2
  static const bool avx2 = simd::have_avx2_gemm() && std::getenv("MEMLANE_ATTENTION_PORTABLE") == nullptr;  // A/B
  if (avx2) {
    attention_slice_avx2(a, scratch);
    return;
  }
#endif
  for (int64_t r0 = 0; r0 < a.S; r0 += kAttentionRows) {
    const int64_t rows = std::min(kAttentionRows, a.S - r0);
    gemm(a.q + r0 * a.d, a.kt, scratch, rows, a.d, a.T);
    for (int64_t i = 0; i < rows; ++i) {
      float* s = scratch + i * a.T;
      if (a.mask) {
        const float* m = a.mask + (r0 + i) * a.mask_row;
        for (int64_t j = 0; j < a.T; ++j) s[j] = s[j] * a.scale + m[j * a.mask_col];
      } else {
        for (int64_t j = 0; j < a.T; ++j) s[j] *= a.scale;
      }
      float mx = s[0];
      for (int64_t j = 1; j < a.T; ++j) mx = std::max(mx, s[j]);
      for (int64_t j = 0; j < a.T; ++j) s[j] -= mx;
      vmath::exp(s, s, a.T);
      float sum = 0.f;
      for (int64_t j = 0; j < a.T; ++j) sum += s[j];
      const float inv = 1.f / sum;
      for (int64_t j = 0; j < a.T; ++j) s[j] *= inv;
    }
    gemm(scratch, a.v, a.y + r0 * a.dv, rows, a.T, a.dv);
  }
}

namespace {

class AttentionKernel final : public Kernel {
 public:
  TensorRef q, kt, v, mask, y;
  bool has_mask = false;
  int lead = 0;                         // leading dims, dims[0] the batch (set per run)
  int64_t dims[kMaxLead] = {};
  int64_t mask_stride[kMaxLead] = {};   // mask's element stride per leading dim (0 = broadcast)
  AttentionSlice shape;                 // S, T, d, dv, scale, mask_row/col
  int threads = 1;

  uint64_t workspace_floats(int64_t) const override { return uint64_t(threads) * kAttentionRows * shape.T; }

  void run(const RunCtx& c) const override {
    int64_t slices = c.batch;
    for (int i = 1; i < lead; ++i) slices *= dims[i];
    const float *Q = q.at(c), *KT = kt.at(c), *V = v.at(c), *M = has_mask ? mask.at(c) : nullptr;
    float* Y = y.at(c);
    const int64_t per_thread = kAttentionRows * shape.T;
    // One chunk a thread, so that chunk k may own scratch slot k.
    const int64_t nt = std::max<int64_t>(1, std::min<int64_t>(c.pool->threads(), threads));
    c.pool->parallel_for(nt, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
      float* scratch = c.workspace + t * per_thread;  // slot t: part t's alone
      for (int64_t s = slices * t / nt; s < slices * (t + 1) / nt; ++s) {
        AttentionSlice a = shape;
        a.q = Q + s * a.S * a.d;
        a.kt = KT + s * a.d * a.T;
        a.v = V + s * a.T * a.dv;
        a.y = Y + s * a.S * a.dv;
        if (M) {
          int64_t rem = s, off = 0;
          for (int i = lead - 1; i >= 0; --i) {
            const int64_t dim = i == 0 ? c.batch : dims[i];
            off += (rem % dim) * mask_stride[i];
            rem /= dim;
          }
          a.mask = M + off;
        }
        attention_slice(a, scratch);
      }
      }
    });
  }
};

}  // namespace

std::unique_ptr<Kernel> make_attention(const BuildCtx& bc, const Op& op, Status* st, std::string* msg) {
  if (!need_inputs(op, 3, 4, st, msg)) return nullptr;
  const TensorInfo &Q = bc.info(op.inputs[0]), &KT = bc.info(op.inputs[1]), &V = bc.info(op.inputs[2]);
  const TensorInfo& Y = bc.info(op.outputs[0]);
  const size_t r = Q.shape.size();
  auto lead_eq = [&](const TensorInfo& t) {
    return t.shape.size() == r && std::equal(t.shape.begin(), t.shape.end() - 2, Q.shape.begin());
  };
  if (Q.is_weight() || KT.is_weight() || V.is_weight() || r < 3 || r - 2 > size_t(kMaxLead) || !lead_eq(KT) ||
      !lead_eq(V) || !lead_eq(Y))
    return unsupported(op, "needs activations Q, Kt, V and Y of one rank (>= 3) and equal leading dims; Q " +
                               shape_str(Q.shape) + ", Kt " + shape_str(KT.shape) + ", V " + shape_str(V.shape), st, msg);
  auto k = std::make_unique<AttentionKernel>();
  AttentionSlice& a = k->shape;
  a.S = Q.shape[r - 2];
  a.d = Q.shape[r - 1];
  a.T = KT.shape[r - 1];
  a.dv = V.shape[r - 1];
  a.scale = op.attrs.scale;
  if (KT.shape[r - 2] != a.d || V.shape[r - 2] != a.T || Y.shape[r - 2] != a.S || Y.shape[r - 1] != a.dv)
    return unsupported(op, "shapes do not line up: Q " + shape_str(Q.shape) + ", Kt " + shape_str(KT.shape) + ", V " +
                               shape_str(V.shape) + ", Y " + shape_str(Y.shape), st, msg);
  k->lead = int(r - 2);
  for (int i = 1; i < k->lead; ++i) k->dims[i] = Q.shape[size_t(i)];
  if (op.inputs.size() > 3 && op.inputs[3] != kAbsentInput) {
    // The mask broadcasts (right-aligned) to the scores [lead..., S, T]; a weight has no batch.
    const TensorInfo& Mk = bc.info(op.inputs[3]);
    const int mr = int(Mk.shape.size()), full = int(r);
    if (mr > full || (!Mk.is_weight() && mr != full))
      return unsupported(op, "mask " + shape_str(Mk.shape) + " does not broadcast to the scores", st, msg);
    int64_t stride = 1;
    int64_t strides[kMaxLead + 2] = {};
    for (int i = full - 1; i >= 0; --i) {
      const int mi = i - (full - mr);
      if (mi < 0) continue;
      const int64_t md = Mk.shape[size_t(mi)];
      const int64_t want = i == full - 1 ? a.T : i == full - 2 ? a.S : i == 0 ? -1 : Q.shape[size_t(i)];
      if (i == 0 && !Mk.is_weight()) { strides[0] = stride; continue; }
      if (md != 1 && md != want)
        return unsupported(op, "mask " + shape_str(Mk.shape) + " does not broadcast to the scores", st, msg);
      strides[i] = md == 1 ? 0 : stride;
      stride *= md;
    }
    if (!Mk.is_weight()) strides[0] = Mk.elements();
    for (int i = 0; i < k->lead; ++i) k->mask_stride[i] = strides[i];
    a.mask_row = strides[full - 2];
    a.mask_col = strides[full - 1];
    k->has_mask = true;
    k->mask = bc.ref(op.inputs[3]);
  }
  k->threads = bc.threads;
  k->q = bc.ref(op.inputs[0]);
  k->kt = bc.ref(op.inputs[1]);
  k->v = bc.ref(op.inputs[2]);
  k->y = bc.ref(op.outputs[0]);
  return k;
}

}  // namespace memlane::cpu
