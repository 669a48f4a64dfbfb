// LSTM (batch-first, gates iofc, zero initial state): per direction one GEMM for every
// step's input projection, then per step one [B, H] x [H, 4H] GEMM and a gate kernel that
// updates h and c and writes Y (and, at the last step, Y_h / Y_c). Launches only, so a
// forward pass with an LSTM can still be captured into a CUDA graph.
#include "common.cuh"

namespace memlane::cuda {
namespace {
__device__ __forceinline__ float sigm(float v) { return 1.f / (1.f + expf(-v)); }

// gates [B, 4H] (h x R^T), proj rows b * S + t [4H] (x W^T), bias [8H] or null.
template <typename T>
__global__ void k_lstm_cell(const T* gates, const T* proj, const T* bias, T* h, T* c, T* y, T* yh,
                            T* yc, int64_t B, int64_t S, int64_t H, int D, int d, int64_t t,
                            bool last) {
  MEMLANE_GRID_STRIDE(k, B * H) {
    const int64_t b = k / H, j = k % H;
    const T* g = gates + b * 4 * H;
    const T* p = proj + (b * S + t) * 4 * H;
    float pre[4];
    for (int q = 0; q < 4; ++q) {
      const int64_t col = q * H + j;
      pre[q] = to_f(g[col]) + to_f(p[col]) + (bias ? to_f(bias[col]) + to_f(bias[4 * H + col]) : 0.f);
    }
    const float cv = sigm(pre[2]) * to_f(c[k]) + sigm(pre[0]) * tanhf(pre[3]);
    const float hv = sigm(pre[1]) * tanhf(cv);
    c[k] = from_f<T>(cv);
    h[k] = from_f<T>(hv);
    if (y) y[((b * S + t) * D + d) * H + j] = from_f<T>(hv);
    if (last && yh) yh[(b * D + d) * H + j] = from_f<T>(hv);
    if (last && yc) yc[(b * D + d) * H + j] = from_f<T>(cv);
  }
}
}  // namespace

int64_t lstm_work_elems_per_sample(int64_t S, int64_t H) { return S * 4 * H + 4 * H + 2 * H; }

cudaError_t lstm(const CublasApi& api, cublasHandle_t hdl, Prec p, const void* x, const void* W,
                 const void* R, const void* bias, void* y, void* yh, void* yc, void* work,
                 const LstmDesc& d, cudaStream_t s, int* cublas_status) {
  *cublas_status = 0;
  const int64_t B = d.B, S = d.S, I = d.I, H = d.H, es = prec_bytes(p);
  if (B <= 0 || S <= 0) return cudaSuccess;
  char* w8 = static_cast<char*>(work);
  void* proj = w8;
  void* gates = w8 + S * B * 4 * H * es;
  void* h = w8 + (S * B * 4 * H + B * 4 * H) * es;
  void* c = w8 + (S * B * 4 * H + B * 4 * H + B * H) * es;
  for (int dir = 0; dir < d.D; ++dir) {
    const bool back = dir == 1 || d.reverse;
    const char* Wd = static_cast<const char*>(W) + dir * 4 * H * I * es;
    const char* Rd = static_cast<const char*>(R) + dir * 4 * H * H * es;
    const char* bd = bias ? static_cast<const char*>(bias) + dir * 8 * H * es : nullptr;
    GemmDesc g;
    g.rows = B * S; g.K = I; g.N = 4 * H; g.transB = true;
    cudaError_t e = gemm(api, hdl, p, x, Wd, nullptr, proj, g, s, cublas_status);
    if (e != cudaSuccess) return e;
    if ((e = cudaMemsetAsync(h, 0, B * H * es, s)) != cudaSuccess) return e;
    if ((e = cudaMemsetAsync(c, 0, B * H * es, s)) != cudaSuccess) return e;
    GemmDesc r;
    r.rows = B; r.K = H; r.N = 4 * H; r.transB = true;
    for (int64_t step = 0; step < S; ++step) {
      const int64_t t = back ? S - 1 - step : step;
      e = step == 0 ? cudaMemsetAsync(gates, 0, B * 4 * H * es, s) : gemm(api, hdl, p, h, Rd, nullptr, gates, r, s, cublas_status);
      if (e != cudaSuccess) return e;
      e = dispatch(p, [&](auto tag) {
        using T = decltype(tag);
        k_lstm_cell<T><<<blocks_for(B * H), kThreads, 0, s>>>(
            static_cast<const T*>(gates), static_cast<const T*>(proj), reinterpret_cast<const T*>(bd),
            static_cast<T*>(h), static_cast<T*>(c), static_cast<T*>(y), static_cast<T*>(yh), static_cast<T*>(yc),
            B, S, H, d.D, dir, t, step == S - 1);
        return cudaGetLastError();
      });
      if (e != cudaSuccess) return e;
    }
  }
  return cudaSuccess;
}

}  // namespace memlane::cuda
