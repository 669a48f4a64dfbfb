// The CUDA ops, with plain pointer interfaces (no Plan types): each op's .cu file in ops/
// defines its launchers. Every launcher only enqueues work on `stream` (no allocation, no
// synchronisation), so a whole forward pass can be captured into a CUDA graph.
// `Prec` selects float or __half storage; arithmetic is always done in float.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cublas_loader.h"

namespace memlane::cuda {

enum class Prec : uint8_t { kF32, kF16 };
inline int prec_bytes(Prec p) { return p == Prec::kF32 ? 4 : 2; }

inline constexpr int kMaxRank = 6;

// ops/cast.cu: fp32 <-> fp16 (also used to upload weights).
cudaError_t cast_f32_to_f16(const float* x, void* y, int64_t n, cudaStream_t s);
cudaError_t cast_f16_to_f32(const void* x, float* y, int64_t n, cudaStream_t s);

// ops/unary.cu: y = f(x) elementwise (in place allowed).
enum class UnaryKind : uint8_t { kRelu, kLeakyRelu, kSigmoid, kTanh, kErf, kGelu, kGeluTanh };
cudaError_t unary(UnaryKind k, float alpha, Prec p, const void* x, void* y, int64_t n,
                  cudaStream_t s);

// Add/Sub/Mul/Div (every dtype, numpy broadcasting): data_kernels.h, data_binary.

// ops/bias_act.cu: y[n, c, i] += bias[c] (bias may be null), then the activation; y is
// [outer, channels, inner].
cudaError_t bias_activation(Prec p, void* y, const void* bias, int64_t outer, int64_t channels,
                            int64_t inner, bool relu, cudaStream_t s);

// ops/gemm.cu: row-major Y[rows, N] = alpha * A[rows, K] x op(B) + beta * C, op(B) = B[K, N]
// or B[N, K] transposed; C is a bias broadcast over rows: c_len == N (per column), 1, or 0
// (absent). Then optional ReLU. Also serves MatMul (alpha 1, no C).
struct GemmDesc {
  int64_t rows = 0, K = 0, N = 0;
  bool transB = false;
  float alpha = 1.f, beta = 1.f;
  int64_t c_len = 0;
  bool relu = false;
};
cudaError_t gemm(const CublasApi& api, cublasHandle_t h, Prec p, const void* A, const void* B,
                 const void* C, void* Y, const GemmDesc& d, cudaStream_t s, int* cublas_status);

// ops/conv.cu: 2-D convolution as im2col + strided-batched GEMM (1x1/stride 1/no pad
// skips im2col), bias and ReLU fused in an epilogue. `col` is scratch of `col_elems`
// elements; the batch is processed in chunks that fit it (conv_col_elems gives the
// per-sample need).
struct ConvDesc {
  int64_t N = 0, C = 0, H = 0, W = 0;  // input
  int64_t M = 0, OH = 0, OW = 0;       // output channels and size
  // ph/pw are the top/left pads (im2col's origin); pb/pr (bottom/right) only enlarge OH/OW,
  // but a 1x1 conv with any of them is not pointwise (its output is bigger than its input).
  int kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, pb = 0, pr = 0, dh = 1, dw = 1, group = 1;
  bool relu = false;
};
// A grouped conv with at most this many taps a group (Cg * kh * kw: depthwise 3x3 to 7x7,
// ResNeXt's and RegNet's groups of up to 32 channels at 3x3) runs as one direct kernel instead
// of im2col + a GEMM per group, and needs no im2col scratch. Measured faster on depthwise convs
// (H200: mobilenet_v3_small 9.9 -> 0.45 ms at batch 1); for wider groups the cut is a guess.
constexpr int64_t kConvDirectMaxTaps = 288;
bool conv_is_direct(const ConvDesc& d);
int64_t conv_col_elems_per_sample(const ConvDesc& d);  // 0 when no im2col is needed
cudaError_t conv2d(const CublasApi& api, cublasHandle_t h, Prec p, const void* x, const void* w,
                   const void* bias, void* y, void* col, int64_t col_elems, const ConvDesc& d,
                   cudaStream_t s, int* cublas_status);

// ops/conv_transpose.cu: 2-D ConvTranspose, one thread an output element (no scratch). d.M is
// the output channels; ph/pw the top/left pads of the plan (they may be negative).
cudaError_t conv_transpose2d(Prec p, const void* x, const void* w, const void* bias, void* y, const ConvDesc& d,
                             cudaStream_t s);

// ops/maxpool.cu and ops/avgpool.cu: x [NC, H, W] -> y [NC, OH, OW].
struct PoolDesc {
  int64_t NC = 0, H = 0, W = 0, OH = 0, OW = 0;
  int kh = 1, kw = 1, sh = 1, sw = 1, pt = 0, pl = 0, pb = 0, pr = 0, dh = 1, dw = 1;
  bool countIncludePad = false;
};
cudaError_t maxpool2d(Prec p, const void* x, void* y, const PoolDesc& d, cudaStream_t s);
cudaError_t avgpool2d(Prec p, const void* x, void* y, const PoolDesc& d, cudaStream_t s);
// GlobalAveragePool: x [NC, HW] -> y [NC].
cudaError_t global_avgpool(Prec p, const void* x, void* y, int64_t NC, int64_t HW, cudaStream_t s);

// ops/softmax.cu: softmax (or, `log`, log-softmax) over the middle dimension of [outer, axis, inner].
cudaError_t softmax(Prec p, const void* x, void* y, int64_t outer, int64_t axis, int64_t inner, bool log,
                    cudaStream_t s);

// ops/concat.cu (Concat of any dtype): data_kernels.h, concat_part_bytes.

// ops/transpose.cu: y = x.transpose(perm), x of shape in_dims (rank <= kMaxRank).
cudaError_t transpose(Prec p, const void* x, void* y, int rank, const int64_t* in_dims,
                      const int* perm, cudaStream_t s);

// Transformer ops (ops/layernorm.cu, ops/math.cu, ops/reduce.cu, ops/matmul_batched.cu).

// y[r, :] = (x[r, :] - mean) / sqrt(var + eps) * scale + bias over `rows` rows of n;
// scale/bias are device arrays of n in the storage precision (bias may be null).
cudaError_t layernorm(Prec p, const void* x, void* y, const void* scale, const void* bias, int64_t rows,
                      int64_t n, float eps, cudaStream_t s);

// y = f(x) elementwise, computed in float.
enum class MathKind : uint8_t {
  kPow, kSqrt, kReciprocal, kExp, kNeg, kLog, kAbs,
  kSin, kCos, kTan, kAsin, kAcos, kAtan, kSinh, kCosh, kAsinh, kAcosh, kAtanh,
  kElu, kSelu, kCelu, kSoftplus, kSoftsign, kMish, kThresholdedRelu,
};
// a: Pow's exponent, or alpha (Elu, Selu, Celu, ThresholdedRelu); b: Selu's gamma.
struct MathArgs {
  float a = 1.f;
  float b = 1.f;
};
cudaError_t math(MathKind k, MathArgs m, Prec p, const void* x, void* y, int64_t n, cudaStream_t s);

// Reduce x (dims, row-major) over the axes flagged in `reduced`; y holds the kept dims in order.
enum class ReduceOp : uint8_t { kMean, kSum, kMax };
struct ReduceDesc {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  bool reduced[kMaxRank] = {};
};
cudaError_t reduce(ReduceOp k, Prec p, const void* x, void* y, const ReduceDesc& d, cudaStream_t s);

// Y[l] = A[l] x B[l] over the broadcast leading dims l (element strides per leading dim, 0 =
// broadcast); Y's [M, N] slices are contiguous. One strided-batched cuBLAS call per index of
// all leading dims but the last.
struct BatchedMatMulDesc {
  int lead = 0;
  int64_t dims[kMaxRank] = {};
  int64_t a_stride[kMaxRank] = {};
  int64_t b_stride[kMaxRank] = {};
  int64_t M = 0, K = 0, N = 0;
};
cudaError_t matmul_batched(const CublasApi& api, cublasHandle_t h, Prec p, const void* A, const void* B, void* Y,
                           const BatchedMatMulDesc& d, cudaStream_t s, int* cublas_status);

// ops/attention.cu: the fused Attention op, y = softmax(q x kt * scale + mask) x v per slice of
// the leading dims (q [S, d], kt [d, T], v [T, dv], y [S, dv] contiguous per slice); the mask
// element (slice, i, j) is at mask[off(slice) + i * mask_row + j * mask_col] (null: none).
// One block per query row, the T scores in shared memory (T <= kAttentionMaxT).
inline constexpr int64_t kAttentionMaxT = 8192;
struct AttentionDesc {
  int lead = 0;
  int64_t dims[kMaxRank] = {};
  int64_t mask_stride[kMaxRank] = {};
  int64_t mask_row = 0, mask_col = 0;
  int64_t S = 0, T = 0, d = 0, dv = 0;
  float scale = 1.f;
};
cudaError_t attention(Prec p, const void* q, const void* kt, const void* v, const void* mask, void* y,
                      const AttentionDesc& d, cudaStream_t s);

// ops/clip_hard.cu: Clip (a, b = min, max), HardSigmoid (a, b = alpha, beta), HardSwish, SiLU.
enum class ClipHardKind : uint8_t { kClip, kHardSigmoid, kHardSwish, kSiLU };
cudaError_t clip_hard(ClipHardKind k, float a, float b, Prec p, const void* x, void* y, int64_t n,
                      cudaStream_t s);

// ops/pad.cu: y = pad(x), x of shape in_dims (rank <= kMaxRank, the batch included);
// pads = rank begins then rank ends (may be negative); mode 0 constant, 1 reflect, 2 edge.
cudaError_t pad(Prec p, const void* x, void* y, int rank, const int64_t* in_dims, const int64_t* pads,
                int mode, float value, cudaStream_t s);

// ops/split.cu: y [outer, ydim * inner] = the columns [at, at + ydim) * inner of
// x [outer, xdim * inner] (one call per output). Concat's weight input, repeated for every
// sample: concat_repeat_part_bytes (data_kernels.h).
cudaError_t split_part(Prec p, const void* x, void* y, int64_t outer, int64_t xdim, int64_t ydim,
                       int64_t at, int64_t inner, cudaStream_t s);

// ops/lstm.cu: batch-first LSTM (X [B, S, I], Y [B, S, D, H], Y_h / Y_c [B, D, H]; any
// output may be null), W [D, 4H, I], R [D, 4H, H], bias [D, 8H] or null, zero initial
// state. `work` holds B * lstm_work_elems_per_sample(S, H) elements.
struct LstmDesc {
  int64_t B = 0, S = 0, I = 0, H = 0;
  int D = 1;
  bool reverse = false;
};
int64_t lstm_work_elems_per_sample(int64_t S, int64_t H);
cudaError_t lstm(const CublasApi& api, cublasHandle_t h, Prec p, const void* x, const void* W,
                 const void* R, const void* bias, void* y, void* yh, void* yc, void* work,
                 const LstmDesc& d, cudaStream_t s, int* cublas_status);

}  // namespace memlane::cuda
