// Conv2d = im2col + strided-batched GEMM per group: for sample b and group g,
// Y[b, g] (Mg x P) = W[g] (Mg x Kg) * col[b, g] (Kg x P), Kg = C/group * kh * kw,
// P = OH * OW. A 1x1, stride-1, unpadded conv reads the input as col directly. The batch
// is processed in chunks whose col fits the scratch buffer (sized once at prepare).
// A grouped conv with few taps a group (depthwise above all) is computed directly instead:
// the GEMM path launches an im2col and a GEMM per group, 2 x 576 launches for one of
// mobilenet_v3's depthwise convs, each a [1 x 9] x [9 x P] product (measured on an H200:
// mobilenet_v3_small 9.9 ms at batch 1, 3.3x PyTorch eager).
#include <climits>

#include "common.cuh"

namespace memlane::cuda {
namespace {
// col[b][c*kh*kw + i*kw + j][oh*OW + ow] for the channels [c0, c0 + Cg) of sample b.
template <typename T>
__global__ void k_im2col(const T* x, T* col, ConvDesc d, int64_t c0, int64_t Cg, int64_t nb,
                         int64_t n) {
  const int64_t P = d.OH * d.OW, Kg = Cg * d.kh * d.kw;
  MEMLANE_GRID_STRIDE(i, n) {
    int64_t p = i % P, rest = i / P;
    int64_t k = rest % Kg, b = rest / Kg;
    int64_t j = k % d.kw, t = k / d.kw;
    int64_t ii = t % d.kh, c = t / d.kh;
    int64_t oh = p / d.OW, ow = p % d.OW;
    int64_t ih = oh * d.sh - d.ph + ii * d.dh, iw = ow * d.sw - d.pw + j * d.dw;
    float v = 0.f;
    if (ih >= 0 && ih < d.H && iw >= 0 && iw < d.W)
      v = to_f(x[((b * d.C + c0 + c) * d.H + ih) * d.W + iw]);
    col[i] = from_f<T>(v);
  }
  (void)nb;
}

// A thread an output element y[b, m, oh, ow], summing its group's Cg * kh * kw taps in
// float, bias and ReLU fused. Weights are [M][Cg][kh][kw], as the GEMM path reads them.
template <typename T>
__global__ void k_conv_direct(const T* x, const T* w, const T* bias, T* y, ConvDesc d, int64_t n) {
  const int64_t Cg = d.C / d.group, Mg = d.M / d.group, taps = Cg * d.kh * d.kw;
  MEMLANE_GRID_STRIDE(i, n) {
    const int64_t ow = i % d.OW, t = i / d.OW;
    const int64_t oh = t % d.OH, bm = t / d.OH;
    const int64_t m = bm % d.M, b = bm / d.M;
    const T* xg = x + (b * d.C + (m / Mg) * Cg) * d.H * d.W;
    const T* wm = w + m * taps;
    float acc = bias ? to_f(bias[m]) : 0.f;
    for (int64_t c = 0; c < Cg; ++c) {
      const T* xc = xg + c * d.H * d.W;
      for (int ii = 0; ii < d.kh; ++ii) {
        const int64_t ih = oh * d.sh - d.ph + ii * d.dh;
        if (ih < 0 || ih >= d.H) continue;
        for (int j = 0; j < d.kw; ++j) {
          const int64_t iw = ow * d.sw - d.pw + j * d.dw;
          if (iw >= 0 && iw < d.W) acc += to_f(xc[ih * d.W + iw]) * to_f(wm[(c * d.kh + ii) * d.kw + j]);
        }
      }
    }
    if (d.relu && acc < 0.f) acc = 0.f;
    y[i] = from_f<T>(acc);
  }
}

// Reads x[b] as col[b] ([C][H*W] = [Kg][P]): needs P == H*W, so every pad must be 0
// (a bottom/right pad alone makes OH > H and would read past the sample).
bool is_pointwise(const ConvDesc& d) {
  return d.kh == 1 && d.kw == 1 && d.sh == 1 && d.sw == 1 && d.ph == 0 && d.pw == 0 &&
         d.pb == 0 && d.pr == 0 && d.group == 1 && d.OH == d.H && d.OW == d.W;
}
}  // namespace

bool conv_is_direct(const ConvDesc& d) {
  return d.group > 1 && (d.C / d.group) * d.kh * d.kw <= kConvDirectMaxTaps;
}

int64_t conv_col_elems_per_sample(const ConvDesc& d) {
  if (is_pointwise(d) || conv_is_direct(d)) return 0;
  return (d.C / d.group) * d.kh * d.kw * d.OH * d.OW;
}

cudaError_t conv2d(const CublasApi& api, cublasHandle_t h, Prec p, const void* x, const void* w,
                   const void* bias, void* y, void* col, int64_t col_elems, const ConvDesc& d,
                   cudaStream_t s, int* cublas_status) {
  *cublas_status = 0;
  if (conv_is_direct(d)) {
    const int64_t n = d.N * d.M * d.OH * d.OW;
    if (n <= 0) return cudaSuccess;
    return dispatch(p, [&](auto tag) {
      using T = decltype(tag);
      k_conv_direct<T><<<blocks_for(n), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<const T*>(w),
                                                           static_cast<const T*>(bias), static_cast<T*>(y), d, n);
      return cudaGetLastError();
    });
  }
  const int64_t G = d.group, Cg = d.C / G, Mg = d.M / G, Kg = Cg * d.kh * d.kw;
  const int64_t P = d.OH * d.OW;
  const int64_t es = prec_bytes(p);
  const int64_t per_sample = conv_col_elems_per_sample(d);
  int64_t chunk = d.N;
  if (per_sample > 0) {
    chunk = col_elems / per_sample;
    if (chunk < 1) return cudaErrorInvalidValue;  // scratch sized at prepare: a bug
    if (chunk > d.N) chunk = d.N;
  }
  // cuBLAS takes int sizes and batch counts.
  if (P > INT_MAX || Mg > INT_MAX || Kg > INT_MAX || chunk > INT_MAX) return cudaErrorInvalidValue;
  const float one = 1.f, zero = 0.f;
  for (int64_t b0 = 0; b0 < d.N; b0 += chunk) {
    const int64_t nb = (d.N - b0 < chunk) ? d.N - b0 : chunk;
    for (int64_t g = 0; g < G; ++g) {
      const char* xb = static_cast<const char*>(x) + (b0 * d.C * d.H * d.W) * es;
      const void* B;  // col for this chunk and group: [nb][Kg][P]
      if (per_sample == 0) {
        B = xb;  // pointwise: x[b] is already [C][H*W] = [Kg][P]
      } else {
        int64_t n = nb * Kg * P;
        cudaError_t e = dispatch(p, [&](auto tag) {
          using T = decltype(tag);
          k_im2col<T><<<blocks_for(n), kThreads, 0, s>>>(static_cast<const T*>((const void*)xb),
                                                          static_cast<T*>(col), d, g * Cg, Cg,
                                                          nb, n);
          return cudaGetLastError();
        });
        if (e != cudaSuccess) return e;
        B = col;
      }
      const void* Wg = static_cast<const char*>(w) + (g * Mg * Kg) * es;
      void* Yg = static_cast<char*>(y) + ((b0 * d.M + g * Mg) * P) * es;
      // Column-major: Y^T (P x Mg) = col^T (P x Kg) * W^T (Kg x Mg), per sample.
      const long long strideB = per_sample == 0 ? d.C * d.H * d.W : Kg * P;
      const long long strideY = d.M * P;
      if (p == Prec::kF32) {
        *cublas_status = api.sgemm_strided_batched(
            h, CUBLAS_OP_N, CUBLAS_OP_N, (int)P, (int)Mg, (int)Kg, &one,
            static_cast<const float*>(B), (int)P, strideB, static_cast<const float*>(Wg),
            (int)Kg, 0, &zero, static_cast<float*>(Yg), (int)P, strideY, (int)nb);
      } else {
        *cublas_status = api.gemm_strided_batched_ex(
            h, CUBLAS_OP_N, CUBLAS_OP_N, (int)P, (int)Mg, (int)Kg, &one, B, CUDA_R_16F, (int)P,
            strideB, Wg, CUDA_R_16F, (int)Kg, 0, &zero, Yg, CUDA_R_16F, (int)P, strideY,
            (int)nb, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
      }
      if (*cublas_status != 0) return cudaErrorUnknown;
    }
  }
  return bias_activation(p, y, bias, d.N, d.M, P, d.relu, s);
}

}  // namespace memlane::cuda
